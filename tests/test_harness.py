"""The test harness's own guarantees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sandbox_harness import eventually

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
