"""Secret values never reach what the offline commands print or write (check, check -o, run --dry-run)."""

from __future__ import annotations

import stat

import pytest
import yaml
from test_offline_commands import KIND

from nrl_k8s.redact import REDACTED

HF = "hf_s3cr3tvalue"
SECRETS = {
    "infra.launch.env.HF_TOKEN": HF,
    "infra.launch.env.hfToken": "camel_s3cr3t",
    "infra.launch.env.GITHUB_PAT": "ghp_s3cr3t",
    "infra.launch.env.ACCESSTOKEN": "access_s3cr3t",
    "infra.launch.env.SESSION_COOKIE": "cookie_s3cr3t",
    "infra.launch.env.DATABASE_URL": "postgres://u:url_s3cr3t@db/x",
    "logger.wandb.api_key": "recipe_s3cr3t",
}
OVERRIDES = [f"++{k}={v}" for k, v in SECRETS.items()] + ["++infra.launch.env.PATH=/nowhere"]
VALUES = ["s3cr3t"]  # every value above contains it


def _leaks(text: str) -> list[str]:
    return [v for v in VALUES if v in text]


def test_check_summary_redacts_every_secret_shape(cli):
    result = cli("check", *KIND, *OVERRIDES)
    assert result.exit_code == 0, result.stderr
    assert not _leaks(result.stdout + result.stderr)
    assert f"env         HF_TOKEN={REDACTED}" in result.stdout
    assert f"env         DATABASE_URL=postgres://u:{REDACTED}@db/x" in result.stdout
    assert "env         PATH=/nowhere" in result.stdout


def test_dry_run_prints_the_secret_redacted_and_no_value_in_the_rayjob(cli):
    result = cli("run", "--dry-run", *KIND, *OVERRIDES)
    assert result.exit_code == 0, result.stderr
    assert not _leaks(result.stdout + result.stderr)
    assert "secret values are redacted" in result.stderr
    _, job, secret, _ = yaml.safe_load_all(result.stdout)  # lease, RayJob, Secret, DGD
    assert set(secret["stringData"]) == {
        "recipe.yaml",
        "HF_HOME",
        *(k.rsplit(".", 1)[1] for k in SECRETS if k.startswith("infra.")),
        "PATH",
    }
    assert set(secret["stringData"].values()) == {REDACTED}
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "HF_TOKEN"}},
    } in head["env"]


def test_dry_run_show_secrets_prints_what_would_be_applied_and_still_nothing_in_the_rayjob(cli):
    result = cli("run", "--dry-run", "--show-secrets", *KIND, *OVERRIDES)
    assert result.exit_code == 0, result.stderr
    _, job, secret, _ = yaml.safe_load_all(result.stdout)  # lease, RayJob, Secret, DGD
    assert secret["stringData"]["HF_TOKEN"] == HF
    assert "recipe_s3cr3t" in secret["stringData"]["recipe.yaml"]
    assert not _leaks(yaml.safe_dump(job))


@pytest.mark.parametrize("show", [False, True], ids=["redacted", "show-secrets"])
@pytest.mark.parametrize("existing", [False, True], ids=["new file", "existing 0644 file"])
def test_check_output_is_written_0600(cli, tmp_path, show, existing):
    target = tmp_path / "bundle.yaml"
    if existing:
        target.write_text("old\n")
        target.chmod(0o644)
    result = cli("check", *KIND, *OVERRIDES, "-o", str(target), *(["--show-secrets"] if show else []))
    assert result.exit_code == 0, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    text = target.read_text()
    assert bool(_leaks(text)) is show
    if not show:
        data = yaml.safe_load(text)
        assert data["recipe"]["logger"]["wandb"]["api_key"] == REDACTED
        assert data["infra"]["launch"]["env"]["GITHUB_PAT"] == REDACTED


def test_check_output_to_an_unwritable_place_is_one_clear_error(cli, tmp_path):
    result = cli("check", *KIND, "-o", str(tmp_path / "missing-dir" / "bundle.yaml"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output ") and "Traceback" not in result.stderr


def test_an_error_echoing_an_override_value_is_redacted(cli):
    result = cli("check", *KIND, f"infra.launch.env.HF_TOKEN=[{HF}")
    assert result.exit_code == 2
    assert "HF_TOKEN" in result.stderr and not _leaks(result.stderr)


def _pieces(value: str, size: int = 8) -> list[str]:
    """Every ``size``-character piece of ``value``: none may show anywhere."""
    return [value[i:i + size] for i in range(len(value) - size + 1)]


@pytest.mark.parametrize("value", ["hf_" + "Zq9x" * 45, "Zq9x" * 45], ids=["hf_ token", "any long value"])
def test_an_override_error_redacts_a_long_value_before_it_cuts_the_override(cli, value):
    """Issue 30: the override was cut to 96 characters first, so the rest of a long token showed."""
    result = cli("check", *KIND, f"+infra.launch.env={{HF_TOKEN: {value}, X: [1]}}")
    assert result.exit_code == 2
    assert "override '+infra.launch.env={HF_TOKEN: <redacted>, X: [1]}'" in result.stderr, result.stderr
    assert not [piece for piece in _pieces(value) if piece in result.stderr]


def test_a_printed_entrypoint_keeps_its_rest_and_its_variable_references(cli):
    """Issue 30: ``echo "X_TOKEN=$X_TOKEN" && echo "ok"`` was shown as ``echo "X_TOKEN=<redacted>"``."""
    entrypoint = 'echo "X_TOKEN=$X_TOKEN" && echo "ok"'
    result = cli("check", *KIND, "++infra.launch.env.X_TOKEN=xt_s3cr3t", f"infra.launch.entrypoint='{entrypoint}'")
    assert result.exit_code == 0, result.stderr
    assert f"entrypoint  {entrypoint}\n" in result.stdout
    assert "secret on its command line" not in result.stderr and not _leaks(result.stdout + result.stderr)
