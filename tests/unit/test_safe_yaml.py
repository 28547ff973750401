"""safe_yaml: what it still accepts, what it refuses, and how the one error line reads."""

from __future__ import annotations

import math
import os

import pytest

from nrl_k8s.config import safe_yaml
from nrl_k8s.errors import ConfigError

ACCEPTED = {
    "mapping and list": ("a: [1, {b: c}]\n", {"a": [1, {"b": "c"}]}),
    "merge key": (
        "base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  x: 3\n",
        {"base": {"x": 1, "y": 2}, "thing": {"x": 3, "y": 2}},
    ),
    "alias reuse": ("a: &a [1, 2]\nb: *a\n", {"a": [1, 2], "b": [1, 2]}),
    "dates stay strings": ("d: 2024-01-01\n", {"d": "2024-01-01"}),
    "64-bit integers": (f"big: {2**63 - 1}\nsmall: {-(2**63)}\n", {"big": 2**63 - 1, "small": -(2**63)}),
    "quoted number key": ('"1": one\n', {"1": "one"}),
    "non-ASCII text": ("name: héllo wörld\n", {"name": "héllo wörld"}),
    "empty document": ("", None),
    "comment only": ("# nothing\n", None),
}


@pytest.mark.parametrize("text, expected", ACCEPTED.values(), ids=ACCEPTED)
def test_accepts(text, expected):
    assert safe_yaml.parse(text, "f.yaml") == expected


def test_infinity_and_nan_as_written_are_kept():
    data = safe_yaml.parse("a: .inf\nb: .nan\n", "f.yaml")
    assert math.isinf(data["a"]) and math.isnan(data["b"])


REFUSED = {
    "duplicate key": ("a:\n  b: 1\n  b: 2\n", "f.yaml:3: a.b: duplicate key (first set on line 2)"),
    "integer key": ("x: 1\n1: one\n", "f.yaml:2: key 1 is an integer, not a string"),
    "boolean key": ("on: push\n", "f.yaml:1: key on is a boolean"),
    "list key": ("? [a]\n: 1\n", "f.yaml:1: a key is a list or mapping"),
    "NUL in a value": ("a:\n  b: x\x00y\n", "f.yaml:2: a.b: contains a NUL byte"),
    "NUL in a comment": ("a: 1 # \x00\n", "f.yaml:1: contains a NUL byte"),
    "control character": ("a: \x07\n", "f.yaml:1: a: contains the control character U+0007"),
    "integer over 64 bits": (f"n: {2**63}\n", "f.yaml:1: n: number 9223372036854775808 is out of range"),
    "400 digits": ("n: " + "9" * 400 + "\n", "(400 characters) is out of range"),
    "float overflow": ("n: 1.0e+400\n", "n: number 1.0e+400 is out of range"),
    "set tag": ("s: !!set {a, b}\n", "f.yaml:1: s: YAML tag !!set is not supported"),
    "binary tag": ("b: !!binary aGk=\n", "YAML tag !!binary is not supported"),
    "recursive alias": ("a: &a\n  b: *a\n", "f.yaml:2: a.b: alias *a refers to a value that contains it"),
    "undefined alias": ("a: *nope\n", "alias *nope has no anchor"),
    "deep nesting": (
        "a: " + "[" * 100 + "]" * 100,
        "f.yaml:1: a.0.0.0.<56 more>.0.0.0.0: nested more than 64 levels deep",
    ),
    "syntax error names the key": ("a:\n  b: [1, 2\n  c: 3\n", "f.yaml:3: a.b: invalid YAML"),
    "two documents": ("a: 1\n---\nb: 2\n", "f.yaml:2: expected one YAML document, found a second"),
}


@pytest.mark.parametrize("text, message", REFUSED.values(), ids=REFUSED)
def test_refuses_with_one_line(text, message):
    with pytest.raises(ConfigError) as err:
        safe_yaml.parse(text, "f.yaml")
    assert message in err.value.message
    assert "\n" not in err.value.message and err.value.hint


def test_alias_expansion_is_counted_while_parsing():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    with pytest.raises(ConfigError, match=r"more than 50000 values \(counting every alias expansion\)"):
        safe_yaml.parse("\n".join(lines), "bomb.yaml")


def test_documents_share_one_budget():
    assert safe_yaml.parse("a: 1\n---\nb: 2\n", "f.yaml", documents=True) == [{"a": 1}, {"b": 2}]


def test_override_values_have_no_line_numbers():
    with pytest.raises(ConfigError) as err:
        safe_yaml.parse("{a: 1, a: 2}", "override 'x={a: 1, a: 2}'", lines=False)
    assert err.value.message == "override 'x={a: 1, a: 2}': a: duplicate key (first set on line 1)"


FILES = {
    "directory": (lambda tmp: tmp, "is a directory"),
    "character device": (lambda tmp: "/dev/null", "/dev/null: is a character device"),
    "missing": (lambda tmp: tmp / "nope.yaml", "nope.yaml: file not found"),
    "too large": (lambda tmp: _sized(tmp, safe_yaml.MAX_BYTES + 1), "file is larger than 1024 KiB"),
    "not UTF-8": (lambda tmp: _bytes(tmp, b"a: 1\nb: \xff\n"), "bad.yaml:2: not UTF-8 text (byte 0xff)"),
}


def _sized(tmp, size):
    path = tmp / "big.yaml"
    with path.open("w") as handle:
        handle.truncate(size)
    return path


def _bytes(tmp, data):
    path = tmp / "bad.yaml"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("make, message", FILES.values(), ids=FILES)
def test_read_refuses_what_is_not_a_small_regular_file(tmp_path, make, message):
    with pytest.raises(ConfigError) as err:
        safe_yaml.load_file(make(tmp_path))
    assert message in err.value.message


def test_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")  # nothing ever writes: opening it for reading would block
    with pytest.raises(ConfigError, match="is a FIFO"):
        safe_yaml.load_file(tmp_path / "pipe.yaml")


def test_symlink_loop_is_named(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for call in (safe_yaml.resolve, safe_yaml.load_file):
        with pytest.raises(ConfigError, match="symlink loop"):
            call(tmp_path / "a")


def test_symlink_to_a_file_is_read(tmp_path):
    (tmp_path / "real.yaml").write_text("a: 1\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "real.yaml")
    assert safe_yaml.load_file(tmp_path / "link.yaml") == {"a": 1}
