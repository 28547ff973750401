"""Hydra-style overrides: parsing, routing to recipe/infra, applying, and every bad form."""

from __future__ import annotations

import pytest

from nrl_k8s.config.overrides import apply_overrides, parse_override, split_overrides
from nrl_k8s.errors import ConfigError

BASE = {
    "policy": {"lr": 1.0, "name": "m", "layers": [10, 20, 30], "opt": {"beta": 0.9}},
    "grpo": {"steps": 5},
}


@pytest.mark.parametrize(
    "token, op, path, value, infra",
    [
        ("a.b=1", "set", ("a", "b"), 1, False),
        ("a=hello", "set", ("a",), "hello", False),
        ("a.b=[1, 2]", "set", ("a", "b"), [1, 2], False),
        ("a.b={x: 1}", "set", ("a", "b"), {"x": 1}, False),
        ("a.b=true", "set", ("a", "b"), True, False),
        ("a.b=null", "set", ("a", "b"), None, False),
        ("a.b=", "set", ("a", "b"), "", False),
        ("a.b='1'", "set", ("a", "b"), "1", False),
        ("a.b=x=y", "set", ("a", "b"), "x=y", False),
        ("a.url=http://h:8000/v1", "set", ("a", "url"), "http://h:8000/v1", False),
        ("+a.b=2", "add", ("a", "b"), 2, False),
        ("++a.b=3", "force", ("a", "b"), 3, False),
        ("~a.b", "delete", ("a", "b"), None, False),
        ("infra.image=img:1", "set", ("image",), "img:1", True),
        ("+infra.launch.env.X=1", "add", ("launch", "env", "X"), 1, True),
        ("++infra.labels.team=rl", "force", ("labels", "team"), "rl", True),
        ("~infra.scheduler.queue", "delete", ("scheduler", "queue"), None, True),
        ("infrastructure.x=1", "set", ("infrastructure", "x"), 1, False),
        ("a.b=${oc.env:X}", "set", ("a", "b"), "${oc.env:X}", False),
    ],
    ids=[
        "set-int", "set-top-level", "set-list", "set-dict", "set-bool", "set-null", "set-empty-string",
        "set-quoted-string", "value-with-equals", "value-with-colons", "add", "force", "delete",
        "infra-set", "infra-add", "infra-force", "infra-delete", "infra-prefix-needs-dot", "recipe-interpolation-kept",
    ],
)
def test_parse_override(token, op, path, value, infra):
    o = parse_override(token)
    assert (o.op, o.path, o.value, o.infra, o.token) == (op, path, value, infra, token)


@pytest.mark.parametrize(
    "token, message",
    [
        ("a.b", "missing '=VALUE'"),
        ("+a.b", "missing '=VALUE'"),
        ("++a.b", "missing '=VALUE'"),
        ("=1", "empty key"),
        ("+=1", "empty key"),
        ("~", "empty key"),
        ("~a.b=1", "'~' deletes a key and takes no value"),
        ("a..b=1", "malformed key 'a..b'"),
        ("a.=1", "malformed key 'a.'"),
        (".a=1", "malformed key '.a'"),
        ("a b=1", "malformed key 'a b'"),
        ("+++a=1", "malformed key '+a'"),
        ("~~a", "malformed key '~a'"),
        ("a.b=[1, 2", "override 'a.b=[1, 2': invalid YAML: did not find expected"),
        ("infra=1", "address a key under infra"),
        ("~infra", "address a key under infra"),
    ],
    ids=[
        "no-equals", "add-no-equals", "force-no-equals", "empty-key", "add-empty-key", "delete-empty-key",
        "delete-with-value", "double-dot", "trailing-dot", "leading-dot", "space-in-key", "triple-plus",
        "double-tilde", "bad-yaml-value", "whole-infra-set", "whole-infra-delete",
    ],
)
def test_parse_override_errors(token, message):
    with pytest.raises(ConfigError) as err:
        parse_override(token)
    assert f"override '{token}'" in err.value.message
    assert message in err.value.message
    assert err.value.hint


