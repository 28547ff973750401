"""``make lint`` (ruff, the import-linter layer contracts, mypy) as one test of the suite: in
``make test`` it runs on one worker beside the others instead of before them all (mypy alone keeps
one core busy for ~20 s while the other waits)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lint_is_clean():
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "lint"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
