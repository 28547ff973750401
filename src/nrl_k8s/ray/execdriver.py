"""The exec submitter (``submit.submitter: exec``): the driver started on the training cluster's
head pod through ``pods/exec`` (``podexec``), detached, instead of through the Ray dashboard.

Each run gets a directory ``<submit.execTmpDir>/nrl-<run id>`` on the head pod (created with
``mkdir``, so a run id is used once; umask 077: private to the pod's user) holding:

- ``driver.sh``: ``export NAME='value'`` for the run's env (each value shell-quoted), ``cd`` to the
  code path, then ``launch.entrypoint`` (``driver_script``);
- ``recipe.yaml``: the final recipe (``$NRL_K8S_RECIPE``);
- ``started`` (epoch seconds; a run is listed once it exists), ``pid`` (the driver's process
  group), ``stdout.log`` (its output, kept after it ends), ``exitcode`` (written when it ends by
  itself; absent when it was killed).

Both files travel on the exec's stdin: every command line is one of the fixed scripts below plus
paths and numbers, so no value (secret or not) is ever on a command line. Secret ``launch.env``
values are not written at all: the run's ``<cluster>-env`` Secret already puts them in the Ray
container's environment, which exec'd processes inherit.

A driver is RUNNING while a process of its group lives (zombies excluded: a pod's PID 1 need
not reap), SUCCEEDED / FAILED by its exit code, STOPPED when it ended without one (``job stop``
sends TERM to the group, ``--force`` KILL). Its log is followed with ``tail -F --pid`` (GNU
coreutils, as in every Ray image) until the group is gone.

The scripts and ``driver_script`` are pure; ``ExecDrivers`` talks to the cluster.
"""

from __future__ import annotations

import codecs
import posixpath
import shlex
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from nrl_k8s.config.workflow import DEFAULT_TMP_DIR
from nrl_k8s.errors import ConfigError, InfraError, NotFoundError, ResourceFailed, WaitTimeout
from nrl_k8s.kinds.raycluster import KIND_METADATA
from nrl_k8s.kube.closing import Closing

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

DIR_PREFIX = "nrl-"
LOG_NAME = "stdout.log"
RECIPE_NAME = "recipe.yaml"
STOP_TIMEOUT_S = 120  # how long stopped jobs may take to end (flows.raycluster waits as long for Ray's)
_FOLLOW_RETRIES = 8

# -- the scripts (each runs as ``sh -c SCRIPT sh ARG...``: arguments are never parsed as code) ----

