"""The distribution holds `src/nrl_k8s/`, `cli/` and `sandbox/`, editable and as a wheel; a plain install
brings neither ray nor the kubernetes client (they are the `sandbox` extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ["examples/qwen3_0.6b_dynamo.yaml", "--infra", "examples/qwen3_0.6b_dynamo.kind.infra.yaml"]


def _package_dirs() -> set[str]:
    """Every package under the folders pyproject.toml's package-dir maps (`src/nrl_k8s`, `cli`, `sandbox`)."""
    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {".".join((name,) + init.parent.relative_to(ROOT / folder).parts)
            for name, folder in roots.items() for init in (ROOT / folder).rglob("__init__.py")}


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
    result = subprocess.run(
        [target / "bin" / "nrl-k8s", "check", *EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "wheel-qwen3-0-6b-dgd" in result.stdout


# What a fresh venv would get: pip resolves the project's dependencies from the package index
# without installing anything (--dry-run; --ignore-installed so this venv's packages do not count).
EXTRA_ONLY = {"ray", "kubernetes", "cryptography"}
LOCK = ROOT / "requirements.lock"
NO_INDEX = ("Failed to establish a new connection", "Temporary failure in name resolution", "Network is unreachable",
            "Could not fetch URL", "NewConnectionError", "ConnectTimeoutError")


def _names(s: str) -> str:
    return s.lower().replace("_", "-").replace(".", "-")


def _resolved(where: Path, target: str, *pip_args: str) -> set[str]:
    """Distribution names (normalised) a fresh ``pip install TARGET`` would install; skips without an index."""
    report = where / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", report,
         *pip_args, target],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0 and any(sign in result.stderr for sign in NO_INDEX):
        pytest.skip(f"no package index reachable: {next(s for s in NO_INDEX if s in result.stderr)}")
    assert result.returncode == 0, result.stderr
    return {_names(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]}


@pytest.fixture(scope="module")
def with_every_extra(tmp_path_factory) -> set[str]:
    """What make setup's install holds: ``.[sandbox,test]`` resolved within requirements.lock (~1 min: pip
    downloads ray's wheel to read its metadata)."""
    return _resolved(tmp_path_factory.mktemp("extras"), ".[sandbox,test]", "--constraint", str(LOCK))


def test_a_plain_install_brings_neither_ray_nor_the_kubernetes_client(tmp_path):
    installed = _resolved(tmp_path, ".")
    assert "nrl-k8s" in installed and "typer" in installed
    assert installed & EXTRA_ONLY == set()


def test_the_sandbox_extra_brings_ray_and_the_kubernetes_client(with_every_extra):
    assert EXTRA_ONLY <= with_every_extra
    assert {"aiohttp", "prometheus-client"} <= with_every_extra  # ray[default]: the dashboard of the sandbox's heads


def test_the_lock_pins_everything_with_every_extra(with_every_extra):
    """make setup installs requirements.lock then the project with --no-deps: the lock must hold it all."""
    pinned = {_names(line.split("==")[0]) for line in LOCK.read_text().splitlines() if "==" in line}
    assert with_every_extra - {"nrl-k8s"} <= pinned, with_every_extra - pinned - {"nrl-k8s"}


def test_the_product_imports_without_the_sandbox_extra():
    """Every module outside the sandbox, the CLI's too, imports with ray, kubernetes, cryptography and
    the sandbox package absent (``sys.modules[name] = None``: what Python does for a missing module)."""
    modules = sorted(
        ".".join(("nrl_k8s", *p.relative_to(ROOT / "src/nrl_k8s").with_suffix("").parts)).removesuffix(".__init__")
        for p in (ROOT / "src/nrl_k8s").rglob("*.py") if "sandbox" not in p.relative_to(ROOT / "src/nrl_k8s").parts
    ) + sorted(f"nrl_k8s_cli.{p.stem}".removesuffix(".__init__") for p in (ROOT / "cli").glob("*.py"))
    code = ("import importlib, sys\n"
            "for name in ('ray', 'kubernetes', 'cryptography', 'nrl_k8s_sandbox'):\n"
            "    sys.modules[name] = None\n"
            f"for module in {modules!r}:\n"
            "    importlib.import_module(module)\n"
            "print('imported')")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=os.environ | {"NRL_K8S_USER": "probe"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"
