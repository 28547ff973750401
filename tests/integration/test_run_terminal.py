"""`nrl-k8s run --rayjob --wait` as a user sees it in a terminal: a tmux pane, read with
`capture-pane` while the run goes, against the sandbox. Skipped without tmux."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import uuid

import pytest
from sandbox_harness import NRL_K8S, Gate, eventually
from test_run_rayjob import PAIR, Run

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="needs tmux")

LINES = 30
#: The driver prints numbered lines while the live table is up, then waits for the test's gate: its
#: cluster (and the log stream) stays up until the test has seen every line.
PRINTER = f'for i in $(seq 1 {LINES}); do echo "driver-line-$i of {LINES}"; sleep 0.1; done'
#: The DGD's row while it waits, and the elapsed time it shows.
DGD_WAITING = re.compile(r"^\s*dynamo\.serving\s+waiting\b.*?(\d+\.\d)s\s*$", re.MULTILINE)
EXITED = re.compile(r"^run-exit=(\d+)$", re.MULTILINE)


@pytest.fixture
def run(sandbox, sandbox_namespace):
    r = Run(sandbox, sandbox_namespace)
    yield r
    r.api.close()


class Pane:
    """A detached tmux session on a server of its own, 200 columns wide, with a long history."""

    def __init__(self, command: str, env: dict[str, str]):
        self.socket, self.env = f"nrl-k8s-test-{uuid.uuid4().hex[:8]}", env
        self._tmux("-f", "/dev/null", "start-server", ";", "set-option", "-g", "history-limit", "100000", ";",
                   "new-session", "-d", "-x", "200", "-y", "50", command)

    def _tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True, text=True,
                              timeout=60, env=self.env).stdout

    def capture(self) -> str:
        """Everything the pane shows and has scrolled off."""
        return self._tmux("capture-pane", "-p", "-S", "-")

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=60, env=self.env)


def test_a_terminal_keeps_every_driver_line_and_the_waits_tick(run, tmp_path):
    gate = Gate(tmp_path)
    args = [NRL_K8S, "run", "--rayjob", "--wait", *PAIR,
            *run.overrides("infra.launch.entrypoint=" + json.dumps(f"{PRINTER}; " + gate.entrypoint()))]
    # The pane's command inherits the environment of the tmux server this test starts.
    env = {**os.environ, "KUBECONFIG": str(run.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    command = f"{shlex.join(args)}; echo run-exit=$?; exec tail -f /dev/null"
    ticks: set[str] = set()
    with run.sandbox.fault("delay", "dgd:10"):
        pane = Pane(command, env)
        def ended() -> str | None:
            """The pane once the run has exited; meanwhile the DGD wait's times seen, the gate opened
            once every driver line is shown (tmux has no event for what a pane shows)."""
            shown = pane.capture()
            ticks.update(DGD_WAITING.findall(shown))
            if f"driver-line-{LINES} of {LINES}" in shown:
                gate.open()
            return shown if EXITED.search(shown) else None

        try:
            screen = eventually(ended, what="the run's end in the pane")
        finally:
            pane.close()

    assert EXITED.search(screen).group(1) == "0", screen
    # Every driver line, in order, printed above the table and never overwritten.
    at = [screen.find(f"driver-line-{i} of {LINES}\n") for i in range(1, LINES + 1)]
    assert -1 not in at and at == sorted(at), screen
    # The DGD's wait ticked while the sandbox held it back (10 s): at least 3 values seen.
    assert len(ticks) >= 3, (sorted(ticks), screen)
    # The final frame (drawn below the last driver line): no row still says it is waiting.
    final = screen[at[-1]:]
    assert "dynamo.serving" in final and not re.search(r"^\s*\S+\s+waiting\b", final, re.MULTILINE), screen
    assert "waiting for KubeRay" not in final, screen
