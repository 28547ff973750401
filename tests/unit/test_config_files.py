"""YAML file reading, `defaults:` inheritance chains and deep merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config import load_yaml_file
from nrl_k8s.config.files import block_layers, deep_merge, file_layers, load_mapping, merge_layers
from nrl_k8s.errors import ConfigError


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: 1\nb: [x, y]\n", {"a": 1, "b": ["x", "y"]}),
        ("- 1\n- 2\n", [1, 2]),
        ("", None),
    ],
    ids=["mapping", "list", "empty"],
)
def test_load_yaml_file_parses(tmp_path, text, expected):
    write(tmp_path, {"f.yaml": text})
    assert load_yaml_file(tmp_path / "f.yaml") == expected


@pytest.mark.parametrize(
    "files, name, message",
    [
        ({}, "missing.yaml", "missing.yaml: file not found"),
        ({"d/x.yaml": "a: 1"}, "d", "is a directory"),
        (
            {"bad.yaml": "a: 1\nb: [1, 2\nc: 3\n"},
            "bad.yaml",
            "bad.yaml:3: b: invalid YAML: did not find expected ',' or ']'",
        ),
        ({"tab.yaml": "a:\n  b: 1\n c: 2\n"}, "tab.yaml", "tab.yaml:3: "),
        ({"colon.yaml": "x: 1\na: b: c\n"}, "colon.yaml", "colon.yaml:2: invalid YAML: mapping values are not allowed"),
    ],
    ids=["missing", "directory", "unclosed-flow-list", "bad-indent", "nested-colon"],
)
def test_load_yaml_file_errors(tmp_path, files, name, message):
    write(tmp_path, files)
    with pytest.raises(ConfigError) as err:
        load_yaml_file(tmp_path / name)
    assert message in err.value.message
    assert "\n" not in err.value.message
    assert err.value.hint


@pytest.mark.parametrize(
    "text, expected",
    [("a: 1\n", {"a": 1}), ("", {}), ("# only a comment\n", {})],
    ids=["mapping", "empty-file", "comment-only"],
)
def test_load_mapping_accepts(tmp_path, text, expected):
    write(tmp_path, {"f.yaml": text})
    assert load_mapping(tmp_path / "f.yaml") == expected


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"], ids=["list", "string", "number"])
def test_load_mapping_rejects_non_mapping_top_level(tmp_path, text):
    write(tmp_path, {"f.yaml": text})
    with pytest.raises(ConfigError, match=r"f\.yaml: top level must be a mapping"):
        load_mapping(tmp_path / "f.yaml")


@pytest.mark.parametrize(
    "base, top, expected",
    [
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3, "z": 4}}, {"a": {"x": 1, "y": 3, "z": 4}}),
        ({"a": [1, 2, 3]}, {"a": [9]}, {"a": [9]}),
        ({"a": 1}, {"a": "s"}, {"a": "s"}),
        ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
        ({"a": 5}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({"a": 1}, {"a": None}, {"a": None}),
    ],
    ids=[
        "dicts-merge",
        "lists-replace",
        "scalars-replace",
        "scalar-replaces-dict",
        "dict-replaces-scalar",
        "null-replaces",
    ],
)
def test_deep_merge(base, top, expected):
    base_before, top_before = repr(base), repr(top)
    assert deep_merge(base, top) == expected
    assert (repr(base), repr(top)) == (base_before, top_before)


@pytest.mark.parametrize(
    "files, expected_order, expected_merged",
    [
        ({"r.yaml": "a: 1\n"}, ["r.yaml"], {"a": 1}),
        (
            {"p.yaml": "a: 1\nb: {x: 1}\n", "r.yaml": "defaults: p.yaml\nb: {y: 2}\n"},
            ["p.yaml", "r.yaml"],
            {"a": 1, "b": {"x": 1, "y": 2}},
        ),
        (
            {
                "g.yaml": "a: g\nb: g\nc: g\n",
                "p.yaml": "defaults: g.yaml\nb: p\nc: p\n",
                "r.yaml": "defaults: p.yaml\nc: r\n",
            },
            ["g.yaml", "p.yaml", "r.yaml"],
            {"a": "g", "b": "p", "c": "r"},
        ),
        (
            {"p1.yaml": "a: 1\nb: 1\n", "p2.yaml": "b: 2\n", "r.yaml": "defaults: [p1.yaml, p2.yaml]\n"},
            ["p1.yaml", "p2.yaml", "r.yaml"],
            {"a": 1, "b": 2},
        ),
        (
            {
                "sub/p.yaml": "defaults: ../base/g.yaml\nb: p\n",
                "base/g.yaml": "a: g\n",
                "r.yaml": "defaults: sub/p.yaml\n",
            },
            ["base/g.yaml", "sub/p.yaml", "r.yaml"],
            {"a": "g", "b": "p"},
        ),
        ({"r.yaml": "defaults: []\na: 1\n"}, ["r.yaml"], {"a": 1}),
        (
            {
                "d.yaml": "a: d\n",
                "l.yaml": "defaults: d.yaml\n",
                "m.yaml": "defaults: d.yaml\n",
                "r.yaml": "defaults: [l.yaml, m.yaml]\n",
            },
            ["d.yaml", "l.yaml", "d.yaml", "m.yaml", "r.yaml"],
            {"a": "d"},
        ),
    ],
    ids=[
        "no-defaults",
        "one-parent",
        "chain",
        "list-of-parents",
        "relative-to-declaring-file",
        "empty-list",
        "diamond-is-not-a-cycle",
    ],
)
def test_defaults_chains(tmp_path, files, expected_order, expected_merged):
    write(tmp_path, files)
    layers = file_layers(tmp_path / "r.yaml")
    assert [p.relative_to(tmp_path.resolve()).as_posix() for p, _ in layers] == expected_order
    assert merge_layers(layers) == expected_merged


@pytest.mark.parametrize(
    "files, message",
    [
        ({"r.yaml": "defaults: r.yaml\n"}, r"defaults cycle: .*r\.yaml -> .*r\.yaml$"),
        (
            {"a.yaml": "defaults: b.yaml\n", "b.yaml": "defaults: a.yaml\n", "r.yaml": "defaults: a.yaml\n"},
            r"defaults cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml$",
        ),
        ({"r.yaml": "defaults: nope.yaml\n"}, r"r\.yaml: defaults: parent 'nope.yaml' not found"),
        (
            {"p.yaml": "defaults: sub/missing.yaml\n", "r.yaml": "defaults: p.yaml\n"},
            r"p\.yaml: defaults: parent 'sub/missing.yaml' not found",
        ),
        ({"r.yaml": "defaults: {a: 1}\n"}, r"r\.yaml: defaults: expected a path or a list of paths"),
        ({"r.yaml": "defaults: [1]\n"}, r"r\.yaml: defaults: expected a path or a list of paths"),
        ({"p.yaml": "- x\n", "r.yaml": "defaults: p.yaml\n"}, r"p\.yaml: top level must be a mapping"),
    ],
    ids=[
        "self-cycle",
        "two-file-cycle",
        "missing-parent",
        "missing-grandparent-names-parent",
        "mapping-not-path",
        "number-not-path",
        "parent-not-mapping",
    ],
)
def test_defaults_errors(tmp_path, files, message):
    write(tmp_path, files)
    with pytest.raises(ConfigError, match=message):
        file_layers(tmp_path / "r.yaml")


def test_block_layers_resolve_parents_relative_to_declaring_file(tmp_path):
    write(tmp_path, {"infra/base.yaml": "image: base\nlabels: {a: '1'}\n"})
    layers = block_layers({"defaults": "infra/base.yaml", "labels": {"b": "2"}}, tmp_path / "recipe.yaml", "infra")
    assert [p.name for p, _ in layers] == ["base.yaml", "recipe.yaml"]
    assert merge_layers(layers) == {"image": "base", "labels": {"a": "1", "b": "2"}}


def test_block_layers_reject_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match=r"recipe\.yaml: 'infra' must be a mapping"):
        block_layers(["x"], tmp_path / "recipe.yaml", "infra")
