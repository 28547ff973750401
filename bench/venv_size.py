"""Size of a fresh venv holding nrl-k8s: a plain install and one with the sandbox extra.

Each goes into its own throwaway venv (``python -m venv``, then ``pip install .`` or
``pip install '.[sandbox]'`` from this checkout, resolved afresh from the package index); the size is
``du -sm`` of the venv. Before the sandbox became an extra, every install was the second one.

    .venv/bin/python bench/venv_size.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALLS = {"plain": ".", "sandbox": ".[sandbox]"}


def venv_with(where: Path, target: str) -> tuple[int, set[str]]:
    """MB (du -sm) of a new venv at ``where`` after ``pip install target``, and its top-level modules."""
    subprocess.run([sys.executable, "-m", "venv", where], check=True)
    subprocess.run([where / "bin/python", "-m", "pip", "install", "-q", target], cwd=ROOT, check=True)
    size = int(subprocess.run(["du", "-sm", where], capture_output=True, text=True, check=True).stdout.split()[0])
    site = next((where / "lib").glob("python3*/site-packages"))
    return size, {p.name for p in site.iterdir()}


def main() -> None:
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="nrl-k8s-venv-size-") as tmp:
        for name, target in INSTALLS.items():
            size, modules = venv_with(Path(tmp) / name, target)
            has = ", ".join(f"{m} {'yes' if m in modules else 'no'}" for m in ("ray", "kubernetes"))
            print(f"{f'pip install {target!r}':32} {size:5d} MB   ({has})", flush=True)
            sizes[name] = size
    print(f"the sandbox extra adds {sizes['sandbox'] - sizes['plain']} MB: "
          f"a plain install is {sizes['plain'] / sizes['sandbox']:.0%} of one with the sandbox "
          f"({sizes['sandbox'] / sizes['plain']:.1f}x smaller)")


if __name__ == "__main__":
    main()
