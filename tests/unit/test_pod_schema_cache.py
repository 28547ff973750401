"""The schema layer remembers what it accepted (privately) and never what it refused."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from nrl_k8s.kinds import pod_schema
from nrl_k8s.kinds.k8s_rules import Invalid

GOOD = {"spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/nemo-rl:v0.4.0"}]}}
BAD = {"spec": {"containers": [{"name": "main", "image": "x", "imagePullPolicy": 3}]}}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    pod_schema._valid.cache_clear()
    yield tmp_path / "nrl-k8s" / "pod-schema-valid"
    pod_schema._valid.cache_clear()


def test_accepted_templates_are_remembered_privately(fresh_cache):
    pod_schema.check_pod_template(GOOD, rendered=True)
    lines = fresh_cache.read_text().split()
    assert len(lines) == 1 and len(lines[0]) == 64
    assert stat.S_IMODE(fresh_cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(fresh_cache.parent.stat().st_mode) == 0o700
    pod_schema.check_pod_template(GOOD, rendered=True)
    assert fresh_cache.read_text().split() == lines  # known: not added again


def test_a_refused_template_is_never_remembered_and_still_refused(fresh_cache):
    for _ in range(2):
        with pytest.raises(Invalid) as bad:
            pod_schema.check_pod_template(BAD, rendered=True)
        assert bad.value.path[-1] == "imagePullPolicy"
    assert not fresh_cache.exists()


def test_a_rerun_skips_the_schema_library(fresh_cache, tmp_path):
    """The second process finds the template remembered: jsonschema-rs is not even imported."""
    probe = ("import sys; from nrl_k8s.kinds import pod_schema; "
             f"pod_schema.check_pod_template({GOOD!r}, rendered=True); print('jsonschema_rs' in sys.modules)")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs == ["True\n", "False\n"]


def test_a_corrupt_or_huge_cache_file_is_ignored(fresh_cache):
    fresh_cache.parent.mkdir(mode=0o700)
    fresh_cache.write_text("not a digest\n" * 10 + "z" * 64 + "\n")  # garbage, and a 64-char non-match
    pod_schema.check_pod_template(GOOD, rendered=True)
    fresh_cache.write_text(("0" * 64 + "\n") * (pod_schema._CACHE_MAX_LINES + 10))
    pod_schema._valid.cache_clear()
    assert pod_schema._valid() == set()  # over the cap: not trusted, rewritten on the next acceptance
    pod_schema.check_pod_template(GOOD, rendered=True)
    assert len(fresh_cache.read_text().split()) == 1


def test_the_pod_definitions_are_extracted_once_and_a_broken_copy_is_replaced(fresh_cache):
    first = pod_schema._pod_definitions()
    copies = list(fresh_cache.parent.glob("pod-schema-defs-*.json"))
    assert len(copies) == 1 and stat.S_IMODE(copies[0].stat().st_mode) == 0o600
    assert pod_schema._pod_definitions() == first  # from the copy
    for broken in ("{not json", "[1, 2]", '["x", {"other": {}}]'):
        copies[0].write_text(broken)
        assert pod_schema._pod_definitions() == first
    assert "io.k8s.api.core.v1.Container" in first[1] and all("description" not in d for d in first[1].values())
