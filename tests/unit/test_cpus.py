"""What the sandbox and the suite size by CPU: the CPUs a process may run on, capped by its CPU quota
(a container given one CPU of a 2-core machine still runs on both cores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nrl_k8s_sandbox import cpus

V1 = ("4:memory:/job\n2:cpuacct:/\n1:cpu:/ci/lane\n0::/\n",
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n")
V1_JOINED = ("3:cpu,cpuacct:/docker/abc\n",
             "40 30 0:35 /docker /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n")
V2 = ("0::/user.slice/ci.scope\n", "35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n")


@pytest.mark.parametrize(("files", "dirs"), [
    (V1, ["/sys/fs/cgroup/cpu/ci/lane", "/sys/fs/cgroup/cpu/ci", "/sys/fs/cgroup/cpu"]),
    (V1_JOINED, ["/sys/fs/cgroup/cpu,cpuacct/abc", "/sys/fs/cgroup/cpu,cpuacct"]),  # mounted from /docker
    (V2, ["/sys/fs/cgroup/user.slice/ci.scope", "/sys/fs/cgroup/user.slice", "/sys/fs/cgroup"]),
    (("0::/\n", "35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"), ["/sys/fs/cgroup"]),
    (("1:cpu:/x\n", "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n"), []),  # not mounted
], ids=["v1", "v1-joined-in-a-container", "v2", "v2-root", "unmounted"])
def test_the_cpu_cgroup_and_its_ancestors(files, dirs):
    assert cpus._cpu_cgroup(*files) == dirs


def test_quotas_in_both_versions(tmp_path: Path):
    for name, text in {"v2/cpu.max": "150000 100000\n", "v2none/cpu.max": "max 100000\n",
                       "v1/cpu.cfs_quota_us": "50000\n", "v1/cpu.cfs_period_us": "100000\n",
                       "v1none/cpu.cfs_quota_us": "-1\n", "v1none/cpu.cfs_period_us": "100000\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert [cpus._quota(str(tmp_path / d)) for d in ("v2", "v2none", "v1", "v1none", "missing")] == [
        1.5, None, 0.5, None, None]


def test_the_tightest_quota_caps_the_affinity(monkeypatch):
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda _: {0, 1})
    monkeypatch.setattr(cpus, "_cpu_cgroup", lambda *_: ["/lane", "/ci", "/"])
    quotas = {"/lane": None, "/ci": 1.0, "/": 3.0}
    monkeypatch.setattr(cpus, "_quota", quotas.get)
    assert (cpus.usable_cpus(), cpus.start_slots(), cpus.suite_workers()) == (1.0, 1, 3)
    quotas.update({"/ci": None, "/": None})
    assert (cpus.usable_cpus(), cpus.start_slots(), cpus.suite_workers()) == (2, 2, 4)
    quotas["/lane"] = 0.5
    assert (cpus.start_slots(), cpus.suite_workers()) == (1, 3)


def test_the_makefile_reads_the_worker_count_without_the_package():
    script = Path(cpus.__file__)
    shown = subprocess.run([sys.executable, "-I", "-S", str(script)], capture_output=True, text=True, check=True)
    assert shown.stdout == f"{cpus.suite_workers()}\n"
