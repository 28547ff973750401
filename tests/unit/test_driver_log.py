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


# -- the values a log hides without the run config: read from the Secrets the run's pods read -----
def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def _secret(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {k: _b64(v) for k, v in data.items()}}


RUN_SECRET = _secret("run-1", **{"recipe.yaml": "logger:\n  wandb: {api_key: SEC-RECIPE-1, project: proj-visible}\n",
                                 "HF_TOKEN": "SEC-HF-1", "PATH": "/usr/bin:/bin", "MODE": "long-lived"})
POD_SECRET_CASES = [
    ("env secretKeyRef", {"containers": [{"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s1",
                                                                                                "key": "k"}}}]}]},
     [_secret("s1", k="SEC-REF-1", other="SEC-REF-2")], ["SEC-REF-1", "SEC-REF-2"], []),
    ("envFrom secretRef", {"initContainers": [{"envFrom": [{"secretRef": {"name": "s2"}}]}]},
     [_secret("s2", A="SEC-FROM-1")], ["SEC-FROM-1"], []),
    ("Secret volume", {"volumes": [{"name": "v", "secret": {"secretName": "s3"}}]},
     [_secret("s3", key="SEC-VOL-1")], ["SEC-VOL-1"], []),
    ("projected Secret", {"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "s4"}}]}}]},
     [_secret("s4", key="SEC-PROJ-1")], ["SEC-PROJ-1"], []),
    ("the owner's <user>-secrets, read by nothing in the spec", {},
     [_secret("alice-secrets", SETUP="SEC-SETUP-1")], ["SEC-SETUP-1"], []),
    ("the run Secret: secret-looking names and the recipe's secrets only",
     {"volumes": [{"name": "run", "secret": {"secretName": "run-1"}}]}, [RUN_SECRET],
     ["SEC-HF-1", "SEC-RECIPE-1"], ["/usr/bin:/bin", "long-lived", "proj-visible"]),
    ("a Secret that is gone hides nothing and fails nothing",
     {"containers": [{"envFrom": [{"secretRef": {"name": "gone"}}]}]}, [], [], []),
]


class SecretsKube:
    """Pods (labelled with their owner) and Secrets by name; ``forbidden``: Secrets it may not read."""

    def __init__(self, spec: dict, secrets: list[dict], forbidden: frozenset = frozenset()):
        self.pods = [{"metadata": {"name": "p", "labels": {"nrl-k8s/owner": "alice"}}, "spec": spec}]
        self.secrets, self.forbidden, self.selectors = {s["metadata"]["name"]: s for s in secrets}, forbidden, []

    def list(self, kind, namespace, label_selector=None):
        self.selectors.append(label_selector)
        return self.pods

    def find(self, kind, name, namespace):
        from nrl_k8s.errors import ForbiddenError

        if name in self.forbidden:
            raise ForbiddenError(f'secrets "{name}" is forbidden', status=403)
        return self.secrets.get(name)


@pytest.mark.parametrize(("spec", "secrets", "hidden", "shown"), [c[1:] for c in POD_SECRET_CASES],
                         ids=[c[0] for c in POD_SECRET_CASES])
def test_the_values_of_the_secrets_a_runs_pods_read_are_hidden(monkeypatch, spec, secrets, hidden, shown):
    from nrl_k8s import redact

    monkeypatch.setattr(redact, "_KNOWN", set())
    kube = SecretsKube(spec, secrets)
    driver_log.remember_pod_secrets(kube, "ns", "ray.io/cluster=c")
    assert kube.selectors == ["ray.io/cluster=c"]
    text = redact.redact_text(" ".join(hidden + shown))
    assert text == " ".join([REDACTED] * len(hidden) + shown)


def test_a_secret_the_user_may_not_read_stops_the_log_with_the_permission_to_ask_for(monkeypatch):
    from nrl_k8s import redact
    from nrl_k8s.errors import ForbiddenError

    monkeypatch.setattr(redact, "_KNOWN", set())
    kube = SecretsKube({"containers": [{"envFrom": [{"secretRef": {"name": "team"}}]}]}, [], frozenset({"team"}))
    with pytest.raises(ForbiddenError) as err:
        driver_log.remember_pod_secrets(kube, "ns", "ray.io/cluster=c")
    assert "cannot read Secret team" in err.value.message and "get on secrets in namespace ns" in err.value.hint


def test_following_with_a_cluster_hides_what_its_pods_read_in_the_stream_and_the_saved_copy(monkeypatch):
    from nrl_k8s import redact

    monkeypatch.setattr(redact, "_KNOWN", set())
    kube = SecretsKube({"containers": [{"envFrom": [{"secretRef": {"name": "s"}}]}]}, [_secret("s", K="SEC-USER-9")])
    shown = []
    driver_log.follow(stream("user SEC-USER-9\n"), record(training_cluster="c"), shown.append, kube)
    assert "".join(shown) == f"user {REDACTED}\n" == (runs.runs_dir() / "grpo-1.log").read_text()
    assert kube.selectors == ["ray.io/cluster=c"]
