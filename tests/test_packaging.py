"""The distribution holds both `cli/` and `src/nrl_k8s/`, editable and as a wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ["examples/qwen3_0.6b_dynamo.yaml", "--infra", "examples/qwen3_0.6b_dynamo.kind.infra.yaml"]


def _package_dirs() -> set[str]:
    found = {"nrl_k8s_cli"} | {
        ".".join(("nrl_k8s",) + p.parent.relative_to(ROOT / "src/nrl_k8s").parts)
        for p in (ROOT / "src/nrl_k8s").rglob("__init__.py")
    }
    return {name.rstrip(".") for name in found}


def test_declared_packages_match_the_tree():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert declared == _package_dirs()


def test_editable_install_runs_the_console_script():
    exe = Path(sys.executable).parent / "nrl-k8s"
    result = subprocess.run([exe, "check", *EXAMPLE], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "DYNAMO" in result.stdout


def test_wheel_install_runs_check(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, ROOT], check=True, capture_output=True
    )
    (wheel,) = wheels.glob("nrl_k8s-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nrl_k8s/defaults.yaml" in names
    assert {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("/__init__.py")} == _package_dirs()

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
        check=True,
        capture_output=True,
    )
    env = os.environ | {"PYTHONPATH": str(target), "NRL_K8S_USER": "wheel"}
    probe = subprocess.run(
        [sys.executable, "-c", "import nrl_k8s, nrl_k8s_cli; print(nrl_k8s.__file__, nrl_k8s_cli.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert str(target) in probe.stdout and str(ROOT) not in probe.stdout
    result = subprocess.run([target / "bin" / "nrl-k8s", "check", *EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "wheel-qwen3-0-6b-dgd" in result.stdout
