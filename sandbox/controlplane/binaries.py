"""The control plane's binaries: pinned versions built from the Go module proxy, once per machine.

``nrl-k8s sandbox build`` (``make setup``) builds, with the Go toolchain, each Go module under
``go/`` beside this file (a go.mod and go.sum each, so every dependency is pinned):

* ``cluster``: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
  ``k8s.io/kubernetes`` (the staging modules replaced by their published versions), stamped with
  the version so ``kubectl version`` tells the truth; the etcd server of ``go.etcd.io/etcd/server/v3``;
  kwok, fake nodes and the pod lifecycle (``sigs.k8s.io/kwok``). One module and one version set for
  all six (its go.mod says which), so their one ``go build`` compiles the libraries they share once;
* ``kuberay``: the KubeRay operator (``github.com/ray-project/kuberay/ray-operator``);
* ``kueue``: the Kueue manager (``sigs.k8s.io/kueue``), which only ``sandbox up --kueue`` starts, so it
  is built only when asked (``sandbox build --kueue``, which ``make test`` runs; ``make setup`` and
  ``make demo`` do not): it is a quarter of a first build's CPU.

The CRDs come from the same modules: KubeRay's RayCluster and RayJob, kwok's, Kueue's (and its webhook
manifests; only its step of ``serve`` applies them). Everything lands in
``~/.cache/nrl-k8s/control-plane/<versions>/`` (``bin/`` and ``crds/``), written to a temporary folder
and renamed into place only when complete (Kueue, when built later, is moved in file by file, its
binary last), under a lock so two builds never race. ``$NRL_K8S_CONTROL_PLANE_BIN`` names a folder
of prebuilt binaries (and ``crds/`` beside them or inside it) instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from nrl_k8s.errors import SandboxError

from . import kueue

GO_DIR = Path(__file__).with_name("go")
KUBERNETES = "v1.36.3"
ETCD = "v3.6.16"
KWOK = "v0.8.0"
KUBERAY = "v1.6.1"  # helm/ pins 1.7.0, whose module archive the proxy refuses (403)
KUBERAY_OLD = "v1.5.1"  # its RayJob CRD, without preRunningDeadlineSeconds (the old-rayjob-crd fault)
KUEUE = "v0.17.0"  # started only by `sandbox up --kueue` (controlplane/kueue.py)
ENV_BIN = "NRL_K8S_CONTROL_PLANE_BIN"
GO_HINT = "install Go 1.26 or newer (https://go.dev/dl, or Debian's golang-go), or set " \
          f"{ENV_BIN} to a folder of prebuilt binaries"


@dataclass(frozen=True)
class Target:
    """One ``go build`` in one of our modules."""

    module: str  # folder under go/
    package: str  # what to build, in that module
    output: str  # binary name
    ldflags: str = ""


#: The cluster module's one link stamp (a -X of a variable a binary lacks is ignored): the Kubernetes
#: version, which kwok's copy of component-base reports too, and kwok's.
_STAMP = " ".join([
    f"-X k8s.io/component-base/version.gitVersion={KUBERNETES}",
    f"-X k8s.io/component-base/version.gitMajor={KUBERNETES[1:].split('.')[0]}",
    f"-X k8s.io/component-base/version.gitMinor={KUBERNETES[1:].split('.')[1]}",
    "-X k8s.io/component-base/version.gitTreeState=clean",
    f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK}",
])
TARGETS = (
    Target("cluster", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver", _STAMP),
    Target("cluster", "k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager", _STAMP),
    Target("cluster", "k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler", _STAMP),
    Target("cluster", "k8s.io/kubernetes/cmd/kubectl", "kubectl", _STAMP),
    Target("cluster", "./etcd", "etcd", _STAMP),
    Target("cluster", "sigs.k8s.io/kwok/cmd/kwok", "kwok", _STAMP),
    Target("kuberay", "github.com/ray-project/kuberay/ray-operator", "kuberay-operator"),
)
#: Built only when asked (``build(kueue=True)``).
KUEUE_TARGETS = (
    Target("kueue", "sigs.k8s.io/kueue/cmd/kueue", "kueue", f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE}"),
)
#: Fixes we carry on a published module's source, applied in a copy at build time:
#: (our module folder, Go module@version, file in it, text, replacement).
PATCHES = (
    # kwok runs an exec's command with a stdin pipe it never closes: `echo a | kubectl exec -i POD
    # -- cat` and `kubectl cp` into a pod hang. A kubelet's runtime closes it when the client's
    # stdin ends (kubernetes#13322 and its e2e test).
    ("cluster", f"sigs.k8s.io/kwok@{KWOK}", "pkg/utils/exec/exec.go", "\t\t\t\t_, _ = io.Copy(inPipe, opt.In)\n",
     "\t\t\t\t_, _ = io.Copy(inPipe, opt.In)\n\t\t\t\t_ = inPipe.Close() // nrl-k8s: the command sees stdin end\n"),
    # kwok reads its Stages (and Logs, Execs, ...) through a getter that caches what it read under
    # the informer's last resource version, which the reflector sets before the informer's store
    # holds the objects: a read in between stays the answer until the next change. A sandbox's kwok
    # once started with no Stage and its nodes never became Ready. The cache's key is instead a count
    # of the store's changes, made after each (go/cluster/kwokgetter tests it).
    *(("cluster", f"sigs.k8s.io/kwok@{KWOK}", "pkg/config/resources/dynamic.go", text, replacement)
      for text, replacement in (
        ('import (\n\t"context"\n', 'import (\n\t"context"\n\t"strconv"\n\t"sync/atomic"\n'),
        ("\tsyncCh chan struct{}\n", "\tsyncCh chan struct{}\n\tchanges atomic.Uint64 // nrl-k8s\n"),
        ("\treturn c.controller.LastSyncResourceVersion()\n", "\treturn strconv.FormatUint(c.changes.Load(), 10)\n"),
        ("func (c *dynamicGetter[O, T, L]) sync() {\n",
         "func (c *dynamicGetter[O, T, L]) sync() {\n\tc.changes.Add(1)\n"))),
    # Kueue reads its metrics server's certificate from /etc/kueue/metrics/certs unless it manages
    # its own, whose names are a Service's: the sandbox's webhook certificate folder instead.
    ("kueue", f"sigs.k8s.io/kueue@{KUEUE}", "cmd/kueue/main.go", '\t\tmetricsCertPath := "/etc/kueue/metrics/certs"\n',
     "\t\tmetricsCertPath := cfg.Webhook.CertDir // nrl-k8s: the sandbox's certificates\n"),
)
PATCH_LEVEL = "p3"  # bump with PATCHES or a go.mod's versions: builds are kept per key()
#: (module folder, Go module path, CRD files inside it) copied into crds/.
CRDS = (
    ("kuberay", "github.com/ray-project/kuberay/ray-operator",
     tuple(f"config/crd/bases/ray.io_{name}.yaml" for name in ("rayclusters", "rayjobs", "rayservices"))),
    ("cluster", "sigs.k8s.io/kwok", tuple(f"kustomize/crd/bases/kwok.x-k8s.io_{name}.yaml" for name in (
        "stages", "logs", "clusterlogs", "execs", "clusterexecs", "portforwards", "clusterportforwards",
        "attaches", "clusterattaches", "metrics", "resourceusages", "clusterresourceusages"))),
)
KUEUE_CRDS = (
    ("kueue", "sigs.k8s.io/kueue", (*(f"config/components/crd/bases/kueue.x-k8s.io_{name}.yaml" for name in kueue.CRDS),
                                    f"config/components/webhook/{kueue.WEBHOOKS}")),
)


def _parts(kueue: bool) -> tuple[tuple[Target, ...], tuple[tuple[str, str, tuple[str, ...]], ...]]:
    """The targets and CRD files of a build, with Kueue's or without."""
    return (TARGETS + KUEUE_TARGETS, CRDS + KUEUE_CRDS) if kueue else (TARGETS, CRDS)


