"""Secret redaction in env mappings, k8s env lists and shell assignments."""

from __future__ import annotations

import copy

import pytest

from nrl_k8s import recipe as recipe_mod
from nrl_k8s.redact import REDACTED, SECRET_KEY, is_secret, redact, redact_text

NAMES = [
    ("HF_TOKEN", True),
    ("WANDB_API_KEY", True),
    ("AWS_SECRET_ACCESS_KEY", True),
    ("NGC_APIKEY", True),
    ("DB_PASSWORD", True),
    ("MYSQL_PWD", True),
    ("GIT_CREDENTIALS", True),
    ("hf_token", True),
    ("TOKEN", True),
    ("PRIVATE_KEY_PATH", True),
    ("api.key", True),
    ("MONKEY", False),
    ("KEYBOARD", False),
    ("TOKENIZERS_PARALLELISM", False),
    ("NCCL_IB_DISABLE", False),
    ("PASSENGER", False),
    ("AUTHOR", False),
    ("HF_HOME", False),
]


@pytest.mark.parametrize("name, secret", NAMES, ids=[n for n, _ in NAMES])
def test_secret_names(name, secret):
    assert is_secret(name) is secret
    assert (SECRET_KEY.search(name) is not None) is secret


OBJECT_CASES = [
    (
        "env mapping",
        {"launch": {"env": {"HF_TOKEN": "abc", "MODEL": "qwen"}}},
        {"launch": {"env": {"HF_TOKEN": REDACTED, "MODEL": "qwen"}}},
    ),
    (
        "extra_env mapping",
        {"networking": {"extra_env": {"WANDB_API_KEY": "k", "NCCL_DEBUG": "INFO"}}},
        {"networking": {"extra_env": {"WANDB_API_KEY": REDACTED, "NCCL_DEBUG": "INFO"}}},
    ),
    (
        "k8s env list",
        {"containers": [{"name": "c", "env": [{"name": "HF_TOKEN", "value": "abc"}, {"name": "A", "value": "1"}]}]},
        {"containers": [{"name": "c", "env": [{"name": "HF_TOKEN", "value": REDACTED}, {"name": "A", "value": "1"}]}]},
    ),
    (
        "dynamo envs list",
        {"spec": {"envs": [{"name": "NGC_API_KEY", "value": "n"}]}},
        {"spec": {"envs": [{"name": "NGC_API_KEY", "value": REDACTED}]}},
    ),
    (
        "valueFrom references untouched",
        {"env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]},
        {"env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]},
    ),
    (
        "secret-looking keys outside env untouched",
        {"imagePullSecrets": ["ngc"], "volume": {"secret": {"secretName": "creds"}}, "key": "value"},
        {"imagePullSecrets": ["ngc"], "volume": {"secret": {"secretName": "creds"}}, "key": "value"},
    ),
    ("empty value stays empty", {"env": {"HF_TOKEN": ""}}, {"env": {"HF_TOKEN": ""}}),
    (
        "entrypoint strings",
        {"spec": {"entrypoint": "export HF_TOKEN='abc'\nexport MODEL=qwen\npython run.py"}},
        {"spec": {"entrypoint": f"export HF_TOKEN='{REDACTED}'\nexport MODEL=qwen\npython run.py"}},
    ),
    ("scalars pass through", {"a": 1, "b": None, "c": [True, 2.5]}, {"a": 1, "b": None, "c": [True, 2.5]}),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in OBJECT_CASES], ids=[c[0] for c in OBJECT_CASES])
def test_redact_objects(obj, expected):
    before = copy.deepcopy(obj)
    assert redact(obj) == expected
    assert obj == before


TEXT_CASES = [
    ("export quoted", "export HF_TOKEN='a b'", f"export HF_TOKEN='{REDACTED}'"),
    ("export bare", "export HF_TOKEN=abc", f"export HF_TOKEN='{REDACTED}'"),
    ("export with embedded quote", "export DB_PASSWORD='it'\"'\"'s'; echo", f"export DB_PASSWORD='{REDACTED}'; echo"),
    ("double quoted", 'WANDB_API_KEY="x y" python run.py', f"WANDB_API_KEY='{REDACTED}' python run.py"),
    ("several on one line", "export A=1 HF_TOKEN=2 B=3", f"export A=1 HF_TOKEN='{REDACTED}' B=3"),
    ("after a separator", "cd /x && HF_TOKEN=z python", f"cd /x && HF_TOKEN='{REDACTED}' python"),
    ("not a secret", "export MONKEY=banana", "export MONKEY=banana"),
    ("cli flag untouched", "python run.py --api_key=abc", "python run.py --api_key=abc"),
    ("text without assignments", "python run.py", "python run.py"),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_redact_text(text, expected):
    assert redact_text(text) == expected


def test_redacted_driver_entrypoint_keeps_recipe_and_other_env():
    infra = {
        "kuberay": {"training": {"name": "t"}},
        "launch": {"entrypoint": "python run.py", "env": {"HF_TOKEN": "hf_abc'\"$x", "MODEL": "qwen"}},
    }
    ep = recipe_mod.driver_entrypoint(infra, {"a": 1}, "rid")
    hidden = redact(ep)
    assert "hf_abc" not in hidden
    assert f"export HF_TOKEN='{REDACTED}'" in hidden
    assert "export MODEL=qwen" in hidden
    assert recipe_mod.decode_recipe(hidden) == {"a": 1}
