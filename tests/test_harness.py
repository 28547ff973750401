"""The test harness's own guarantees."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from sandbox_harness import History, eventually

CHILD = """import sys
sys.path.insert(0, sys.argv[1])
from sandbox_harness import when_this_process_ends
when_this_process_ends([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').close()", sys.argv[2]])
print("armed", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_killed_test_process_still_has_its_sandboxes_stopped(tmp_path):
    """``when_this_process_ends`` (how every sandbox and the dashboard tests' Ray head are
    stopped should the test process be killed) runs its command after a SIGKILL, not before."""
    done = tmp_path / "ran"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(Path(__file__).parent), str(done)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "armed\n"
        assert not done.exists()  # the process lives
    finally:
        child.kill()
        child.wait()
    eventually(done.exists, what="the command, once the process was killed")


class _QuietWatch:
    """A watch response with no events, open until it is shut down (as ``History.stop`` does)."""

    def __init__(self):
        self._closed = threading.Event()

    def stream(self, amt=None, decode_content=False):
        self._closed.wait()
        yield from ()

    def shutdown(self):
        self._closed.set()

    close = shutdown


def _quiet_list(watch=False, **_):
    """A list call of an empty collection; with ``watch=True``, a watch that never sends an event."""
    if watch:
        return _QuietWatch()
    return SimpleNamespace(data=json.dumps({"items": [], "metadata": {"resourceVersion": "7"}}))


def test_waiting_on_a_history_whose_watch_has_stopped_fails_at_once():
    """A History records nothing after its ``with`` block: a wait begun after it fails at once,
    naming the cause, rather than at its deadline (an object deleted after the block was never seen)."""
    with History(_quiet_list) as history:
        pass
    with pytest.raises(pytest.fail.Exception, match="before the watch stopped"):
        history.wait(lambda h: bool(h.events()), what="an event")
    assert history.wait(lambda h: not h.objects()) is history  # what holds already is still seen
