"""The driver log `run --wait` keeps beside the run record: streamed, redacted, private, bounded."""

from __future__ import annotations

import stat

import pytest

from nrl_k8s.errors import WaitTimeout
from nrl_k8s.flows import driver_log
from nrl_k8s.flows import records as runs
from nrl_k8s.redact import REDACTED


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


def stream(*chunks: str, error: Exception | None = None):
    """A driver log's ``chunks`` as they stream, then ``error`` if given."""
    yield from chunks
    if error:
        raise error


def record(run_id: str = "grpo-1", **extra) -> dict:
    return {"run_id": run_id, "job_id": f"{run_id}-job", "namespace": "ns", "created": "2026-11-24T00:00:00Z", **extra}


def test_the_stream_is_redacted_whole_lines_at_a_time_printed_and_kept():
    shown = []
    run = record()
    driver_log.follow(stream("step 1\nexport HF_TO", "KEN=hf_s3cr3t\nstep", " 2\n", "last"), run, shown.append)
    text = f"step 1\nexport HF_TOKEN={REDACTED}\nstep 2\nlast"
    assert "".join(shown) == text and "s3cr3t" not in "".join(shown)
    path = runs.runs_dir() / "grpo-1.log"
    assert path.read_text() == text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert runs.load("grpo-1")["log"] == {"complete": True, "bytes": len(text), "cut_bytes": 0}


def test_a_follow_that_stops_early_keeps_what_came_and_says_it_is_incomplete():
    run = record()
    with pytest.raises(WaitTimeout):
        driver_log.follow(stream("a\nb", error=WaitTimeout("job is still RUNNING after 5s")), run, lambda text: None)
    assert (runs.runs_dir() / "grpo-1.log").read_text() == "a\nb"
    assert runs.load("grpo-1")["log"] == {"complete": False, "bytes": 3, "cut_bytes": 0}


def test_a_huge_log_keeps_its_tail_from_a_line_start():
    saved = driver_log.SavedLog("big", limit=100)
    lines = [f"line {i:04d} " + "x" * 9 + "\n" for i in range(40)]  # 20 bytes each, 800 in all
    for line in lines:
        saved.write(line)
    saved.close()
    kept = saved.path.read_bytes().decode()
    assert kept == "".join(lines[-len(kept) // 20:]) and 100 <= len(kept) <= 200
    assert saved.cut_bytes + saved.size == 800 and saved.size == len(kept)


def test_the_saved_log_of_a_job_or_of_a_runs_name():
    for run_id, job_id, rayjob, created in [("grpo-a", "grpo-x1", "grpo", "2026-11-24T00:00:01Z"),
                                            ("grpo-b", "grpo-x2", "grpo", "2026-11-24T00:00:02Z"),
                                            ("other", "o-x", "other", "2026-11-24T00:00:03Z")]:
        runs.save({"run_id": run_id, "job_id": job_id, "namespace": "ns", "rayjob": rayjob, "created": created})
        driver_log.SavedLog(run_id).close()
    runs.save({"run_id": "no-log", "job_id": "n-x", "namespace": "ns", "rayjob": "grpo",
               "created": "2026-11-24T00:00:09Z"})

    assert driver_log.saved_log("ns", job_id="grpo-x1")[0]["run_id"] == "grpo-a"
    assert driver_log.saved_log("ns", name="grpo")[0]["run_id"] == "grpo-b"  # the newest with a log
    _, path = driver_log.saved_log("ns", name="other")
    assert path == runs.runs_dir() / "other.log"
    assert driver_log.saved_log("elsewhere", name="grpo") is None
    assert driver_log.saved_log("ns", job_id="unknown") is None
