"""An API server that cannot be reached is one error, exit 1, for every command: a refused port, a
server that never answers, a TLS handshake that never finishes, a credential plugin that hangs
(``unreachable_servers``). A run applies nothing. ``bench/unreachable.py`` measures how long each
takes (the ~5 s bound is its target, not a test's).

Each failure kind runs every command at once (they mostly wait), each against its own server.
"""

from __future__ import annotations

import contextlib
import re
import subprocess

import pytest
from unreachable_servers import COMMANDS, EXE, FAILURES, PAIR, broken, environment, kubeconfig, run

# what a run may send before anything answers: reads and permission reviews, nothing that applies
READ_OR_REVIEW = re.compile(rb"^(GET|POST /apis/authorization\.k8s\.io/v1/selfsubject\w+reviews[?\s])")


@pytest.mark.parametrize("kind", FAILURES)
def test_every_command_is_one_error_when_the_api_server_cannot_be_reached(tmp_path, kind):
    failure, what = FAILURES[kind]
    with contextlib.ExitStack() as stack:
        started = {}
        for name, argv in COMMANDS.items():
            home = tmp_path / name.replace(" ", "_")
            home.mkdir()
            config, server, received = stack.enter_context(failure(home))
            process = subprocess.Popen([EXE, *argv], env=environment(home, config), cwd=home, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            stack.callback(process.kill)  # one still running when the test fails
            started[name] = (process, server, received)
        broke = {}
        for name, (process, server, received) in started.items():
            out, err = process.communicate(timeout=300)
            problem = broken(subprocess.CompletedProcess(process.args, process.returncode, out, err), server, what)
            applied = [line for line in received if name.startswith("run") and not READ_OR_REVIEW.match(line)]
            if problem or applied:
                broke[name] = problem or f"sent {applied}"
    assert broke == {}


def test_a_failing_credential_plugin_is_one_error(tmp_path):
    plugin = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "false", "interactiveMode": "Never"}}
    done = run(["status", *PAIR], kubeconfig(tmp_path, user=plugin), tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 1 and "Traceback" not in done.stderr and len(errors) == 1, done.stderr
    assert "exec plugin `false` failed" in errors[0]
