"""The one redaction rule: secret names, object walks and value shapes in text."""

from __future__ import annotations

import copy

import pytest

from nrl_k8s import redact as redact_module
from nrl_k8s.redact import REDACTED, LineRedactor, is_secret, redact, redact_lines, redact_text

R = REDACTED

NAMES = [
    ("HF_TOKEN", True),
    ("hf_token", True),
    ("TOKEN", True),
    ("hfToken", True),
    ("WANDB_API_KEY", True),
    ("wandbApiKey", True),
    ("APIKey", True),
    ("NGC_APIKEY", True),
    ("api.key", True),
    ("AWS_SECRET_ACCESS_KEY", True),
    ("OAUTH_CLIENT_SECRET", True),
    ("CLIENTSECRET", True),
    ("DB_PASSWORD", True),
    ("PGPASSWORD", True),
    ("MYSQL_PWD", True),
    ("SMTP_PASS", True),
    ("SSH_PASSPHRASE", True),
    ("GIT_CREDENTIALS", True),
    ("GITHUB_PAT", True),
    ("MyPAT", True),
    ("ACCESSTOKEN", True),
    ("GITLAB_ACCESSTOKEN", True),
    ("BEARER", True),
    ("BEARER_TOKEN", True),
    ("SESSION_COOKIE", True),
    ("authCookie", True),
    ("Authorization", True),
    ("JWT", True),
    ("PRIVATE_KEY_PATH", True),
    ("--hf-token", True),
    ("MONKEY", False),
    ("KEYBOARD", False),
    ("KEYBOARD_LAYOUT", False),
    ("TOKENIZERS_PARALLELISM", False),
    ("max_new_tokens", False),
    ("NCCL_IB_DISABLE", False),
    ("PASSENGER", False),
    ("AUTHOR", False),
    ("HF_HOME", False),
    ("PATH", False),
    ("PATCH", False),
    ("key", False),
    ("secretName", False),
    ("envFromSecret", False),
    ("pad_token_id", False),
    ("eos_token", False),
    ("sessionAffinity", False),
    ("--tokenizer", False),
]


@pytest.mark.parametrize("name, secret", NAMES, ids=[n for n, _ in NAMES])
def test_secret_names(name, secret):
    assert is_secret(name) is secret


