"""What a DGD pod's command runs in the sandbox (no cluster, no Dynamo): the pure reading of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nrl_k8s_sandbox.dynamo_runtime import engines, model, venv
from nrl_k8s_sandbox.dynamo_runtime.engines import NotDynamo, launch

PORTS = {8000: 41000, 9090: 41001}


def _launch(command, args, env=None):
    return launch(command, args, env or {}, lambda port: PORTS.get(port, 42000 + port),
                  lambda model_id: Path("/models") / model_id.replace("/", "_"))


@pytest.mark.parametrize("command, args, expected", [
    (["python3", "-m", "dynamo.frontend"], ["--http-port", "8000", "--router-mode", "kv"],
     ["-m", "dynamo.frontend", "--router-mode", "kv", "--http-host", "127.0.0.1", "--http-port", "41000"]),
    (["python3", "-m", "dynamo.frontend"], [],
     ["-m", "dynamo.frontend", "--http-host", "127.0.0.1", "--http-port", "41000"]),
    (["/bin/sh", "-c"], ["python3 -m dynamo.frontend --http-port=8000 2>&1 | tee /tmp/frontend.log"],
     ["-m", "dynamo.frontend", "--http-host", "127.0.0.1", "--http-port", "41000"]),
    (["sh", "-c", "cd /workspace && exec python3 -m dynamo.frontend --router-mode kv > /tmp/f.log 2>&1"], [],
     ["-m", "dynamo.frontend", "--router-mode", "kv", "--http-host", "127.0.0.1", "--http-port", "41000"]),
])
def test_the_frontend_runs_as_written_on_its_loopback_port(command, args, expected):
    found = _launch(command, args)
    assert (found.argv, found.runs, found.http_port) == (expected, "dynamo.frontend", 8000)


@pytest.mark.parametrize("engine, args, env, world, rl, disagg", [
    ("dynamo.vllm", ["--model", "Qwen/Qwen3-0.6B"], {}, 1, False, None),
    ("dynamo.vllm", ["--model", "Qwen/Qwen3-30B", "--tensor-parallel-size", "2", "--is-prefill-worker"], {}, 2,
     False, "prefill"),
    ("dynamo.vllm", ["--model=Qwen/Qwen3-30B", "-tp", "4", "-pp", "2", "--enable-rl",
                     "--weight-transfer-config", '{"backend":"nccl"}'], {}, 8, True, None),
    ("dynamo.vllm", ["--model", "m"], {"DYN_ENABLE_RL": "true"}, 1, True, None),
    ("dynamo.sglang", ["--model-path", "m", "--tp-size", "2", "--disaggregation-mode", "decode"], {}, 2, False,
     "decode"),
    ("dynamo.trtllm", ["--model-path", "m", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2"], {}, 8,
     False, None),
])
def test_gpu_engines_run_the_mocker_with_what_they_share(engine, args, env, world, rl, disagg):
    found = _launch(["python3", "-m", engine], args, env)
    assert (found.module, found.runs, found.world_size, found.rl) == (engine, "dynamo.mocker", world, rl)
    ours, mocker = found.argv[1:found.argv.index("--")], found.argv[found.argv.index("--") + 1:]
    assert found.argv[0] == str(engines.WORKER)
    assert ours == ["--world-size", str(world), *(["--enable-rl"] if rl else [])]
    name = "Qwen/Qwen3-30B" if "30B" in " ".join(args) else args[1] if args[1] != "m" else "m"
    assert mocker[:4] == ["--model-path", f"/models/{name.replace('/', '_')}", "--model-name", name]
    assert mocker[4:] == (["--disaggregation-mode", disagg] if disagg else [])
    assert engine in found.description and "dynamo.mocker" in found.description


def test_the_served_model_name_is_what_the_mocker_serves():
    found = _launch(["python3", "-m", "dynamo.vllm"], ["--model", "Qwen/Qwen3-0.6B", "--served-model-name", "qwen"])
    assert found.model == "qwen" and found.argv[-2:] == ["--model-name", "qwen"]


def test_the_mocker_runs_as_written_with_a_tiny_model_for_a_hub_id():
    found = _launch(["python3", "-m", "dynamo.mocker"], ["--model-path", "Qwen/Qwen3-0.6B", "--speedup-ratio", "2"])
    assert found.argv == ["-m", "dynamo.mocker", "--speedup-ratio", "2", "--model-path", "/models/Qwen_Qwen3-0.6B",
                          "--model-name", "Qwen/Qwen3-0.6B"]


@pytest.mark.parametrize("command, args, says", [
    (["python3", "server.py"], [], "is not 'python3 -m dynamo.<module> ...'"),
    (["/bin/sh", "-c"], ["echo hi && sleep 1"], "no 'python3 -m dynamo.<module>' command"),
    (["python3", "-m", "dynamo.planner"], [], "the sandbox runs dynamo.frontend"),
    (["python3", "-m", "dynamo.vllm"], ["--tensor-parallel-size", "2"], "names no model"),
    (["python3", "-m", "dynamo.vllm"], ["--model", "m", "-tp", "two"], "is not a whole number"),
])
def test_what_is_not_a_dynamo_process(command, args, says):
    with pytest.raises(NotDynamo, match=".*" + says.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        _launch(command, args)


def test_a_tiny_model_covers_the_mockers_token_ids(tmp_path):
    folder = model.ensure(tmp_path, "Qwen/Qwen3-0.6B")
    assert model.ensure(tmp_path, "Qwen/Qwen3-0.6B") == folder  # written once
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(model.VOCAB))
    assert json.loads((folder / "config.json").read_text())["vocab_size"] == model.VOCAB
    assert "chat_template" in json.loads((folder / "tokenizer_config.json").read_text())
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # nothing partial left


def test_the_runtime_venv_of_another_interpreter_is_another_folder(monkeypatch):
    """A venv runs on the interpreter it was made from: making .venv from another one (the Makefile
    prefers Debian's python3.11) must not reuse a Dynamo venv whose interpreter may be gone."""
    monkeypatch.delenv(venv.ENV_ROOT, raising=False)
    here = venv.root()
    monkeypatch.setattr("sys.base_prefix", "/opt/another-python")
    assert venv.root().parent == here.parent and venv.root() != here