# ``alive PGID``: a process of that group that is not a zombie; ``state DIR``: "RUNNING -",
# "EXITED CODE" or "STOPPED -".
_STATE = r'''
alive() {
  g=$1
  for f in /proc/[0-9]*/stat; do
    { read -r s < "$f"; } 2>/dev/null || continue
    s=${s##*) }
    set -- $s
    [ "$3" = "$g" ] && [ "$1" != Z ] && return 0
  done
  return 1
}
state() {
  if [ -s "$1/exitcode" ]; then echo "EXITED $(cat "$1/exitcode")"; return; fi
  g=$(cat "$1/pid" 2>/dev/null)
  if [ -n "$g" ] && alive "$g"; then echo "RUNNING -"; return; fi
  if [ -s "$1/exitcode" ]; then echo "EXITED $(cat "$1/exitcode")"; else echo "STOPPED -"; fi
}
'''
# $1 run dir, $2 file name, $3 its size in bytes, $4 "new": create the run dir (it must not exist).
WRITE = r'''
umask 077
if [ "$4" = new ]; then
  mkdir -p -- "$(dirname -- "$1")" || { echo NO-PARENT; exit 0; }
  mkdir -- "$1" 2>/dev/null || { echo EXISTS; exit 0; }
fi
head -c "$3" > "$1/$2.tmp" && mv -f -- "$1/$2.tmp" "$1/$2" && echo WROTE
'''
# Run by ``START`` in the run dir, in a session of its own (its pid is the group's id).
RUN = r'''
umask 077
echo $$ > pid.tmp && mv -f pid.tmp pid
shell=sh
command -v bash > /dev/null 2>&1 && shell=bash
"$shell" ./driver.sh > stdout.log 2>&1 < /dev/null
echo $? > exitcode.tmp && mv -f exitcode.tmp exitcode
'''
# $1 run dir, $2 the RUN script.
START = r'''
umask 077
cd "$1" || { echo NO-DIR; exit 0; }
command -v setsid > /dev/null 2>&1 || { echo NO-SETSID; exit 0; }
date +%s > started
setsid sh -c "$2" nrl-k8s-driver < /dev/null > /dev/null 2>&1 &
echo $! > pid
echo "STARTED $!"
'''
# $1 run dir: its state. Prints "MISSING -" when no run started there.
STATUS = _STATE + r'''
if [ -f "$1/started" ]; then state "$1"; else echo "MISSING -"; fi
'''
# $1 a tmp dir: one line per run in it, "ID STATE CODE STARTED".
LIST = _STATE + r'''
for d in "$1"/nrl-*; do
  [ -f "$d/started" ] || continue
  echo "${d##*/nrl-} $(state "$d") $(cat "$d/started" 2>/dev/null || echo -)"
done
'''
# $1 run dir, $2 TERM or KILL: signal the group while it runs; prints SIGNALLED or the state.
STOP = _STATE + r'''
st=$(state "$1")
case $st in
  RUNNING*) kill -s "$2" -- "-$(cat "$1/pid")" 2>/dev/null && echo SIGNALLED || echo "$st" ;;
  *) echo "$st" ;;
esac
'''
# $1 run dir, $2 seconds: until the group is gone (or the time is up); prints the state.
WAIT_GONE = _STATE + r'''
i=0
while :; do
  st=$(state "$1")
  case $st in RUNNING*) ;; *) echo "$st"; exit 0 ;; esac
  [ "$i" -ge "$2" ] && { echo "$st"; exit 0; }
  sleep 1
  i=$((i + 1))
done
'''
# $1 run dir; $2 all: the whole log; lines: its last $3 lines; snapshot: its size in bytes, then
# the last $3 lines of that much; follow: from byte $3 on, until the group is gone.
LOG = _STATE + r'''
cd "$1" || exit 0
case $2 in
  all) cat stdout.log 2>/dev/null; exit 0 ;;
  lines) tail -n "$3" stdout.log 2>/dev/null; exit 0 ;;
  snapshot)
    s=$( { wc -c < stdout.log; } 2>/dev/null || echo 0)
    s=$((s))
    echo "$s"
    head -c "$s" stdout.log 2>/dev/null | tail -n "$3"
    exit 0 ;;
esac
g=$(cat pid 2>/dev/null)
( while [ -n "$g" ] && alive "$g"; do sleep 1; done ) &
tail -c "+$3" -F --pid=$! stdout.log 2>/dev/null
'''


def run_dir(tmp_dir: str, run_id: str) -> str:
    """Where run ``run_id`` lives on the head pod."""
    return posixpath.join(tmp_dir, f"{DIR_PREFIX}{run_id}")


