"""Every file a sandbox writes is readable and writable by its owner only: its directory, the
kubeconfigs, certificates, tokens, etcd's data, pid, runtime and log files, and the Ray heads'
temp dirs with the logs of a job's driver, task worker and actor."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from operator_helpers import HeldJob, not_private


def test_every_file_the_sandbox_writes_is_private(sandbox, tmp_path):
    """On the session's sandbox (every file its tests made so far included); what ``down`` leaves
    is checked by test_lifecycle's test_down_stops_every_process_it_started."""
    job = HeldJob(sandbox, tmp_path)
    job.release()
    assert job.final_status() == "SUCCEEDED"
    scratch = Path(sandbox.info["scratch"])
    assert sorted(scratch.glob("*/ray/session_*/logs/job-driver-*.log")), "the job wrote no driver log"
    # Ray makes its temp dir and session dirs mode 0777 itself: they live in a directory of
    # ours that nobody else may enter, and every file in them must be private.
    gate = scratch.lstat()
    assert (stat.S_ISDIR(gate.st_mode), stat.S_IMODE(gate.st_mode), gate.st_uid) == (True, 0o700, os.getuid())
    # Ray unpacks a job's working_dir with the modes the package records (the checkout's own, as
    # git would): behind the 0700 gate above no other user reaches them, so they are not counted.
    running = not_private(sandbox.dir) + [line for line in not_private(scratch, dirs=False)
                                          if "/runtime_resources/working_dir_files/" not in line]
    assert running == [], "\n".join(running)
    assert (sandbox.dir / "etcd").is_dir() and (sandbox.dir / "pki").is_dir()  # the scan saw them
