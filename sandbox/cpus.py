"""How much CPU this process may use: the CPUs it may run on, capped by its cgroups' CPU quotas.

A container or CI job given one CPU on a 2-core machine may still run on both cores: its affinity
says 2, the kernel's quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) lets it use one. What
the sandbox sizes by CPU (its Ray head start slots, the test suite's worker count) reads this.

Run as a script (``python sandbox/cpus.py``, no package needed) it prints the test suite's
worker count, which the ``Makefile`` reads before the venv exists.
"""

from __future__ import annotations

import os
from pathlib import Path


def _quota(directory: str) -> float | None:
    """The CPUs the quota of one cgroup directory allows, None where it sets none."""
    try:
        if os.path.exists(f"{directory}/cpu.max"):  # v2: "QUOTA PERIOD", QUOTA "max" for none
            quota, period = Path(f"{directory}/cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        quota = int(Path(f"{directory}/cpu.cfs_quota_us").read_text())  # v1: -1 for none
        return None if quota < 0 else quota / int(Path(f"{directory}/cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def _cpu_cgroup(cgroups: str, mountinfo: str) -> list[str]:
    """This process's CPU cgroup directory and its ancestors, from ``/proc/self/cgroup`` and
    ``/proc/self/mountinfo``: v1's ``cpu`` hierarchy where it is mounted, else v2's."""
    paths = {}
    for line in cgroups.splitlines():
        _, controllers, path = line.split(":", 2)
        paths.update({name: path for name in controllers.split(",")})  # v2's line: the name ""
    wanted = "cpu" if "cpu" in paths else ""
    for line in mountinfo.splitlines():
        fields = line.split()
        at = fields.index("-")
        fstype, options = fields[at + 1], fields[at + 3].split(",")
        if (fstype, wanted) == ("cgroup2", "") and "" in paths or fstype == "cgroup" and wanted in options:
            relative = os.path.relpath(paths[wanted], fields[3])  # the path inside the mounted root
            parts = [] if relative == "." else relative.split("/")
            return [os.path.join(fields[4], *parts[:depth]) for depth in range(len(parts), -1, -1)]
    return []


def usable_cpus() -> float:
    """min(CPUs in this process's affinity, the tightest CPU quota of its cgroup and ancestors)."""
    cpus: float = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        dirs = _cpu_cgroup(Path("/proc/self/cgroup").read_text(), Path("/proc/self/mountinfo").read_text())
    except OSError:
        dirs = []
    return min([cpus, *(quota for quota in map(_quota, dirs) if quota is not None)])


def start_slots() -> int:
    """How many Ray heads the sandboxes of one user start at once: one per usable CPU."""
    return max(1, int(usable_cpus()))


def suite_workers() -> int:
    """The test suite's pytest-xdist workers: one per usable CPU and two more, four at most (see the
    Makefile)."""
    return min(4, max(1, round(usable_cpus())) + 2)


if __name__ == "__main__":
    print(suite_workers())