def test_split_overrides_routes_by_prefix_and_keeps_order():
    recipe, infra = split_overrides(["a=1", "infra.image=x", "+b=2", "~infra.labels.x", "infrastructure=3"])
    assert [o.token for o in recipe] == ["a=1", "+b=2", "infrastructure=3"]
    assert [o.token for o in infra] == ["infra.image=x", "~infra.labels.x"]


@pytest.mark.parametrize(
    "tokens, expected_changes",
    [
        (["policy.lr=0.5"], {("policy", "lr"): 0.5}),
        (["policy.opt={beta: 0.5}"], {("policy", "opt"): {"beta": 0.5}}),
        (["+policy.new=1"], {("policy", "new"): 1}),
        (["+fresh.deep.key=1"], {("fresh",): {"deep": {"key": 1}}}),
        (["++policy.lr=2"], {("policy", "lr"): 2}),
        (["++policy.other=2"], {("policy", "other"): 2}),
        (["++x.y=2"], {("x",): {"y": 2}}),
        (["~grpo.steps"], {("grpo",): {}}),
        (["~grpo"], {("grpo",): None}),
        (["policy.layers.1=99"], {("policy", "layers"): [10, 99, 30]}),
        (["+policy.layers.3=40"], {("policy", "layers"): [10, 20, 30, 40]}),
        (["++policy.layers.0=1"], {("policy", "layers"): [1, 20, 30]}),
        (["~policy.layers.0"], {("policy", "layers"): [20, 30]}),
        (["policy.lr=2", "policy.lr=3"], {("policy", "lr"): 3}),
        (["~policy.lr", "+policy.lr=7"], {("policy", "lr"): 7}),
    ],
    ids=[
        "set-existing", "set-replaces-dict", "add-new", "add-creates-parents", "force-existing", "force-new",
        "force-creates-parents", "delete-leaf", "delete-subtree", "set-list-index", "add-appends-to-list",
        "force-list-index", "delete-list-index", "later-wins", "delete-then-add",
    ],
)
def test_apply_overrides(tokens, expected_changes):
    result = apply_overrides(BASE, [parse_override(t) for t in tokens])
    for path, value in expected_changes.items():
        node = result
        for part in path[:-1]:
            node = node[part]
        if value is None:
            assert path[-1] not in node
        else:
            assert node[path[-1]] == value
    assert BASE["policy"]["lr"] == 1.0 and BASE["policy"]["layers"] == [10, 20, 30], "input must not be modified"


@pytest.mark.parametrize(
    "token, message, hint",
    [
        ("policy.missing=1", "key 'policy.missing' not found", "use '+policy.missing=VALUE'"),
        ("nothere.x=1", "key 'nothere' not found", "use '+nothere.x=VALUE'"),
        ("+policy.lr=2", "key 'policy.lr' already exists", "++policy.lr=VALUE"),
        ("~policy.missing", "key 'policy.missing' not found", "nothing to delete"),
        ("~nothere.x", "key 'nothere' not found", "nothing to delete"),
        ("policy.lr.x=1", "'policy.lr' is a float, not a mapping or list", "parent key as a whole"),
        ("policy.layers.x=1", "'policy.layers' is a list; 'x' is not a list index", "use a number"),
        ("policy.layers.5=1", "key 'policy.layers.5' not found", "+policy.layers.5"),
        ("+policy.layers.5=1", "list index 5 out of range for 'policy.layers' (length 3)", "or 3 to append"),
        ("policy.layers.-1=1", "'-1' is not a list index", "use a number"),
    ],
    ids=[
        "set-missing-leaf", "set-missing-parent", "add-existing", "delete-missing", "delete-missing-parent",
        "descend-into-scalar", "non-numeric-list-index", "set-list-index-out-of-range",
        "add-list-index-past-end", "negative-list-index",
    ],
)
def test_apply_override_errors(token, message, hint):
    with pytest.raises(ConfigError) as err:
        apply_overrides(BASE, [parse_override(token)])
    assert err.value.message.startswith(f"override '{token}': ")
    assert message in err.value.message
    assert hint in err.value.hint


def test_infra_override_errors_show_the_key_as_written():
    with pytest.raises(ConfigError, match=r"key 'infra\.launch\.nope' not found") as err:
        apply_overrides({"launch": {}}, [parse_override("infra.launch.nope=1")])
    assert "+infra.launch.nope=VALUE" in err.value.hint
