"""Every file a sandbox writes is readable and writable by its owner only: its directory, the
kubeconfigs, certificates, tokens, etcd's data, pid, runtime and log files, and the Ray heads'
temp dirs with the logs of a job's driver, task worker and actor."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from operator_helpers import HeldJob


def not_private(root: Path, *, dirs: bool = True) -> list[str]:
    """``root`` and everything under it that group or others may access (symlinks skipped;
    directories too unless ``dirs``)."""
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # removed meanwhile
        if stat.S_ISLNK(info.st_mode) or (stat.S_ISDIR(info.st_mode) and not dirs):
            continue
        if info.st_mode & 0o077:
            found.append(f"{stat.filemode(info.st_mode)} {path}")
    return found


def test_every_file_the_sandbox_writes_is_private(separate_sandbox, tmp_path):
    with separate_sandbox() as box:
        job = HeldJob(box, tmp_path)
        job.release()
        assert job.final_status() == "SUCCEEDED"
        scratch = Path(box.info["scratch"])
        assert sorted(scratch.glob("*/ray/session_*/logs/job-driver-*.log")), "the job wrote no driver log"
        # Ray makes its temp dir and session dirs mode 0777 itself: they live in a directory of
        # ours that nobody else may enter, and every file in them must be private.
        gate = scratch.lstat()
        assert (stat.S_ISDIR(gate.st_mode), stat.S_IMODE(gate.st_mode), gate.st_uid) == (True, 0o700, os.getuid())
        running = not_private(box.dir) + not_private(scratch, dirs=False)
        assert running == [], "\n".join(running)
        assert (box.dir / "etcd").is_dir() and (box.dir / "pki").is_dir()  # the scan saw them
    stopped = not_private(box.dir)
    assert stopped == [], "\n".join(stopped)