def key() -> str:
    return f"k8s-{KUBERNETES}_etcd-{ETCD}_kwok-{KWOK}_kuberay-{KUBERAY}_kueue-{KUEUE}_{PATCH_LEVEL}"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nrl-k8s" / "control-plane"


@dataclass(frozen=True)
class Installed:
    """Where the binaries and CRDs are."""

    bin: Path
    crds: Path

    def path(self, name: str) -> str:
        return str(self.bin / name)


def _complete(root: Path, kueue: bool = False) -> Installed | None:
    bin_dir = root / "bin" if (root / "bin").is_dir() else root
    crds = next((p for p in (root / "crds", root.parent / "crds") if p.is_dir()), None)
    targets, files = _parts(kueue)
    if crds is None or any(not os.access(bin_dir / target.output, os.X_OK) for target in targets) \
            or any(not (crds / Path(name).name).is_file() for _, _, names in files for name in names) \
            or not (crds / "old" / "ray.io_rayjobs.yaml").is_file():
        return None
    return Installed(bin_dir, crds)


def find(kueue: bool = False) -> Installed:
    """The binaries to run (Kueue's too if ``kueue``), or SandboxError saying how to get them."""
    named = os.environ.get(ENV_BIN)
    if named:
        found = _complete(Path(named).expanduser(), kueue)
        if found is None:
            names = ", ".join(target.output for target in _parts(kueue)[0])
            raise SandboxError(f"{ENV_BIN}={named}: expected {names} and a crds/ folder there",
                               hint=f"point {ENV_BIN} at the output of 'nrl-k8s sandbox build"
                                    f"{' --kueue' if kueue else ''}', or unset it")
        return found
    found = _complete(cache_root() / key(), kueue)
    if found is None:
        if kueue and _complete(cache_root() / key()) is not None:
            raise SandboxError("Kueue is not built on this machine (only 'sandbox up --kueue' runs it)",
                               hint="run 'nrl-k8s sandbox build --kueue' (once per machine; 'make test' does)")
        raise SandboxError("the sandbox's control plane is not built on this machine",
                           hint="run 'nrl-k8s sandbox build --kueue'" if kueue else
                           "run 'make setup' or 'nrl-k8s sandbox build' (once per machine)")
    return found


