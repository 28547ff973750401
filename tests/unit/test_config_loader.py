"""load_config end to end: split/bundled, layers, overrides, interpolation, namespace, manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config import kubeconfig, load_config
from nrl_k8s.config.loader import shipped_defaults_path
from nrl_k8s.errors import ConfigError

RECIPE = "policy:\n  model: ${oc.env:MODEL}\n  lr: 1.0e-6\ngrpo:\n  steps: ${policy.lr}\n"
INFRA = "image: img:1\nnamespace: team\n"


@pytest.fixture(autouse=True)
def no_service_account(tmp_path, monkeypatch):
    monkeypatch.setattr(kubeconfig, "SA_NAMESPACE_FILE", tmp_path / "no-such-sa-namespace")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "NRL_K8S_USER": "alice", **extra}


OWNER = {"nrl-k8s/owner": "alice"}  # the shipped defaults' label


def load(tmp_path: Path, files: dict[str, str], overrides=(), infra: str | None = "infra.yaml", **env: str):
    write(tmp_path, files)
    return load_config(
        tmp_path / "recipe.yaml",
        overrides,
        None if infra is None else tmp_path / infra,
        env=env_for(tmp_path, **env),
    )


def test_split_pair(tmp_path):
    cfg = load(tmp_path, {"recipe.yaml": RECIPE, "infra.yaml": INFRA})
    assert cfg.recipe == {"policy": {"model": "${oc.env:MODEL}", "lr": 1.0e-6}, "grpo": {"steps": "${policy.lr}"}}
    assert cfg.infra["image"] == "img:1"
    assert cfg.recipe_path == (tmp_path / "recipe.yaml").resolve()
    assert cfg.infra_path == (tmp_path / "infra.yaml").resolve()
    assert cfg.sources == (
        (tmp_path / "recipe.yaml").resolve(),
        shipped_defaults_path(),
        (tmp_path / "infra.yaml").resolve(),
    )
    assert (cfg.infra["namespace"], cfg.namespace_source) == ("team", "infra")


def test_bundled_infra_block(tmp_path):
    cfg = load(tmp_path, {"recipe.yaml": RECIPE + "infra:\n  image: img:2\n  namespace: ${user:}-ns\n"}, infra=None)
    assert "infra" not in cfg.recipe
    assert cfg.recipe["grpo"] == {"steps": "${policy.lr}"}
    assert cfg.infra["image"] == "img:2"
    assert cfg.infra["namespace"] == "alice-ns"
    assert cfg.infra_path == cfg.recipe_path


def test_bundled_infra_inherited_from_parent_recipe(tmp_path):
    cfg = load(
        tmp_path,
        {
            "base/parent.yaml": "policy: {lr: 1}\ninfra:\n  image: parent\n  labels: {a: '1'}\n"
            "  dynamo: {g: {manifest: dgd.yaml}}\n",
            "recipe.yaml": "defaults: base/parent.yaml\ninfra:\n  labels: {b: '2'}\n",
        },
        infra=None,
    )
    assert cfg.recipe == {"policy": {"lr": 1}}
    assert cfg.infra["image"] == "parent"
    assert cfg.infra["labels"] == {**OWNER, "a": "1", "b": "2"}
    assert cfg.infra["dynamo"]["g"]["manifest"] == str((tmp_path / "base" / "dgd.yaml").resolve())


@pytest.mark.parametrize(
    "files, infra, message, hint",
    [
        (
            {"recipe.yaml": RECIPE + "infra: {image: x}\n", "infra.yaml": INFRA},
            "infra.yaml",
            "has an 'infra:' block and --infra",
            "not both",
        ),
        ({"recipe.yaml": RECIPE}, None, "recipe.yaml: no infra given", "--infra"),
        ({"recipe.yaml": RECIPE}, "nope.yaml", "nope.yaml: file not found", "check the path"),
        ({"infra.yaml": INFRA}, "infra.yaml", "recipe.yaml: file not found", "check the path"),
        (
            {"recipe.yaml": "- a\n", "infra.yaml": INFRA},
            "infra.yaml",
            "recipe.yaml: top level must be a mapping",
            "key: value",
        ),
        (
            {"recipe.yaml": RECIPE, "infra.yaml": "- a\n"},
            "infra.yaml",
            "infra.yaml: top level must be a mapping",
            "key: value",
        ),
        ({"recipe.yaml": "a: [1\n", "infra.yaml": INFRA}, "infra.yaml", "recipe.yaml:2: ", "YAML syntax"),
        ({"recipe.yaml": RECIPE + "infra: [1]\n"}, None, "recipe.yaml: 'infra' must be a mapping", "key: value"),
    ],
    ids=[
        "both",
        "neither",
        "missing-infra",
        "missing-recipe",
        "recipe-not-mapping",
        "infra-not-mapping",
        "malformed-recipe",
        "infra-block-not-mapping",
    ],
)
def test_pair_errors(tmp_path, files, infra, message, hint):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, files, infra=infra)
    assert message in err.value.message
    assert hint in err.value.hint


@pytest.mark.parametrize(
    "files, infra, expected",
    [
        (
            {
                "recipe.yaml": RECIPE,
                "p.yaml": "image: parent\nlabels: {a: '1', b: '1'}\n",
                "infra.yaml": "defaults: p.yaml\nlabels: {b: '2'}\n",
            },
            "infra.yaml",
            {"image": "parent", "labels": {"a": "1", "b": "2"}},
        ),
        (
            {
                "recipe.yaml": RECIPE,
                "g.yaml": "image: g\nrayVersion: g\n",
                "sub/p.yaml": "defaults: ../g.yaml\nrayVersion: p\n",
                "infra.yaml": "defaults: [sub/p.yaml]\n",
            },
            "infra.yaml",
            {"image": "g", "rayVersion": "p"},
        ),
        (
            {
                "recipe.yaml": RECIPE + "infra:\n  defaults: infra/common.yaml\n  image: child\n",
                "infra/common.yaml": "image: common\nserviceAccount: sa\n",
            },
            None,
            {"image": "child", "serviceAccount": "sa"},
        ),
        (
            {"base.yaml": "policy: {lr: 2}\n", "recipe.yaml": "defaults: base.yaml\n", "infra.yaml": "image: x\n"},
            "infra.yaml",
            {"image": "x"},
        ),
    ],
    ids=[
        "infra-file-parent",
        "infra-chain-relative-paths",
        "bundled-block-defaults-relative-to-recipe",
        "recipe-defaults-do-not-leak-into-infra",
    ],
)
def test_infra_defaults_chains(tmp_path, files, infra, expected):
    cfg = load(tmp_path, files, infra=infra)
    for key, value in expected.items():
        assert cfg.infra[key] == ({**OWNER, **value} if key == "labels" else value)
    assert "defaults" not in cfg.infra and "defaults" not in cfg.recipe


def test_recipe_defaults_chain(tmp_path):
    cfg = load(
        tmp_path,
        {
            "g.yaml": "a: g\nb: g\nc: [1, 2]\n",
            "p.yaml": "defaults: g.yaml\nb: p\n",
            "recipe.yaml": "defaults: p.yaml\nc: [3]\n",
            "infra.yaml": INFRA,
        },
    )
    assert cfg.recipe == {"a": "g", "b": "p", "c": [3]}
    assert [p.name for p in cfg.sources] == ["g.yaml", "p.yaml", "recipe.yaml", "defaults.yaml", "infra.yaml"]


def test_defaults_cycle_is_reported(tmp_path):
    with pytest.raises(ConfigError, match=r"defaults cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load(
            tmp_path,
            {
                "recipe.yaml": RECIPE,
                "a.yaml": "defaults: b.yaml\n",
                "b.yaml": "defaults: a.yaml\n",
                "infra.yaml": "defaults: a.yaml\n",
            },
        )


# Layer precedence: shipped defaults (scheduler.kind=default) < user defaults < infra < CLI override.
KAI = "scheduler: {kind: kai, queue: q}\n"
KUEUE = "scheduler: {kind: kueue, queue: q}\n"


@pytest.mark.parametrize(
    "user_defaults, infra, overrides, expected",
    [
        (None, "image: x\n", [], "default"),
        (KAI, "image: x\n", [], "kai"),
        (KAI, KUEUE, [], "kueue"),
        (None, KAI, [], "kai"),
        (KAI, KUEUE, ["infra.scheduler.kind=kai"], "kai"),
        (None, "image: x\n", ["infra.scheduler.kind=kai", "+infra.scheduler.queue=q"], "kai"),
    ],
    ids=[
        "shipped",
        "user-over-shipped",
        "infra-over-user",
        "infra-over-shipped",
        "override-over-infra",
        "override-over-shipped",
    ],
)
def test_layer_precedence(tmp_path, user_defaults, infra, overrides, expected):
    files = {"recipe.yaml": RECIPE, "infra.yaml": infra}
    if user_defaults is not None:
        files["home/.config/nrl-k8s/defaults.yaml"] = user_defaults
    cfg = load(tmp_path, files, overrides)
    assert cfg.infra["scheduler"]["kind"] == expected


def test_user_defaults_from_env_var_and_merge_depth(tmp_path):
    cfg = load(
        tmp_path,
        {
            "recipe.yaml": RECIPE,
            "mine.yaml": "labels: {owner: me, team: a}\nimagePullSecrets: [a, b]\n",
            "home/.config/nrl-k8s/defaults.yaml": "labels: {ignored: yes}\n",
            "infra.yaml": "labels: {team: b}\nimagePullSecrets: [c]\n",
        },
        NRL_K8S_DEFAULTS=str(tmp_path / "mine.yaml"),
    )
    assert cfg.infra["labels"] == {**OWNER, "owner": "me", "team": "b"}
    assert cfg.infra["imagePullSecrets"] == ["c"]
    assert [p.name for p in cfg.sources] == ["recipe.yaml", "defaults.yaml", "mine.yaml", "infra.yaml"]


def test_missing_user_defaults_from_env_var_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"gone\.yaml: file not found"):
        load(tmp_path, {"recipe.yaml": RECIPE, "infra.yaml": INFRA}, NRL_K8S_DEFAULTS=str(tmp_path / "gone.yaml"))


# An infra-side file may hold its body under `infra:` (the earlier launcher's defaults file does).
WRAPPED_USER = "infra:\n  labels: {owner: me, team: a}\n  scheduler: {kind: kai, queue: q}\n"


@pytest.mark.parametrize(
    "files, env, expected",
    [
        (
            {"home/.config/nrl-k8s/defaults.yaml": WRAPPED_USER, "infra.yaml": "labels: {team: b}\n"},
            {},
            {"labels": {"owner": "me", "team": "b"}, "scheduler": {"kind": "kai", "queue": "q"}},
        ),
        (
            {"mine.yaml": WRAPPED_USER, "infra.yaml": "image: x\n"},
            {"NRL_K8S_DEFAULTS": "mine.yaml"},
            {"labels": {"owner": "me", "team": "a"}},
        ),
        ({"infra.yaml": "infra:\n  image: wrapped\n"}, {}, {"image": "wrapped"}),
        (
            {"p.yaml": "infra:\n  image: parent\n  rayVersion: p\n", "infra.yaml": "defaults: p.yaml\nimage: child\n"},
            {},
            {"image": "child", "rayVersion": "p"},
        ),
        (
            {"p.yaml": "image: parent\nrayVersion: p\n", "infra.yaml": "defaults: p.yaml\ninfra:\n  image: child\n"},
            {},
            {"image": "child", "rayVersion": "p"},
        ),
        (
            {"p.yaml": "rayVersion: p\n", "infra.yaml": "infra:\n  defaults: p.yaml\n  image: child\n"},
            {},
            {"image": "child", "rayVersion": "p"},
        ),
        (
            {"infra.yaml": "_base: &b {owner: me}\n_img: img:9\ninfra:\n  labels: *b\n  image: ${_img}\n"},
            {},
            {"labels": {"owner": "me"}, "image": "img:9"},
        ),
        (
            {
                "home/.config/nrl-k8s/defaults.yaml": "infra:\n  imagePullSecrets: []\n  serviceAccount: null\n",
                "infra.yaml": "image: x\n",
            },
            {},
            {"imagePullSecrets": []},
        ),
    ],
    ids=[
        "user-defaults",
        "user-defaults-from-env-var",
        "infra-file",
        "wrapped-parent",
        "wrapped-child-top-level-defaults",
        "defaults-inside-the-wrapper",
        "scratch-keys-beside-the-wrapper",
        "nulls-unset",
    ],
)
def test_infra_files_may_wrap_their_body_in_infra(tmp_path, files, env, expected):
    env = {k: str(tmp_path / v) for k, v in env.items()}
    cfg = load(tmp_path, {"recipe.yaml": RECIPE, **files}, **env)
    for key, value in expected.items():
        assert cfg.infra[key] == ({**OWNER, **value} if key == "labels" else value)
    assert "infra" not in cfg.infra and "defaults" not in cfg.infra and "_img" not in cfg.infra


def test_bundled_infra_parent_may_be_wrapped(tmp_path):
    cfg = load(tmp_path, {"recipe.yaml": RECIPE + "infra:\n  defaults: common.yaml\n  image: child\n",
                          "common.yaml": "infra:\n  serviceAccount: sa\n"}, infra=None)
    assert (cfg.infra["image"], cfg.infra["serviceAccount"]) == ("child", "sa")


@pytest.mark.parametrize(
    "files, message, hint",
    [
        ({"infra.yaml": "infra: [a]\n"}, "infra.yaml: 'infra' must be a mapping, got list", "key: value"),
        ({"infra.yaml": "image: x\ninfra:\n  namespace: n\n"}, "infra.yaml: image: set beside an 'infra:' block",
         "move 'image' under 'infra:'"),
        ({"p.yaml": "image: p\n", "infra.yaml": "defaults: p.yaml\ninfra:\n  defaults: p.yaml\n"},
         "infra.yaml: defaults: set both at the top and under 'infra:'", "one `defaults:`"),
        ({"home/.config/nrl-k8s/defaults.yaml": "infra:\n  imagee: x\n", "infra.yaml": "image: x\n"},
         "defaults.yaml: unknown infra key 'imagee'", "did you mean 'image'?"),
    ],
    ids=["not-a-mapping", "key-beside-the-wrapper", "two-defaults", "unknown-key-names-the-defaults-file"],
)
def test_wrapped_infra_errors(tmp_path, files, message, hint):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {"recipe.yaml": RECIPE, **files})
    assert message in err.value.message
    assert hint in err.value.hint


def test_recipe_files_are_never_unwrapped(tmp_path):
    """In a recipe (and its parents) `infra:` is the bundled infra block, not a wrapper."""
    cfg = load(
        tmp_path,
        {"p.yaml": "policy: {lr: 1}\ninfra:\n  image: p\n", "recipe.yaml": "defaults: p.yaml\ngrpo: {x: 1}\n"},
        infra=None,
    )
    assert cfg.recipe == {"policy": {"lr": 1}, "grpo": {"x": 1}}
    assert cfg.infra["image"] == "p"


@pytest.mark.parametrize(
    "overrides, recipe_expected, infra_key, infra_expected",
    [
        (["policy.lr=0.5"], {"policy": {"model": "${oc.env:MODEL}", "lr": 0.5}}, "image", "img:1"),
        (
            ["+policy.extra=${x.y}"],
            {"policy": {"model": "${oc.env:MODEL}", "lr": 1.0e-6, "extra": "${x.y}"}},
            "image",
            "img:1",
        ),
        (["~grpo"], None, "image", "img:1"),
        (["infra.image=img:2"], {}, "image", "img:2"),
        (["+infra.launch.env.A=1"], {}, "launch", {"env": {"A": "1"}}),
        (["++infra.labels={x: '${user:}'}"], {}, "labels", {"x": "alice"}),
        (["~infra.scheduler.kind"], {}, "scheduler", {}),
    ],
    ids=[
        "recipe-set",
        "recipe-add-keeps-interpolation",
        "recipe-delete",
        "infra-set",
        "infra-add",
        "infra-force-interpolated",
        "infra-delete-shipped-default",
    ],
)
def test_overrides_route_to_their_layer(tmp_path, overrides, recipe_expected, infra_key, infra_expected):
    cfg = load(tmp_path, {"recipe.yaml": RECIPE, "infra.yaml": INFRA}, overrides)
    if recipe_expected is None:
        assert "grpo" not in cfg.recipe
    for key, value in (recipe_expected or {}).items():
        assert cfg.recipe[key] == value
    assert cfg.infra[infra_key] == infra_expected
    assert "infra" not in cfg.recipe


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["infra.bogus=1"], "override 'infra.bogus=1': key 'infra.bogus' not found"),
        (["+infra.bogus=1"], "override '+infra.bogus=1': unknown infra key 'bogus'"),
        (["infra.image=5"], "override 'infra.image=5': infra key 'image': expected string, got integer 5"),
        (
            ["+infra.launch.env.X=${env:NOPE}"],
            "override '+infra.launch.env.X=${env:NOPE}': launch.env.X: environment variable 'NOPE' is not set",
        ),
        (["policy.nope=1"], "override 'policy.nope=1': key 'policy.nope' not found"),
        (["bad"], "override 'bad': missing '=VALUE'"),
    ],
    ids=[
        "infra-set-missing",
        "infra-add-unknown",
        "infra-wrong-type",
        "infra-override-env-unset",
        "recipe-set-missing",
        "bad-syntax",
    ],
)
def test_override_errors_name_the_override(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {"recipe.yaml": RECIPE, "infra.yaml": INFRA}, overrides)
    assert message in err.value.message


@pytest.mark.parametrize(
    "files, env, message",
    [
        ({"infra.yaml": "bogus: 1\n"}, {}, "infra.yaml: unknown infra key 'bogus'"),
        (
            {"p.yaml": "launch: {entrypiont: x}\n", "infra.yaml": "defaults: p.yaml\nimage: x\n"},
            {},
            "p.yaml: unknown infra key 'launch.entrypiont'",
        ),
        (
            {"home/.config/nrl-k8s/defaults.yaml": "scheduler: {kind: kai}\n", "infra.yaml": INFRA},
            {},
            "defaults.yaml: infra key 'scheduler.kind': 'kai' requires 'scheduler.queue'",
        ),
        (
            {"home/.config/nrl-k8s/defaults.yaml": "imag: x\n", "infra.yaml": INFRA},
            {},
            "nrl-k8s/defaults.yaml: unknown infra key 'imag'",
        ),
        ({"infra.yaml": "image: ${env:NOPE}\n"}, {}, "infra.yaml: image: environment variable 'NOPE' is not set"),
        ({"infra.yaml": "dynamo: {g: {name: x}}\n"}, {}, "infra.yaml: infra key 'dynamo.g.manifest': is required"),
    ],
    ids=[
        "unknown-in-infra",
        "unknown-in-parent-names-parent",
        "rule-in-user-defaults",
        "unknown-in-user-defaults",
        "env-unset",
        "manifest-required",
    ],
)
def test_errors_name_the_file(tmp_path, files, env, message):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {"recipe.yaml": RECIPE, **files}, **env)
    assert message in err.value.message


def test_interpolation_and_scratch_keys(tmp_path):
    infra = (
        "_base: &base {cpu: '4', memory: 8Gi}\n"
        "_registry: nvcr.io/team\n"
        "image: ${_registry}/rl:${env:TAG,latest}\n"
        "namespace: ${user:}\n"
        "labels: {owner: '${user:}'}\n"
        "resources: {training: {head: *base, worker: {<<: *base, gpu: 8}}}\n"
        "launch: {entrypoint: 'cd \\${HOME} && python run.py --image ${image}', "
        "env: {PORT: '${submit.localDashboardPort}'}}\n"
        "submit: {localDashboardPort: 8265}\n"
        "rayVersion: '${env:RAY,2.46.0}'\n"
    )
    recipe = "_scratch: 1\npolicy: {model: '${_scratch}'}\n"
    cfg = load(tmp_path, {"recipe.yaml": recipe, "infra.yaml": infra}, TAG="v1")
    assert cfg.infra["image"] == "nvcr.io/team/rl:v1"
    assert cfg.infra["namespace"] == "alice"
    assert cfg.infra["labels"] == {**OWNER, "owner": "alice"}
    assert cfg.infra["resources"]["training"] == {
        "head": {"cpu": "4", "memory": "8Gi"},
        "worker": {"cpu": "4", "memory": "8Gi", "gpu": 8},
    }
    assert cfg.infra["launch"]["entrypoint"] == "cd ${HOME} && python run.py --image nvcr.io/team/rl:v1"
    assert cfg.infra["launch"]["env"] == {"PORT": "8265"}
    assert cfg.infra["rayVersion"] == "2.46.0"
    assert not [k for k in cfg.infra if k.startswith("_")]
    assert cfg.recipe == {"policy": {"model": "${_scratch}"}}


@pytest.mark.parametrize(
    "infra, sa, kube, context, expected",
    [
        ("namespace: set\n", "sa-ns", "kube-ns", None, ("set", "infra")),
        ("image: x\n", "sa-ns", "kube-ns", None, ("sa-ns", "in-cluster")),
        ("image: x\n", None, "kube-ns", None, ("kube-ns", "kube-context")),
        ("image: x\n", None, "kube-ns", "other", ("other-ns", "kube-context")),
        ("image: x\n", None, None, None, ("default", "default")),
        ("namespace: null\n", None, None, None, ("default", "default")),
    ],
    ids=["infra", "in-cluster", "kube-context", "explicit-context", "default", "null-namespace-inferred"],
)
def test_namespace_inference(tmp_path, monkeypatch, infra, sa, kube, context, expected):
    files = {"recipe.yaml": RECIPE, "infra.yaml": infra}
    if sa:
        files["sa"] = sa
        monkeypatch.setattr(kubeconfig, "SA_NAMESPACE_FILE", tmp_path / "sa")
    if kube:
        files["home/.kube/config"] = (
            "current-context: main\ncontexts:\n"
            f"- name: main\n  context: {{namespace: {kube}}}\n"
            "- name: other\n  context: {namespace: other-ns}\n"
        )
    write(tmp_path, files)
    cfg = load_config(tmp_path / "recipe.yaml", (), tmp_path / "infra.yaml", context=context, env=env_for(tmp_path))
    assert (cfg.infra["namespace"], cfg.namespace_source) == expected


@pytest.mark.parametrize(
    "files, infra, overrides, expected",
    [
        ({"infra/i.yaml": "dynamo: {g: {manifest: ../dgd/g.yaml}}\n"}, "infra/i.yaml", [], "dgd/g.yaml"),
        (
            {"infra/i.yaml": "defaults: base/p.yaml\n", "infra/base/p.yaml": "dynamo: {g: {manifest: g.yaml}}\n"},
            "infra/i.yaml",
            [],
            "infra/base/g.yaml",
        ),
        (
            {
                "infra/i.yaml": "defaults: base/p.yaml\ndynamo: {g: {manifest: mine.yaml}}\n",
                "infra/base/p.yaml": "dynamo: {g: {manifest: g.yaml, name: n}}\n",
            },
            "infra/i.yaml",
            [],
            "infra/mine.yaml",
        ),
        ({"infra/i.yaml": "dynamo: {g: {manifest: /abs/g.yaml}}\n"}, "infra/i.yaml", [], "/abs/g.yaml"),
        (
            {"infra/i.yaml": "dynamo: {g: {manifest: a.yaml}}\n"},
            "infra/i.yaml",
            ["infra.dynamo.g.manifest=cli/g.yaml"],
            "cwd/cli/g.yaml",
        ),
        ({"infra/i.yaml": "image: x\n"}, "infra/i.yaml", ["+infra.dynamo={g: {manifest: new.yaml}}"], "cwd/new.yaml"),
    ],
    ids=[
        "relative-to-infra-file",
        "relative-to-parent-file",
        "child-overrides-parent",
        "absolute-kept",
        "override-relative-to-cwd",
        "override-block-relative-to-cwd",
    ],
)
def test_manifest_paths_are_absolute(tmp_path, monkeypatch, files, infra, overrides, expected):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    cfg = load(tmp_path, {"recipe.yaml": RECIPE, **files}, overrides, infra=infra)
    manifest = cfg.infra["dynamo"]["g"]["manifest"]
    assert Path(manifest).is_absolute()
    assert manifest == (expected if expected.startswith("/") else str((tmp_path / expected).resolve()))
    assert cfg.infra["dynamo"]["g"]["readyTimeoutS"] == 600


def test_shipped_defaults_are_small_and_valid(tmp_path):
    cfg = load(tmp_path, {"recipe.yaml": RECIPE, "infra.yaml": "{}\n"})
    assert cfg.infra == {
        "namespace": "default",
        "scheduler": {"kind": "default"},
        "labels": OWNER,  # every object names its maker
    }


def test_loading_does_not_import_cluster_libraries():
    import subprocess
    import sys

    code = (
        "import sys, nrl_k8s.config as c\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'kubernetes', 'ray', 'httpx', 'typer', 'rich'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_an_earlier_launcher_pair_loads_unchanged(tmp_path):
    """Its defaults file (wrapped in infra:, its enum values) and an infra file written with OmegaConf
    interpolation load as they did there; what nrl-k8s does not use is listed, nothing is dropped."""
    from nrl_k8s.config.unused_fields import unused_fields
    from nrl_k8s.flows.plan import default_flow, unstaged_recipe_reads

    upstream = Path(__file__).parent / "data" / "upstream"
    write(tmp_path, {"recipe.yaml": RECIPE})
    cfg = load_config(tmp_path / "recipe.yaml", (), upstream / "run.infra.yaml",
                      env=env_for(tmp_path, NRL_K8S_DEFAULTS=str(upstream / "defaults.yaml"), IMAGE_TAG="v9"))
    infra = cfg.infra
    assert (infra["namespace"], infra["image"], infra["labels"]) == ("rl-team", "nvcr.io/nvidia/nemo-rl:v9",
                                                                      {"nrl-k8s/owner": "alice"})
    group = infra["kuberay"]["training"]["spec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (4, 4, 4)
    assert group["template"]["metadata"]["annotations"] == {"nrl-k8s.io/group": "gpu-x4"}
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert infra["launch"]["env"] == {"TOTAL_GPUS": "32"}
    assert (
        'mkdir -p "${LOG_DIR}"' in infra["launch"]["entrypoint"]
        and "cluster.num_nodes=4" in infra["launch"]["entrypoint"]
    )
    assert infra["launch"]["codeSource"] == "upload" and default_flow(infra) == "raycluster"
    assert unstaged_recipe_reads(infra) == []
    assert unused_fields(infra) == [
        "submit.kind", "submit.portForward", "submit.devPod", "submit.localDashboardPort",
        "submit.execTmpDir", "launch.peerWatcher", "workspace.mountPath", "workspace.repoSubdir",
        "hf_cache.mountPath", "checkpoints.mountPath",
    ]