OBJECT_CASES = [
    (
        "env mapping",
        {"launch": {"env": {"HF_TOKEN": "abc", "MODEL": "qwen"}}},
        {"launch": {"env": {"HF_TOKEN": R, "MODEL": "qwen"}}},
    ),
    (
        "camelCase env names",
        {"env": {"hfToken": "a", "wandbApiKey": "b", "ACCESSTOKEN": "c", "GITHUB_PAT": "d", "plain": "e"}},
        {"env": {"hfToken": R, "wandbApiKey": R, "ACCESSTOKEN": R, "GITHUB_PAT": R, "plain": "e"}},
    ),
    (
        "numbers and booleans in env",
        {"env": {"PIN_PASSWORD": 1234, "AUTH_ENABLED": True, "N": 3}},
        {"env": {"PIN_PASSWORD": R, "AUTH_ENABLED": R, "N": 3}},
    ),
    (
        "extra_env mapping",
        {"networking": {"extra_env": {"WANDB_API_KEY": "k", "NCCL_DEBUG": "INFO"}}},
        {"networking": {"extra_env": {"WANDB_API_KEY": R, "NCCL_DEBUG": "INFO"}}},
    ),
    (
        "k8s env list",
        {"containers": [{"name": "c", "env": [{"name": "HF_TOKEN", "value": "abc"}, {"name": "A", "value": "1"}]}]},
        {"containers": [{"name": "c", "env": [{"name": "HF_TOKEN", "value": R}, {"name": "A", "value": "1"}]}]},
    ),
    (
        "dynamo envs list",
        {"spec": {"envs": [{"name": "NGC_API_KEY", "value": "n"}]}},
        {"spec": {"envs": [{"name": "NGC_API_KEY", "value": R}]}},
    ),
    (
        "password in a URL under a plain name",
        {"env": {"DATABASE_URL": "postgres://u:pw@db:5432/x"}},
        {"env": {"DATABASE_URL": f"postgres://u:{R}@db:5432/x"}},
    ),
    (
        "valueFrom references untouched",
        {"env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]},
        {"env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]},
    ),
    (
        "Secret data and stringData",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "run"},
            "data": {"recipe.yaml": "YTogMQ==", "EMPTY": ""},
            "stringData": {"MODEL": "qwen"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "run"},
            "data": {"recipe.yaml": R, "EMPTY": ""},
            "stringData": {"MODEL": R},
        },
    ),
    (
        "secret-looking keys anywhere (recipe)",
        {"logger": {"wandb": {"api_key": "k", "hfToken": "t", "project": "p"}}, "db": {"password": 1234}},
        {"logger": {"wandb": {"api_key": R, "hfToken": R, "project": "p"}}, "db": {"password": R}},
    ),
    (
        "Kubernetes fields that name a secret untouched",
        {
            "imagePullSecrets": [{"name": "ngc"}],
            "volume": {"secret": {"secretName": "creds", "items": [{"key": "k", "path": "p"}]}},
            "tolerations": [{"key": "nvidia.com/gpu"}],
            "automountServiceAccountToken": False,
            "envFromSecret": "hf-secret",
        },
        {
            "imagePullSecrets": [{"name": "ngc"}],
            "volume": {"secret": {"secretName": "creds", "items": [{"key": "k", "path": "p"}]}},
            "tolerations": [{"key": "nvidia.com/gpu"}],
            "automountServiceAccountToken": False,
            "envFromSecret": "hf-secret",
        },
    ),
    (
        "argument after a secret flag in a list",
        {"args": ["--hf-token", "abc", "--model", "qwen", "--api-key", "$KEY"]},
        {"args": ["--hf-token", R, "--model", "qwen", "--api-key", "$KEY"]},
    ),
    ("empty value stays empty", {"env": {"HF_TOKEN": ""}}, {"env": {"HF_TOKEN": ""}}),
    (
        "entrypoint strings",
        {"spec": {"entrypoint": "export HF_TOKEN='abc'\nexport MODEL=qwen\npython run.py --password=pw"}},
        {"spec": {"entrypoint": f"export HF_TOKEN='{R}'\nexport MODEL=qwen\npython run.py --password={R}"}},
    ),
    ("scalars pass through", {"a": 1, "b": None, "c": [True, 2.5]}, {"a": 1, "b": None, "c": [True, 2.5]}),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in OBJECT_CASES], ids=[c[0] for c in OBJECT_CASES])
def test_redact_objects(obj, expected):
    before = copy.deepcopy(obj)
    assert redact(obj) == expected
    assert obj == before


