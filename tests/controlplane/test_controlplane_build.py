"""How the sandbox's one-time build is run: one ``go build`` per module (the packages its binaries
share compile once), two builds side by side and a failure stopping the other, and an entry point
that ``make setup`` starts before pip has installed any dependency."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_harness import run_cli

from nrl_k8s.errors import SandboxError
from nrl_k8s_sandbox.controlplane import binaries
from nrl_k8s_sandbox.controlplane.binaries import TARGETS, Target


def test_one_go_build_per_module_and_ldflags_largest_first():
    builds = binaries.builds(TARGETS)
    assert sorted(t.output for group in builds for t in group) == sorted(t.output for t in TARGETS)
    cluster = next(group for group in builds if group[0].module == "cluster")
    assert builds[0] == cluster and [t.output for t in cluster] == [
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok"]
    for group in builds:
        assert len({(t.module, t.ldflags) for t in group}) == 1
        if len(group) > 1:  # go build -o DIR names each binary after its package
            assert all(Path(t.package).name == t.output for t in group)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_the_patched_kwok_passes_the_go_tests_of_its_patches(tmp_path):
    """``go/cluster/kwokgetter``'s test, on the cluster module with ``PATCHES`` applied, as it is built:
    on kwok unpatched, it fails in its first round (a read raced with the informer's first list)."""
    go = shutil.which("go")
    folder = binaries._patched(go, "cluster", tmp_path)
    binaries._go(go, folder, "test", "-vet=off", "-count=1", *binaries.COMPILE_FLAGS, "./kwokgetter")


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


# -- Kueue, built only when asked ----------------------------------------------------------------
#: A fake ``go`` for a whole build: each ``go build -o DEST PKG`` writes DEST and is logged; the
#: module commands answer with the fake module source in $FAKE_GO_SRC (every module's files in one).
FAKE_MODULE_GO = """#!{python}
import json, os, sys
from pathlib import Path
args, src = sys.argv[1:], os.environ["FAKE_GO_SRC"]
with open(os.environ["FAKE_GO_LOG"], "a") as log:
    print(json.dumps(args), file=log)
if args[:3] == ["mod", "download", "-json"]:
    print(json.dumps({{"Dir": src}}))
elif args[:2] == ["list", "-m"]:
    print(src)
elif args[0] == "build":
    out, packages = args[args.index("-o") + 1], args[args.index("-o") + 2:]
    named = out.endswith(os.sep)  # go build -o DIR/ names each binary after its package
    for dest in [Path(out, package.rsplit("/", 1)[-1]) for package in packages] if named else [Path(out)]:
        dest.write_text("#!/bin/sh\\n")
        dest.chmod(0o755)
"""


def _fake_module_go(tmp_path: Path, monkeypatch) -> Path:
    """A fake go on PATH, Kueue's module source for it, and a cache of our own; the go log's path."""
    src = tmp_path / "kueue-src"
    _, _, file, text, _ = next(patch for patch in binaries.PATCHES if patch[0] == "kueue")
    (src / file).parent.mkdir(parents=True)
    (src / file).write_text(f"package main\n{text}")
    for name in (name for _, _, names in binaries.CRDS + binaries.KUEUE_CRDS for name in names):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(f"# {name}\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(FAKE_MODULE_GO.format(python=sys.executable))
    (tools / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GO_SRC", str(src))
    monkeypatch.setenv("FAKE_GO_LOG", str(tmp_path / "go.log"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(binaries.ENV_BIN, raising=False)
    return tmp_path / "go.log"


def _core_build(root: Path) -> None:
    """What ``make setup`` leaves: every binary but Kueue, their CRDs and a build record."""
    (root / "bin").mkdir(parents=True)
    for target in TARGETS:
        (root / "bin" / target.output).write_text("core\n")
        (root / "bin" / target.output).chmod(0o755)
    (root / "crds" / "old").mkdir(parents=True)
    for _, _, names in binaries.CRDS:
        for name in names:
            (root / "crds" / Path(name).name).write_text("core\n")
    (root / "crds/old/ray.io_rayjobs.yaml").write_text("old\n")
    (root / "build.json").write_text(json.dumps({"seconds": 500.0, "bytes": 1, "steps": [{"name": "etcd"}]}))


def test_kueue_is_added_to_a_build_without_it_and_nothing_else_is_built_again(tmp_path, monkeypatch):
    go_log = _fake_module_go(tmp_path, monkeypatch)
    root = binaries.cache_root() / binaries.key()
    _core_build(root)
    assert binaries.find() is not None
    with pytest.raises(SandboxError, match="Kueue is not built") as missing:
        binaries.find(kueue=True)
    assert "sandbox build --kueue" in (missing.value.hint or "")

    installed, seconds = binaries.build(lambda line: None, kueue=True)
    assert seconds > 0 and installed.bin == root / "bin"
    builds = [args for args in map(json.loads, go_log.read_text().splitlines()) if args[0] == "build"]
    assert [args[-1] for args in builds] == [binaries.KUEUE_TARGETS[0].package]
    assert all((root / "bin" / target.output).read_text() == "core\n" for target in TARGETS)
    assert binaries.find(kueue=True).path("kueue") == str(root / "bin/kueue")
    for name in binaries.KUEUE_CRDS[0][2]:
        assert (root / "crds" / Path(name).name).read_text() == f"# {name}\n"
    assert [step["name"] for step in binaries.recorded_build()["steps"]] == ["etcd", "kueue"]
    assert [path.name for path in root.parent.iterdir() if path.name.endswith(".partial")] == []
    assert binaries.build(lambda line: None, kueue=True)[1] == 0.0  # there now: nothing to do


def test_a_first_build_without_kueue_builds_everything_else(tmp_path, monkeypatch):
    go_log = _fake_module_go(tmp_path, monkeypatch)
    monkeypatch.setattr(binaries, "_patched", lambda go, module, scratch: tmp_path)  # no module copies
    binaries.build(lambda line: None)
    built = {package for args in map(json.loads, go_log.read_text().splitlines()) if args[0] == "build"
             for package in args[args.index("-o") + 2:]}
    assert built == {target.package for target in TARGETS} and binaries.find() is not None
    with pytest.raises(SandboxError, match="Kueue is not built"):
        binaries.find(kueue=True)


def test_sandbox_up_with_kueue_not_built_says_how_and_starts_nothing(tmp_path):
    cache = tmp_path / "cache"
    _core_build(cache / "nrl-k8s/control-plane" / binaries.key())
    env = {key: value for key, value in os.environ.items() if key != binaries.ENV_BIN}
    result = run_cli(["sandbox", "up", "--kueue", "queued", "--dir", str(tmp_path / "box")],
                     env={**env, "XDG_CACHE_HOME": str(cache)})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "Kueue is not built" in result.stderr and "sandbox build --kueue" in result.stderr
    assert not (tmp_path / "box").exists()
