"""How a run delivers its driver: the run-mode presets, the run flags as infra overrides, the
entrypoint's ``--config`` rewrite and the gym's endpoint-registry job id (all pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nrl_k8s.config import load_config, workflow
from nrl_k8s.config import recipe as recipe_mod
from nrl_k8s.errors import ConfigError
from nrl_k8s.flows.plan import plan_longlived, plan_run, registry_configmap

# -- presets -------------------------------------------------------------------------------------
# (name, infra, --wait/--no-wait given (None: not), expected (submitter, code source, waits))
PRESET_CASES = [
    ("nothing set: interactive", {}, None, ("dashboard", "upload", True)),
    ("interactive", {"launch": {"runMode": "interactive"}}, None, ("dashboard", "upload", True)),
    ("batch", {"launch": {"runMode": "batch"}}, None, ("exec", "image", False)),
    ("batch, --wait given", {"launch": {"runMode": "batch"}}, True, ("exec", "image", True)),
    ("interactive, --no-wait given", {"launch": {"runMode": "interactive"}}, False, ("dashboard", "upload", False)),
    (
        "batch, explicit submitter wins",
        {"launch": {"runMode": "batch"}, "submit": {"submitter": "dashboard"}},
        None,
        ("dashboard", "image", False),
    ),
    (
        "batch, explicit code source wins",
        {"launch": {"runMode": "batch", "codeSource": "lustre", "codePath": "/l"}},
        None,
        ("exec", "lustre", False),
    ),
    (
        "interactive, explicit exec wins",
        {"launch": {"runMode": "interactive", "codeSource": "image"}, "submit": {"submitter": "exec"}},
        None,
        ("exec", "image", True),
    ),
    (
        "portForward is the dashboard submitter",
        {"submit": {"submitter": "portForward"}},
        None,
        ("dashboard", "upload", True),
    ),
    (
        "portForward beats batch's exec",
        {"launch": {"runMode": "batch"}, "submit": {"submitter": "portForward"}},
        None,
        ("dashboard", "image", False),
    ),
]


@pytest.mark.parametrize("infra, given, expected", [c[1:] for c in PRESET_CASES], ids=[c[0] for c in PRESET_CASES])
def test_run_mode_presets(infra, given, expected):
    assert (workflow.submitter(infra), workflow.code_source(infra), workflow.waits(infra, given)) == expected


def test_code_path_only_when_the_code_is_not_uploaded():
    assert workflow.code_path({"launch": {"codePath": "/c"}}) is None
    assert workflow.code_path({"launch": {"codePath": "/c", "runMode": "batch"}}) == "/c"
    assert workflow.code_path({"launch": {"codePath": "/c", "codeSource": "lustre"}}) == "/c"


def test_flags_are_the_infra_overrides_they_stand_for():
    assert workflow.flag_overrides(mode="batch", submitter="exec", code_source="image", code_path="/opt/my code") == [
        "++infra.launch.runMode=batch", "++infra.submit.submitter=exec", "++infra.launch.codeSource=image",
        '++infra.launch.codePath="/opt/my code"']
    assert workflow.flag_overrides() == []


@pytest.mark.parametrize(
    "flags, named",
    [
        ({"mode": "fast"}, "--mode"),
        ({"submitter": "ssh"}, "--submitter"),
        ({"code_source": "git"}, "--code-source"),
        ({"code_path": " "}, "--code-path"),
    ],
)
def test_a_bad_flag_value_is_named_by_its_flag(flags, named):
    with pytest.raises(ConfigError) as err:
        workflow.flag_overrides(**flags)
    assert err.value.message.startswith(named) and err.value.hint and "\n" not in err.value.message


def _write(tmp_path: Path, infra: dict, recipe: dict | None = None) -> tuple[Path, Path]:
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe or {"policy": {"model_name": "m"}}))
    (tmp_path / "infra.yaml").write_text(yaml.safe_dump(infra))
    return tmp_path / "recipe.yaml", tmp_path / "infra.yaml"


def _infra(**launch) -> dict:
    return {"namespace": "rl", "image": "img:1", "launch": {"entrypoint": "python run.py", **launch},
            "kuberay": {"training": {"name": "train", "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {
                "spec": {"containers": [{"name": "ray-head"}]}}}}}}}


def test_a_preset_does_not_overwrite_a_key_the_infra_sets(tmp_path):
    """The CLI's --mode batch is an override of launch.runMode; the infra's own submitter stays."""
    infra = _infra(codeSource="image")
    infra["submit"] = {"submitter": "dashboard"}
    cfg = load_config(*_write(tmp_path, infra)[:1], workflow.flag_overrides(mode="batch"), tmp_path / "infra.yaml")
    plan = plan_longlived(cfg, "run-1")
    assert plan.submitter == "dashboard" and plan.exec_dir is None


def test_exec_plan_puts_the_run_in_its_own_directory_and_points_the_recipe_there(tmp_path):
    infra = _infra(codeSource="image", codePath="/opt/nemo rl", env={"MODE": "a b", "HF_TOKEN": "hf_x"})
    infra["submit"] = {"submitter": "exec", "execTmpDir": "/scratch/"}
    recipe, infra_path = _write(tmp_path, infra)
    plan = plan_longlived(load_config(recipe, [], infra_path), "run-1")
    assert plan.exec_dir == "/scratch/nrl-run-1"
    assert plan.driver.env == {
        "MODE": "a b",
        "NRL_K8S_RUN_ID": "run-1",
        "NRL_K8S_RECIPE": "/scratch/nrl-run-1/recipe.yaml",
    }
    assert plan.driver.entrypoint == "cd '/opt/nemo rl' && python run.py"


@pytest.mark.parametrize("infra_patch, key", [
    ({"submit": {"submitter": "exec"}}, "submit.submitter"),
    ({"launch": {"runMode": "batch", "codeSource": "upload"}}, "launch.runMode"),
])
def test_exec_with_code_upload_is_refused_naming_file_and_key(tmp_path, infra_patch, key):
    infra = _infra()
    for block, values in infra_patch.items():
        infra.setdefault(block, {}).update(values)
    recipe, infra_path = _write(tmp_path, infra)
    with pytest.raises(ConfigError) as err:
        plan_longlived(load_config(recipe, [], infra_path), "run-1")
    assert err.value.exit_code == 2 and str(infra_path) in err.value.message and key in err.value.message
    assert "upload" in err.value.message and "--code-source image" in err.value.hint


def test_exec_tmp_dir_must_be_absolute(tmp_path):
    infra = _infra(codeSource="image")
    infra["submit"] = {"submitter": "exec", "execTmpDir": "tmp"}
    recipe, infra_path = _write(tmp_path, infra)
    with pytest.raises(ConfigError, match="execTmpDir"):
        plan_longlived(load_config(recipe, [], infra_path), "run-1")


# -- the --config rewrite ------------------------------------------------------------------------
R = recipe_mod.RECIPE_REF
REWRITE_CASES = [
    (
        "space form",
        "python run.py --config examples/a.yaml x=1",
        f"python run.py --config {R} x=1",
        ["--config examples/a.yaml"],
    ),
    ("equals form, .yml", "python run.py --config=a.yml", f"python run.py --config={R}", ["--config=a.yml"]),
    (
        "single-quoted with a space",
        "python run.py --config 'my dir/a.yaml'",
        f"python run.py --config {R}",
        ["--config 'my dir/a.yaml'"],
    ),
    ("double-quoted, equals", 'python run.py --config="a.yaml"', f"python run.py --config={R}", ['--config="a.yaml"']),
    (
        "every occurrence, one line per distinct flag",
        "python a.py --config x.yaml && python b.py --config x.yaml --config=y.yaml",
        f"python a.py --config {R} && python b.py --config {R} --config={R}",
        ["--config x.yaml", "--config=y.yaml"],
    ),
    (
        "Hydra's flags and other *-config flags untouched",
        "python run.py --config-name grpo --config-dir conf --config-path c --model-config m.yaml",
        "python run.py --config-name grpo --config-dir conf --config-path c --model-config m.yaml",
        [],
    ),
    ("already the run's recipe", f"python run.py --config {R}", f"python run.py --config {R}", []),
    (
        "already the run's recipe, braces",
        "python run.py --config ${NRL_K8S_RECIPE}",
        "python run.py --config ${NRL_K8S_RECIPE}",
        [],
    ),
    ("no --config", "python run.py", "python run.py", []),
    (
        "a shell operator ends the path",
        "python run.py --config a.yaml;echo done",
        f"python run.py --config {R};echo done",
        ["--config a.yaml"],
    ),
]


@pytest.mark.parametrize(
    "entrypoint, command, rewritten", [c[1:] for c in REWRITE_CASES], ids=[c[0] for c in REWRITE_CASES]
)
def test_config_rewrite(entrypoint, command, rewritten):
    infra = {"launch": {"entrypoint": entrypoint}}
    assert recipe_mod.driver_entrypoint(infra) == command
    notes = recipe_mod.config_rewrites(infra)
    assert [n.split("`")[1] for n in notes] == rewritten
    assert all(n.split("`")[3].endswith(R) for n in notes)


@pytest.mark.parametrize("entrypoint", ["python run.py --config $CFG", "python run.py --config /etc/cfg",
                                        "python run.py --config \"$HOME/a.yaml\"", "python run.py --config *.yaml"])
def test_a_config_the_driver_would_read_instead_of_the_runs_is_refused(tmp_path, entrypoint):
    recipe, infra_path = _write(tmp_path, _infra(entrypoint=entrypoint))
    with pytest.raises(ConfigError) as err:
        plan_run(load_config(recipe, [], infra_path))
    assert (
        err.value.exit_code == 2 and str(infra_path) in err.value.message and "launch.entrypoint" in err.value.message
    )
    assert "\n" not in err.value.message and R in err.value.hint


def test_the_rewrite_acts_in_both_flows_and_says_so(tmp_path):
    recipe, infra_path = _write(tmp_path, _infra(entrypoint="python run.py --config examples/grpo.yaml",
                                                 codeSource="image", codePath="/opt/nemo-rl"))
    cfg = load_config(recipe, [], infra_path)
    rayjob, longlived = plan_run(cfg), plan_longlived(cfg, "run-1")
    assert rayjob.rayjob["spec"]["entrypoint"] == f"cd /opt/nemo-rl && python run.py --config {R}"
    assert longlived.driver.entrypoint == rayjob.rayjob["spec"]["entrypoint"]
    for plan in (rayjob, longlived):
        assert [n for n in plan.notes if "--config examples/grpo.yaml" in n] == [
            f"launch.entrypoint: `--config examples/grpo.yaml` -> `--config {R}` (the recipe this run stages)"]


def test_a_stamped_dgd_name_is_said_to_reach_the_driver_only_through_the_recipe(tmp_path):
    dgd = tmp_path / "dgd.yaml"
    dgd.write_text(yaml.safe_dump({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
                                   "metadata": {"name": "g"}, "spec": {"services": {"Frontend": {
                                       "componentType": "frontend", "replicas": 1}}}}))
    infra = _infra(entrypoint="python run.py")
    infra["dynamo"] = {"serving": {"manifest": str(dgd)}}
    recipe, infra_path = _write(tmp_path, infra)
    notes = plan_run(load_config(recipe, [], infra_path)).notes
    assert any("does not name the run's recipe" in n and "dgd_name g" in n for n in notes), notes
    # Rewritten to the run's recipe, the driver does read it: nothing to say.
    recipe, infra_path = _write(tmp_path, {**infra, "launch": {"entrypoint": "python run.py --config a.yaml"}})
    notes = plan_run(load_config(recipe, [], infra_path)).notes
    assert not any("does not name" in n for n in notes), notes


# -- the gym's endpoint registry -----------------------------------------------------------------
REGISTRY_CASES = [
    ("space form", "python gym.py --job-id run-k --port 1", "nemo-rl-endpoints-run-k"),
    ("equals form", "python gym.py --job-id=run-k", "nemo-rl-endpoints-run-k"),
    ("quoted", "python gym.py --job-id 'run-k'", "nemo-rl-endpoints-run-k"),
    ("no flag", "python gym.py --port 1", None),
    ("a longer flag is not it", "python gym.py --job-id-file x", None),
    ("a shell variable is not a literal id", "python gym.py --job-id $JOB", None),
    ("not a ConfigMap name", "python gym.py --job-id Run_K", None),
]


@pytest.mark.parametrize("entrypoint, expected", [c[1:] for c in REGISTRY_CASES], ids=[c[0] for c in REGISTRY_CASES])
def test_registry_job_id_from_the_gym_daemon(entrypoint, expected):
    infra = {"kuberay": {"gym": {"name": "g", "daemon": {"entrypoint": entrypoint}}}}
    assert registry_configmap(infra) == expected


def test_no_gym_daemon_no_registry():
    assert registry_configmap({"kuberay": {"training": {"daemon": {"entrypoint": "x --job-id a"}}}}) is None
    assert registry_configmap({}) is None