TEXT_CASES = [
    ("export quoted", "export HF_TOKEN='a b'", f"export HF_TOKEN='{R}'"),
    ("export bare", "export HF_TOKEN=abc", f"export HF_TOKEN={R}"),
    ("export with embedded quote", "export DB_PASSWORD='it'\"'\"'s'; echo", f"export DB_PASSWORD='{R}'; echo"),
    ("double quoted", 'WANDB_API_KEY="x y" python run.py', f'WANDB_API_KEY="{R}" python run.py'),
    ("several on one line", "export A=1 HF_TOKEN=2 B=3", f"export A=1 HF_TOKEN={R} B=3"),
    ("after a separator", "cd /x && HF_TOKEN=z python", f"cd /x && HF_TOKEN={R} python"),
    ("camelCase assignment", "hfToken=abc wandbApiKey=def", f"hfToken={R} wandbApiKey={R}"),
    ("*_PAT", "GITHUB_PAT=ghp_123", f"GITHUB_PAT={R}"),
    ("ACCESSTOKEN", "ACCESSTOKEN=x1", f"ACCESSTOKEN={R}"),
    ("BEARER name", "BEARER=x1", f"BEARER={R}"),
    ("*_COOKIE", "SESSION_COOKIE=abc", f"SESSION_COOKIE={R}"),
    (
        "override echoed in an error",
        "override 'infra.launch.env.HF_TOKEN=[abc': value is not valid YAML",
        f"override 'infra.launch.env.HF_TOKEN={R}': value is not valid YAML",
    ),
    ("recipe override", "logger.wandb.api_key=k123", f"logger.wandb.api_key={R}"),
    ("not a secret", "export MONKEY=banana PATH=/usr/bin", "export MONKEY=banana PATH=/usr/bin"),
    ("tokenizers env", "TOKENIZERS_PARALLELISM=false", "TOKENIZERS_PARALLELISM=false"),
    ("URL password", "postgres://u:pw@h", f"postgres://u:{R}@h"),
    (
        "URL password with port and path",
        "connect mysql://root:s3cr3t@db:3306/x now",
        f"connect mysql://root:{R}@db:3306/x now",
    ),
    (
        "URL user info without a password (a token as the user)",
        "https://ghp_abc@example.com:8443/x",
        f"https://{R}@example.com:8443/x",
    ),
    ("URL query token", "https://h/api?access_token=abc&page=2", f"https://h/api?access_token={R}&page=2"),
    ("--flag value", "python run.py --hf-token X --model q", f"python run.py --hf-token {R} --model q"),
    ("--flag=value", "python run.py --password=X", f"python run.py --password={R}"),
    ("--api-key value", "--api-key 'a b'", f"--api-key '{R}'"),
    ("--api_key=value", "python run.py --api_key=abc", f"python run.py --api_key={R}"),
    ("secret flag without value", "run --use-auth --verbose", "run --use-auth --verbose"),
    ("plain flag", "run --tokenizer qwen --max-new-tokens 5", "run --tokenizer qwen --max-new-tokens 5"),
    (
        "variable reference kept",
        'run --hf-token "$HF_TOKEN" HF_TOKEN=${env:HF_TOKEN}',
        'run --hf-token "$HF_TOKEN" HF_TOKEN=${env:HF_TOKEN}',
    ),
    ("Authorization Bearer", "curl -H 'Authorization: Bearer abc.def'", f"curl -H 'Authorization: Bearer {R}'"),
    ("Authorization Basic", "Authorization: Basic dXNlcjpwdw==", f"Authorization: Basic {R}"),
    ("bare Bearer", "sent bearer abc123 to the API", f"sent bearer {R} to the API"),
    ("JSON field", '{"hf_token": "abc", "n": 1}', f'{{"hf_token": "{R}", "n": 1}}'),
    ("Python repr", "got {'HF_TOKEN': 'abc', 'MODEL': 'q'}", f"got {{'HF_TOKEN': '{R}', 'MODEL': 'q'}}"),
    ("YAML quoted value", 'e.g. HF_TOKEN: "12345"', f'e.g. HF_TOKEN: "{R}"'),
    ("number field", '"password": 1234', f'"password": {R}'),
    (
        "quoted key then prose",
        "infra key 'launch.env.HF_TOKEN': expected a string",
        "infra key 'launch.env.HF_TOKEN': expected a string",
    ),
    ("text without secrets", "python run.py --config $NRL_K8S_RECIPE", "python run.py --config $NRL_K8S_RECIPE"),
    # issue 30: an entrypoint keeps its rest; the value of an assignment inside quotes ends with them
    (
        "assignment of a variable inside quotes",
        'echo "X_TOKEN=$X_TOKEN" && echo "ok"',
        'echo "X_TOKEN=$X_TOKEN" && echo "ok"',
    ),
    (
        "assignment of a value inside quotes",
        'echo "X_TOKEN=abc def" && echo "ok"',
        f'echo "X_TOKEN={R}" && echo "ok"',
    ),
    ("Kubernetes $(VAR) in args", "serve --token $(HF_TOKEN) --port 80", "serve --token $(HF_TOKEN) --port 80"),
    ("command substitution", "HF_TOKEN=$(cat /run/tok) python", "HF_TOKEN=$(cat /run/tok) python"),
    # issue 30: unquoted YAML
    ("unquoted YAML", "api_key: X", f"api_key: {R}"),
    ("unquoted YAML in a log line", "wandb: api_key: k-123abc", f"wandb: api_key: {R}"),
    ("unquoted YAML, a comment after", "password: hunter22  # ops", f"password: {R}  # ops"),
    (
        "YAML flow mapping",
        "+infra.launch.env={HF_TOKEN: hf_Sup3rSecret, X: [1]}",
        f"+infra.launch.env={{HF_TOKEN: {R}, X: [1]}}",
    ),
    ("YAML flow mapping, last", "{MODEL: q, HF_TOKEN: abc}", f"{{MODEL: q, HF_TOKEN: {R}}}"),
    (
        "key then prose is not a value",
        "infra.yaml:6: launch.env.HF_TOKEN: expected a string, got list",
        "infra.yaml:6: launch.env.HF_TOKEN: expected a string, got list",
    ),
    ("YAML block scalar start", "token: |", "token: |"),
    # issue 30: bare values whose shape says they are credentials
    ("bare Hugging Face token", "login with hf_" + "aB3" * 12 + " ok", f"login with {R} ok"),
    ("bare GitHub token", "cloned with ghp_" + "x1Y2" * 9 + ".", f"cloned with {R}."),
    ("bare AWS key id", "key AKIAIOSFODNN7EXAMPLE used", f"key {R} used"),
    ("bare NGC key", "nvapi-" + "Ab9_" * 10, R),
    ("short prefixes are words", "hf_cache hf_transfer sk-learn task-1", "hf_cache hf_transfer sk-learn task-1"),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_redact_text(text, expected):
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent


def test_redact_lines_finds_a_value_split_across_chunks():
    chunks = ["step 1\nexport HF_TO", "KEN=hf_s3", "cr3t\nstep", " 2\r", "last HF_TOKEN=x"]
    out = "".join(redact_lines(chunks))
    assert out == f"step 1\nexport HF_TOKEN={R}\nstep 2\rlast HF_TOKEN={R}"


def test_line_redactor_holds_a_partial_line_until_it_ends():
    redactor = LineRedactor()
    assert redactor.feed("step 1\nWANDB_API") == "step 1\n"
    assert redactor.feed("_KEY=abc") == ""
    assert redactor.feed(" ok\nnext") == f"WANDB_API_KEY={R} ok\n"
    assert redactor.flush() == "next" and redactor.flush() == ""


def test_line_redactor_lets_an_endless_line_through_in_parts():
    redactor = LineRedactor(max_line=10)
    assert redactor.feed("x" * 6) == ""
    assert redactor.feed("y" * 6) == "x" * 6 + "y" * 6


def test_a_remembered_secret_value_is_hidden_whatever_the_line_looks_like(monkeypatch):
    monkeypatch.setattr(redact_module, "_KNOWN", set())
    redact_module.remember([{"launch": {"env": {"HF_TOKEN": "SEC-HF-06", "HF_HOME": "/cache"}},
                             "networking": {"extra_env": {"WANDB_API_KEY": "wk-1234"}}},
                            {"policy": {"password": "SEC-RPW-26", "hfToken": "SEC-HFCAMEL-07", "steps": 3},
                             "env": [{"name": "API_TOKEN", "value": "tok-5678"}]}])
    line = "echo SEC-HF-06; hf=SEC-HFCAMEL-07 pw SEC-RPW-26 wk-1234 tok-5678 cache /cache steps 3"
    assert redact_text(line) == f"echo {R}; hf={R} pw {R} {R} {R} cache /cache steps 3"


def test_each_line_of_a_remembered_multi_line_value_is_hidden(monkeypatch):
    monkeypatch.setattr(redact_module, "_KNOWN", set())
    key = "-----BEGIN KEY-----\nAAAAB3NzaC1yc2EAAAADAQAB\nQZr8uyWbs7NLq0Ck\n-----END KEY-----"
    redact_module.remember_values([key, "ab", None])
    assert redact_text("got QZr8uyWbs7NLq0Ck here") == f"got {R} here"
    assert redact_text(key) == R and redact_text("ab") == "ab"  # too short to hide


DIGEST_CASES = [
    ("a bare word", "echo Pl4nt-0001", f"echo {R}"),
    ("a word at a sentence end", "token is Pl4nt-0001.", f"token is {R}."),
    ("an assignment", "X=Pl4nt-0001 y", f"X={R} y"),
    ("JSON", '{"k":"Pl4nt-0001"}', f'{{"k":"{R}"}}'),
    ("user info", "https://u:Pl4nt-0001@h/x", f"https://u:{R}@h/x"),
    ("inside a longer word it is another word", "xPl4nt-0001", "xPl4nt-0001"),
    ("other words", "Pl4nt-0002 and Pl4nt", "Pl4nt-0002 and Pl4nt"),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in DIGEST_CASES], ids=[c[0] for c in DIGEST_CASES])
def test_a_value_a_run_record_keeps_only_as_a_salted_digest_is_hidden(monkeypatch, text, expected):
    monkeypatch.setattr(redact_module, "_KNOWN", {"Pl4nt-0001"})
    monkeypatch.setattr(redact_module, "_DIGESTS", {})
    kept = redact_module.digests()
    assert "Pl4nt-0001" not in repr(kept) and redact_module.digests()["salt"] != kept["salt"]
    redact_module._KNOWN.clear()  # a later process: the record's digests only
    redact_module.remember_digests(kept)
    assert redact_text(text) == expected