def driver_script(entrypoint: str, env: dict[str, str], code_path: str | None = None) -> str:
    """``driver.sh``: the env exported (names are checked identifiers, values shell-quoted), the
    code path entered, then the entrypoint as the user wrote it (it is a shell command line)."""
    lines = ["# nrl-k8s: one run's driver, started through pods/exec (run.sh records its exit code)"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    if code_path:
        lines.append(f"cd {shlex.quote(code_path)} || exit 1")
    lines.append(entrypoint)
    return "\n".join(lines) + "\n"


def check_tmp_dir(tmp_dir: str) -> str:
    """``submit.execTmpDir``: an absolute path, as the scripts expect."""
    if not tmp_dir.startswith("/") or "\n" in tmp_dir:
        raise InfraError(("submit", "execTmpDir"), f"{tmp_dir!r} is not an absolute path",
                         hint="e.g. /tmp (the default): a directory on the head pod for the exec driver's files")
    return tmp_dir.rstrip("/") or "/"


def parse_state(text: str) -> tuple[str, int | None]:
    """("RUNNING" | "SUCCEEDED" | "FAILED" | "STOPPED" | "MISSING", exit code) of a ``state`` line."""
    word, _, code = text.strip().partition(" ")
    if word == "EXITED":
        try:
            value = int(code)
        except ValueError:
            return "FAILED", None
        return ("SUCCEEDED" if value == 0 else "FAILED"), value
    return (word if word in ("RUNNING", "STOPPED", "MISSING") else "STOPPED"), None


# -- on the cluster ---------------------------------------------------------------------------

class ExecDrivers(Closing):
    """The exec drivers of one RayCluster: runs under ``tmp_dirs`` on its (current) head pod.

    Quacks like ``dashboard.Dashboard`` for what ``driver_log.follow`` and the job commands use
    (``list_jobs``, ``get_job``, ``logs``, ``follow_logs``, ``stop``), so a flow or a command
    reads an exec driver the way it reads a Ray job.
    """

    def __init__(self, kube: Kube, namespace: str, cluster: str, tmp_dirs: list[str], *, pod: str | None = None,
                 container: str | None = None, runner=None):
        """``pod`` and ``container``: use these (else the newest Running head pod and its Ray container);
        ``runner``: what runs the commands (default ``podexec.PodExec``; tests run them locally)."""
        self.kube, self.ns, self.cluster = kube, namespace, cluster
        self.tmp_dirs = list(dict.fromkeys(tmp_dirs)) or [DEFAULT_TMP_DIR]
        self._pod, self._container = pod, container
        if runner is None:
            from nrl_k8s.kube.podexec import PodExec

            runner = PodExec(kube.connection, namespace)
        self._exec = runner

    def close(self) -> None:
        self._exec.close()

    # -- the head pod ------------------------------------------------------------------------
    @property
    def pod(self) -> str:
        """The head pod (the one given, else the newest Running one); NotFoundError when none runs."""
        if self._pod is None or self._container is None:
            from nrl_k8s.kinds import pod

            selector = f"ray.io/cluster={self.cluster},ray.io/node-type=head"
            pods = [p for p in self.kube.list(pod.KIND, self.ns, label_selector=selector)
                    if (p.get("status") or {}).get("phase") == "Running"
                    and (self._pod is None or p["metadata"]["name"] == self._pod)]
            if not pods:
                which = f"head pod {self._pod}" if self._pod else "running head pod"
                raise NotFoundError(
                    f"no {which} of RayCluster {self.cluster} in namespace {self.ns}: the exec driver's "
                    "files (and log) live on it",
                    hint=f"kubectl -n {self.ns} get pods -l {shlex.quote(selector)}",
                )
            newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
            self._pod = newest["metadata"]["name"]
            self._container = newest["spec"]["containers"][0]["name"]  # the Ray container
        return self._pod

    def _run(self, script: str, *args: str, stdin: bytes | None = None) -> str:
        """One fixed ``script`` with ``args`` on the head pod; its stdout (an error when it failed)."""
        pod = self.pod
        done = self._exec.run(pod, ["sh", "-c", script, "sh", *args], container=self._container, stdin=stdin)
        if done.code != 0:
            detail = done.stderr.decode("utf-8", errors="replace").strip() or done.error
            raise ResourceFailed(f"a command on head pod {self.ns}/{pod} failed: {detail or 'no reason given'}",
                                 hint=f"kubectl -n {self.ns} exec {pod} -- sh -c true   # does exec work there?")
        return done.text

    # -- submitting --------------------------------------------------------------------------
    def prepare(self, directory: str, driver: str, recipe: str) -> str:
        """Write ``driver`` (``driver.sh``) and ``recipe`` into the new run dir ``directory``; the head
        pod's name. Nothing runs yet (``start``), and the run is not listed until it starts."""
        files = [("driver.sh", driver.encode()), (RECIPE_NAME, recipe.encode())]
        for index, (name, data) in enumerate(files):
            said = self._run(WRITE, directory, name, str(len(data)), "new" if index == 0 else "", stdin=data).strip()
            if said == "EXISTS":
                raise ConfigError(
                    f"run {posixpath.basename(directory)[len(DIR_PREFIX) :]} already has a directory on head "
                    f"pod {self.pod} ({directory}): a run id is used once",
                    hint="pass another --run-id (or none: one is generated)",
                )
            if said != "WROTE":
                raise ResourceFailed(
                    f"could not write {directory}/{name} on head pod {self.pod} ({said or 'no answer'})",
                    hint="check submit.execTmpDir: the pod's user must be able to create it",
                )
        return self.pod

    def start(self, directory: str) -> None:
        """Start the prepared run in ``directory``, detached, in a session of its own."""
        said = self._run(START, directory, RUN).strip()
        if not said.startswith("STARTED"):
            raise ResourceFailed(f"could not start the driver on head pod {self.pod} ({said or 'no answer'})",
                                 hint="the exec submitter needs sh, setsid and GNU tail in the Ray image; "
                                 "or use --submitter dashboard")

    # -- reading -----------------------------------------------------------------------------
    def list_jobs(self):
        """Every run under the tmp dirs, as ``JobInfo`` (newest last)."""
        from .dashboard import JobInfo

        found = []
        for tmp in self.tmp_dirs:
            for line in self._run(LIST, tmp).splitlines():
                parts = line.split()
                if len(parts) != 4:
                    continue
                run_id, word, code, started = parts
                status, exit_code = parse_state(f"{word} {code}")
                found.append(self._info(JobInfo, run_id, run_dir(tmp, run_id), status, exit_code,
                                        int(started) * 1000 if started.isdigit() else None))
        return sorted(found, key=lambda j: j.start_time or 0)

    def get_job(self, run_id: str):
        """Run ``run_id`` as a ``JobInfo``, or None when no tmp dir holds it."""
        from .dashboard import JobInfo

        for tmp in self.tmp_dirs:
            directory = run_dir(tmp, run_id)
            status, code = parse_state(self._run(STATUS, directory))
            if status != "MISSING":
                return self._info(JobInfo, run_id, directory, status, code, None)
        return None

    def _info(self, job_info, run_id: str, directory: str, status: str, code: int | None, start: int | None):
        message = f"exec on pod {self.pod}, log {directory}/{LOG_NAME}"
        if code is not None:
            message += f", exit code {code}"
        return job_info(submission_id=run_id, job_id=None, status=status, message=message,
                        entrypoint=f"[exec] {directory}/driver.sh", start_time=start, driver_exit_code=code,
                        metadata={KIND_METADATA: "driver", "nrl-k8s.io/submitter": "exec"})

    def directory(self, run_id: str) -> str:
        """The run dir of ``run_id``; NotFoundError naming where it looked."""
        for tmp in self.tmp_dirs:
            directory = run_dir(tmp, run_id)
            if parse_state(self._run(STATUS, directory))[0] != "MISSING":
                return directory
        raise NotFoundError(f"no exec driver {run_id} on head pod {self.pod} (looked in {', '.join(self.tmp_dirs)})",
                            hint="`nrl-k8s job list` lists the drivers on the cluster")

    def logs(self, run_id: str, tail: int | None = None) -> str:
        """Its log so far (the last ``tail`` lines)."""
        directory = self.directory(run_id)
        return self._run(LOG, directory, "all") if tail is None else self._run(LOG, directory, "lines", str(tail))

    def follow_logs(self, run_id: str, *, deadline_s: float | None = None, tail: int | None = None) -> Iterator[str]:
        """Its log from the start (or its last ``tail`` lines) as it is written, until its process
        group is gone; a dropped stream is reopened at the byte where it stopped. WaitTimeout past
        ``deadline_s``."""
        from nrl_k8s.kube.podexec import ExecDropped

        directory = self.directory(run_id)
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        received = attempt = 0  # bytes of the log yielded
        if tail is not None:
            size, _, text = self._run(LOG, directory, "snapshot", str(tail)).partition("\n")
            received = int(size.strip() or 0)
            if text:
                yield text
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            argv = ["sh", "-c", LOG, "sh", directory, "follow", str(received + 1)]
            try:
                for data in self._exec.stream(self.pod, argv, container=self._container):
                    if deadline is not None and time.monotonic() > deadline:
                        raise WaitTimeout(f"driver {run_id} still runs after {deadline_s:g}s",
                                          hint=f"it keeps running: `nrl-k8s logs -f --run {run_id}` follows it, "
                                               f"`nrl-k8s job stop --run {run_id}` stops it")
                    if data:
                        received, attempt = received + len(data), 0
                        if text := decoder.decode(data):
                            yield text
                break
            except ExecDropped:
                if attempt >= _FOLLOW_RETRIES:
                    raise
                attempt += 1
                time.sleep(min(5.0, 0.25 * 2 ** attempt))  # backoff before reconnecting
        if rest := decoder.decode(b"", final=True):
            yield rest

    # -- stopping ----------------------------------------------------------------------------
    def stop(self, run_id: str, *, force: bool = False) -> bool:
        """TERM (``force``: KILL) to its process group; False when it was not running."""
        said = self._run(STOP, self.directory(run_id), "KILL" if force else "TERM").strip()
        return said == "SIGNALLED"

    def stop_all(self, jobs, emit: Callable, *, force: bool = False) -> None:
        """Stop ``jobs`` (running ones, as ``list_jobs`` gives them) and wait until each is gone."""
        from nrl_k8s.events import Became, Waiting

        for job in jobs:
            self.stop(job.submission_id, force=force)
            emit(Waiting(f"job {job.submission_id}", "stopping (exec)"))
        for job in jobs:
            status, _ = parse_state(self._run(WAIT_GONE, self.directory(job.submission_id), str(STOP_TIMEOUT_S)))
            if status == "RUNNING":
                raise ResourceFailed(f"exec driver {job.submission_id} did not stop within {STOP_TIMEOUT_S}s",
                                     hint=f"kill it: nrl-k8s job stop --run {job.submission_id} --force")
            emit(Became(f"job {job.submission_id}", "stopped"))
