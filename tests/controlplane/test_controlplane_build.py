"""How the sandbox's one-time build is run: one ``go build`` per module (the packages its binaries
share compile once), two builds side by side and a failure stopping the other, and an entry point
that ``make setup`` starts before pip has installed any dependency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nrl_k8s.errors import SandboxError
from nrl_k8s_sandbox.controlplane import binaries
from nrl_k8s_sandbox.controlplane.binaries import TARGETS, Target


def test_one_go_build_per_module_and_ldflags_largest_first():
    builds = binaries.builds(TARGETS)
    assert sorted(t.output for group in builds for t in group) == sorted(binaries.BINARIES)
    kubernetes = next(group for group in builds if group[0].module == "kubernetes")
    assert builds[0] == kubernetes and [t.output for t in kubernetes] == [
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"]
    for group in builds:
        assert len({(t.module, t.ldflags) for t in group}) == 1
        if len(group) > 1:  # go build -o DIR names each binary after its package
            assert all(Path(t.package).name == t.output for t in group)


#: A fake ``go``. ``slow`` runs until the test writes ``release`` (5 minutes at most), so it ends by
#: itself only if the build waited for it, however slow the machine.
FAKE_GO = """#!/bin/sh
for package; do :; done
case "$package" in
  slow) echo started > slow.pid
        i=0; while [ ! -e release ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
        echo finished > slow.done ;;
  bad) while [ ! -e slow.pid ]; do sleep 0.1; done
       echo "compile: undefined: nrl" >&2; exit 1 ;;
  *) echo built > "$package.out" ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path) -> str:
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    return str(go)


def test_builds_run_side_by_side_and_each_reports_its_time(tmp_path, fake_go):
    targets = (Target("a", "one", "one"), Target("a", "two", "two"), Target("b", "three", "three"))
    lines: list[str] = []
    steps = binaries._build_all(fake_go, {"a": tmp_path, "b": tmp_path}, targets, tmp_path, lines.append)
    assert [step["name"] for step in steps] == ["one, two", "three"]
    assert all(step["seconds"] >= 0 and step["cpu"] >= 0 for step in steps)
    assert sum(line.startswith("built ") for line in lines) == 2


def test_a_failed_build_stops_the_other_and_says_what_go_said(tmp_path, fake_go):
    targets = (Target("a", "slow", "slow"), Target("b", "bad", "bad"))
    with pytest.raises(SandboxError, match="undefined: nrl") as raised:
        binaries._build_all(fake_go, {"a": tmp_path, "b": tmp_path}, targets, tmp_path, lambda line: None)
    (tmp_path / "release").touch()
    assert "GOPROXY" in (raised.value.hint or "")
    assert not (tmp_path / "slow.done").exists()  # killed, not waited for


def test_the_build_entry_point_needs_no_installed_dependency():
    """make setup runs ``python -m nrl_k8s_sandbox.build`` while pip is still installing."""
    code = ("import sys; before = set(sys.modules); import nrl_k8s_sandbox.build; "
            "print(*sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == ["nrl_k8s", "nrl_k8s_sandbox"]
