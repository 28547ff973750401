"""`nrl-k8s sandbox ...` without the `sandbox` extra: one line naming the install command, exit 2.

The CLI runs in a subprocess where the extra's modules are absent the way Python itself marks a
module absent: ``sys.modules[name] = None`` makes ``import name`` raise ModuleNotFoundError and
``importlib.util.find_spec(name)`` answer None, as in a venv without the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install 'nrl-k8s[sandbox]'"

CLI = """
import sys
for name in {absent!r}:
    sys.modules[name] = None
sys.argv = ["nrl-k8s", *{argv!r}]
from nrl_k8s_cli.main import main
main()
"""


def _cli(argv: list[str], absent: tuple[str, ...], home: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"HOME": str(home), "NRL_K8S_USER": "tester", "KUBECONFIG": str(home / "none")}
    return subprocess.run([sys.executable, "-c", CLI.format(absent=absent, argv=argv)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


CASES = {  # name: (argv, absent modules, what the error names); none would start or build anything
    "up without ray": (["sandbox", "up", "--fault", "no-such-fault"], ("ray",), "ray"),
    "status without the kubernetes client": (["sandbox", "status"], ("kubernetes",), "kubernetes"),
    "fault clear without cryptography": (["sandbox", "fault", "clear", "slow"], ("cryptography",), "cryptography"),
    "fault set without any of them": (["sandbox", "fault", "set", "slow=2"], ("ray", "kubernetes", "cryptography"),
                                      "ray, kubernetes, cryptography"),
    "after global options": (["-n", "team", "sandbox", "down"], ("ray", "kubernetes"), "ray, kubernetes"),
}


@pytest.mark.parametrize("argv, absent, named", CASES.values(), ids=CASES)
def test_sandbox_without_the_extra_prints_one_line_with_the_install_command(tmp_path, argv, absent, named):
    result = _cli(argv, absent, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"error: the sandbox needs {named}, not installed: {INSTALL}"]
    assert result.stdout == ""
    assert not (tmp_path / ".cache").exists()  # nothing was started or built


def test_sandbox_with_the_extra_runs_the_command(tmp_path):
    """The same seam with nothing absent: the command runs (the check is not always refusing)."""
    result = _cli(["sandbox", "status", "--dir", str(tmp_path / "sb")], (), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "running:    no" in result.stdout


def test_sandbox_help_needs_no_extra(tmp_path):
    result = _cli(["sandbox", "--help"], ("ray", "kubernetes", "cryptography"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and "up" in result.stdout
