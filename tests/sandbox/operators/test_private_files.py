"""Every file a sandbox writes is readable and writable by its owner only: its directory, the
kubeconfig, pid, runtime and log files, the ``--state`` file, and the Ray head's temp dir with
the logs of a job's driver, task worker and actor."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from operator_helpers import HeldJob

from nrl_k8s.sandbox.store import Store


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
    state = tmp_path / "state.json"
    state.write_text(json.dumps(Store().dump()))
    state.chmod(0o644)  # a readable state file from before is made private when it is saved
    with separate_sandbox(state=state) as box:
        job = HeldJob(box, tmp_path)
        job.release()
        assert job.final_status() == "SUCCEEDED"
        ray_temp = Path(box.info["ray_temp_dir"])
        assert sorted(ray_temp.glob("session_*/logs/job-driver-*.log")), "the job wrote no driver log"
        # Ray makes its temp dir and session dirs mode 0777 itself: they live in a directory of
        # ours that nobody else may enter, and every file in them must be private.
        gate = ray_temp.parent.lstat()
        assert (stat.S_ISDIR(gate.st_mode), stat.S_IMODE(gate.st_mode), gate.st_uid) == (True, 0o700, os.getuid())
        running = not_private(box.dir) + not_private(ray_temp, dirs=False)
        assert running == [], "\n".join(running)
    stopped = not_private(box.dir) + not_private(ray_temp, dirs=False) + not_private(state)
    assert stopped == [], "\n".join(stopped)