def ready(kueue: bool = False) -> Installed | None:
    """The binaries when nothing needs building: ``$NRL_K8S_CONTROL_PLANE_BIN``'s, or built already."""
    return find(kueue) if os.environ.get(ENV_BIN) else _complete(cache_root() / key(), kueue)


def toolchain() -> str:
    """The go command, or SandboxError saying how to get it."""
    go = shutil.which("go")
    if go is None:
        raise SandboxError("building the sandbox's control plane needs Go, which is not on PATH", hint=GO_HINT)
    return go


def build(progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
          kueue: bool = False) -> tuple[Installed, float]:
    """Build the binaries (Kueue's too if ``kueue``) into the user cache, unless they are there
    already; (where, seconds spent). Kueue asked for after the others were built is added to them."""
    if (found := ready(kueue)) is not None:
        return found, 0.0
    go = toolchain()
    root = cache_root() / key()
    root.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(root.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build of the same versions may be running
        if (found := _complete(root, kueue)) is not None:
            return found, 0.0
        adding = _complete(root) is not None  # only Kueue is missing
        targets, crds = (KUEUE_TARGETS, KUEUE_CRDS) if adding else _parts(kueue)
        work = root.parent / f".{key()}.partial"
        shutil.rmtree(work, ignore_errors=True)
        (work / "bin").mkdir(parents=True)
        (work / "crds").mkdir()
        folders = {module: _patched(go, module, work / "patched") for module in {t.module for t in targets}}
        steps = _build_all(go, folders, targets, work / "bin", progress)
        shutil.rmtree(work / "patched", ignore_errors=True)
        for module, path, files in crds:
            source = Path(_go(go, GO_DIR / module, "list", "-m", "-f", "{{.Dir}}", path).strip())
            for name in files:
                shutil.copyfile(source / name, work / "crds" / Path(name).name)
        if adding:
            seconds = time.monotonic() - started
            _add(work, root, seconds, steps)
            return Installed(root / "bin", root / "crds"), seconds
        old = json.loads(_go(go, GO_DIR / "kuberay", "mod", "download", "-json", f"{CRDS[0][1]}@{KUBERAY_OLD}"))["Dir"]
        (work / "crds" / "old").mkdir()
        shutil.copyfile(
            Path(old) / "config/crd/bases/ray.io_rayjobs.yaml", work / "crds" / "old" / "ray.io_rayjobs.yaml"
        )
        seconds = time.monotonic() - started
        _record(work, seconds, steps)
        shutil.rmtree(root, ignore_errors=True)
        work.rename(root)
    return Installed(root / "bin", root / "crds"), seconds


def _add(work: Path, root: Path, seconds: float, steps: list[dict]) -> None:
    """Move what ``work`` built into the complete build at ``root``: the CRDs first, then the
    binaries, which ``_complete`` looks for; build.json gets the new steps."""
    for folder in ("crds", "bin"):
        for path in sorted((work / folder).iterdir()):
            path.rename(root / folder / path.name)
    before = recorded_build() or {"seconds": 0.0, "steps": []}
    _record(root, before["seconds"] + seconds, before["steps"] + steps)
    shutil.rmtree(work)


def _record(root: Path, seconds: float, steps: list[dict]) -> None:
    installed = Installed(root / "bin", root / "crds")
    partial = root / "build.json.partial"
    partial.write_text(json.dumps({"seconds": round(seconds, 1), "bytes": disk_usage(installed), "steps": steps}))
    partial.rename(root / "build.json")


def builds(targets: tuple[Target, ...]) -> list[list[Target]]:
    """The go builds to run, largest first: one per module and ldflags, so the packages its binaries
    share compile once (``go build -o DIR`` names each binary after its package)."""
    groups: dict[tuple[str, str], list[Target]] = {}
    for target in targets:
        groups.setdefault((target.module, target.ldflags), []).append(target)
    return sorted(groups.values(), key=len, reverse=True)


def _build_all(go: str, folders: dict[str, Path], targets: tuple[Target, ...], out: Path,
               progress: Callable[[str], None]) -> list[dict]:
    """Run ``builds(targets)`` two at a time, so both cores stay busy through a build's serial
    stretches (its largest packages, its links, its downloads) and the others still share the
    standard library's packages through the build cache; each build's wall and CPU seconds."""
    started, running = time.monotonic(), list[subprocess.Popen]()

    def one(group: list[Target]) -> dict:
        names = [target.output for target in group]
        progress(f"building {', '.join(names)} ({time.monotonic() - started:.0f} s so far)")
        step = _go_build(go, folders[group[0].module], group, out, running)
        progress(f"built {step['name']} in {step['seconds']:.0f} s (CPU {step['cpu']:.0f} s)")
        return step

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(one, group) for group in builds(targets)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        if failed := next((future.exception() for future in done if future.exception()), None):
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in running:  # the other build: its compilers end with their package
                proc.kill()
            raise failed
        return [future.result() for future in futures]


#: How every package is compiled (tests of the patches too, so they reuse the build's compiled packages)
COMPILE_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false")


def _go_build(go: str, folder: Path, group: list[Target], out: Path, running: list[subprocess.Popen]) -> dict:
    """One ``go build`` of ``group``'s binaries into ``out``; its name, wall and CPU seconds."""
    began = time.monotonic()
    dest = str(out / group[0].output) if len(group) == 1 else f"{out}{os.sep}"
    # No debug information at all (-dwarf=false spares the compiler what -w would drop), and static
    # binaries as Kubernetes' releases build them (CGO_ENABLED=0: no C compiler runs)
    argv = [go, "build", *COMPILE_FLAGS, f"-ldflags=-s -w {group[0].ldflags}".strip(),
            "-o", dest, *(target.package for target in group)]
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(argv, cwd=folder, env=_go_env(), stdout=log,
                                stderr=subprocess.STDOUT)
        running.append(proc)
        _, status, used = os.wait4(proc.pid, 0)  # the CPU time of go and of the compilers it waited for
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            log.seek(0)
            raise _failed("build", folder, log.read())
    return {"name": ", ".join(target.output for target in group), "seconds": round(time.monotonic() - began, 1),
            "cpu": round(used.ru_utime + used.ru_stime, 1)}


def recorded_build() -> dict | None:
    """What the last build of these versions on this machine took: {seconds, bytes}."""
    try:
        return json.loads((cache_root() / key() / "build.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def _patched(go: str, module: str, scratch: Path) -> Path:
    """The folder to build ``module`` in: ours, or a copy whose dependencies carry ``PATCHES``."""
    targets = list(dict.fromkeys(patch[1] for patch in PATCHES if patch[0] == module))
    if not targets:
        return GO_DIR / module
    folder = scratch / module
    shutil.copytree(GO_DIR / module, folder)
    for target in targets:
        source = Path(json.loads(_go(go, folder, "mod", "download", "-json", target))["Dir"])
        copy = scratch / "src" / target.replace("/", "_")
        shutil.copytree(source, copy, copy_function=shutil.copyfile)  # module cache files are read-only
        for path in [copy, *copy.rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)
        for _, _, file, text, replacement in (patch for patch in PATCHES if patch[1] == target):
            original = (copy / file).read_text()
            if original.count(text) != 1:
                raise SandboxError(
                    f"the patch of {target} no longer applies to {file}", hint="update PATCHES in binaries.py"
                )
            (copy / file).write_text(original.replace(text, replacement))
        _go(go, folder, "mod", "edit", f"-replace={target.split('@')[0]}={copy}")
    return folder


def _go(go: str, folder: Path, *args: str) -> str:
    result = subprocess.run([go, *args], cwd=folder, env=_go_env(), capture_output=True, text=True)
    if result.returncode != 0:
        raise _failed(args[0], folder, result.stderr)
    return result.stdout


def _go_env() -> dict[str, str]:
    return {**os.environ, "GOFLAGS": f"{os.environ.get('GOFLAGS', '')} -mod=readonly".strip(), "CGO_ENABLED": "0"}


def _failed(command: str, folder: Path, output: str) -> SandboxError:
    tail = " | ".join(output.strip().splitlines()[-3:])
    return SandboxError(f"go {command} in {folder.name} failed: {tail}",
                        hint="check that the Go module proxy is reachable (GOPROXY), then run it again")


def disk_usage(installed: Installed) -> int:
    return sum(p.stat().st_size for folder in (installed.bin, installed.crds) for p in folder.rglob("*") if p.is_file())
