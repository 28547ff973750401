"""Tiny local models that stand for a Hugging Face model id: written once, never downloaded.

Dynamo's mocker reads a model folder's ``config.json`` (layers, heads, sizes, dtype) to size its
simulated KV cache, and the frontend serves the tokenizer the worker publishes (its model card:
``tokenizer.json``, ``tokenizer_config.json`` with a chat template, ``generation_config.json``,
``special_tokens_map.json``). This writes all of that for a model id under the user cache, with a
word-level vocabulary of ``VOCAB`` words (``w0`` ... ``w31999``) so every token id the mocker emits
decodes to text. Written in a temporary folder and renamed into place, so readers never see half
of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

VOCAB = 32000
SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


def folder_for(cache: Path, model_id: str) -> Path:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:60]
    return cache / f"{readable}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def files(model_id: str) -> dict[str, dict]:
    """The model folder's files, by name."""
    vocab = {token: index for index, token in enumerate(SPECIALS)}
    vocab.update({f"w{index}": index for index in range(len(SPECIALS), VOCAB)})
    special = [{"id": index, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for index, token in enumerate(SPECIALS)]
    return {
        "config.json": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": model_id,
                        "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
                        "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "bos_token_id": 1,
                        "eos_token_id": 2},
        "tokenizer.json": {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
                           "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
                           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
                           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}},
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                                  "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 8192,
                                  "chat_template": CHAT_TEMPLATE},
        "special_tokens_map.json": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        "generation_config.json": {"bos_token_id": 1, "eos_token_id": 2},
    }


def ensure(cache: Path, model_id: str) -> Path:
    """The tiny model folder for ``model_id``, written now if it is not there."""
    folder = folder_for(cache, model_id)
    if (folder / "config.json").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f".{folder.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name, content in files(model_id).items():
        (partial / name).write_text(json.dumps(content))
    try:
        partial.rename(folder)
    except OSError:  # another process wrote it first
        shutil.rmtree(partial, ignore_errors=True)
    return folder
