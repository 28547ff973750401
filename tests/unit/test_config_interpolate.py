"""Infra interpolation: our forms, OmegaConf's (relative keys, oc.* resolvers, typed arguments,
escapes), the earlier launcher's resolvers, scratch keys, every error and every bound."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nrl_k8s.config.interpolate import interpolate, user_name
from nrl_k8s.config.provenance import Provenance
from nrl_k8s.errors import ConfigError

ENV = {"NRL_K8S_USER": "Jane_Doe.X", "HOME": "/home/j", "EMPTY": ""}
SOURCE = Path("/cfg/infra.yaml")


def run(infra: dict, env: dict = ENV) -> dict:
    provenance = Provenance()
    provenance.record(infra, SOURCE)
    return interpolate(infra, env, provenance)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"NRL_K8S_USER": "Jane_Doe.X", "USER": "other"}, "jane-doe-x"),
        ({"LOGNAME": "Bob.Smith", "USER": "other"}, "bob-smith"),
        ({"USER": "ALICE_1"}, "alice-1"),
        ({"USERNAME": "win.user"}, "win-user"),
    ],
    ids=["nrl-k8s-user-wins", "logname", "user", "username"],
)
def test_user_name(env, expected):
    assert user_name(env) == expected


def test_user_name_falls_back_to_the_password_database():
    import os
    import pwd

    expected = pwd.getpwuid(os.getuid()).pw_name.lower().replace("_", "-").replace(".", "-")
    assert user_name({}) == expected


@pytest.mark.parametrize(
    "infra, expected",
    [
        ({"namespace": "${user:}-ns"}, {"namespace": "jane-doe-x-ns"}),
        ({"a": "${user:}"}, {"a": "jane-doe-x"}),
        ({"a": "${env:HOME}/x"}, {"a": "/home/j/x"}),
        ({"a": "${env:EMPTY}"}, {"a": ""}),
        ({"a": "${env:NOPE,fallback}"}, {"a": "fallback"}),
        ({"a": "${env:NOPE,}"}, {"a": ""}),
        ({"a": "${env:HOME,fallback}"}, {"a": "/home/j"}),
        ({"a": "${env:NOPE,a,b}"}, {"a": "a,b"}),
        ({"image": "img", "b": "${image}"}, {"image": "img", "b": "img"}),
        ({"n": 5, "b": "${n}"}, {"n": 5, "b": 5}),
        ({"n": True, "b": "${n}"}, {"n": True, "b": True}),
        ({"m": {"x": [1]}, "b": "${m}"}, {"m": {"x": [1]}, "b": {"x": [1]}}),
        ({"n": 5, "b": "port-${n}"}, {"n": 5, "b": "port-5"}),
        ({"n": False, "b": "v=${n}"}, {"n": False, "b": "v=false"}),
        ({"a": {"b": {"c": "deep"}}, "r": "${a.b.c}"}, {"a": {"b": {"c": "deep"}}, "r": "deep"}),
        ({"l": ["x", "y"], "r": "${l.1}"}, {"l": ["x", "y"], "r": "y"}),
        ({"a": "${b}", "b": "${c}", "c": "${user:}"}, {"a": "jane-doe-x", "b": "jane-doe-x", "c": "jane-doe-x"}),
        ({"a": "${b}-${b}", "b": "v"}, {"a": "v-v", "b": "v"}),
        ({"cmd": "echo \\${HOME} $PATH"}, {"cmd": "echo ${HOME} $PATH"}),
        ({"cmd": "\\${HOME}"}, {"cmd": "${HOME}"}),
        ({"cmd": "\\${X:-default} ${user:}"}, {"cmd": "${X:-default} jane-doe-x"}),
        ({"cmd": "a \\${HOME}", "r": "${cmd}"}, {"cmd": "a ${HOME}", "r": "a ${HOME}"}),
        ({"cmd": "$HOME and $ {x} and $"}, {"cmd": "$HOME and $ {x} and $"}),
        ({"spec": {"containers": [{"name": "${user:}"}]}}, {"spec": {"containers": [{"name": "jane-doe-x"}]}}),
        ({"_img": "base:1", "image": "${_img}"}, {"image": "base:1"}),
        ({"_scratch": {"x": "${env:UNSET_IN_SCRATCH}"}, "a": 1}, {"a": 1}),
        ({"a": 1, "b": None, "c": 2.5}, {"a": 1, "b": None, "c": 2.5}),
    ],
    ids=[
        "user-embedded", "user-whole", "env", "env-empty-value", "env-default", "env-empty-default",
        "env-set-ignores-default", "env-default-with-comma", "reference", "reference-keeps-int",
        "reference-keeps-bool", "reference-keeps-mapping", "embedded-reference-stringified",
        "embedded-bool-lower-case", "dotted-reference", "list-index-reference", "chained-references",
        "repeated-reference", "escape-kept-literal", "escape-whole", "escape-shell-default",
        "escaped-value-not-reinterpolated", "plain-dollar-untouched", "inside-free-form-spec",
        "scratch-referenced-then-dropped", "unreferenced-scratch-not-resolved", "non-strings-untouched",
    ],
)
def test_interpolate(infra, expected):
    assert run(infra) == expected


@pytest.mark.parametrize(
    "infra, key, message, hint",
    [
        ({"image": "${env:NOPE}"}, "image", "environment variable 'NOPE' is not set", "${env:NOPE,DEFAULT}"),
        ({"image": "${env:}"}, "image", "needs a variable name", "${env:NAME}"),
        ({"image": "${nope:x}"}, "image", "unknown resolver 'nope' in '${nope:x}'", "\\${VAR}"),
        ({"cmd": "echo ${X:-1}"}, "cmd", "unknown resolver 'X'", "\\${VAR}"),
        ({"image": "${user:x}"}, "image", "takes no arguments", "${user:}"),
        ({"image": "${missing.key}"}, "image", "refers to a missing key 'missing.key'", "\\${VAR}"),
        ({"cmd": "echo ${HOME}"}, "cmd", "refers to a missing key 'HOME'", "\\${VAR}"),
        ({"l": [1], "image": "${l.3}"}, "image", "refers to a missing key 'l.3'", "existing infra key"),
        ({"image": "${a b}"}, "image", "malformed interpolation '${a b}'", "${user:}"),
        ({"image": "${}"}, "image", "malformed interpolation", "${user:}"),
        ({"a": "${b}", "b": "${a}"}, "b", "interpolation cycle: a -> b -> a", "break the cycle"),
        ({"a": "${a}"}, "a", "interpolation cycle: a -> a", "break the cycle"),
        ({"a": {"b": "${a}"}}, "a.b", "interpolation cycle: a -> a.b -> a", "break the cycle"),
        ({"m": {"x": 1}, "image": "img-${m}"}, "image", "'${m}' is a dict and cannot be embedded", "whole value"),
        ({"launch": {"env": {"A": "${env:NOPE}"}}}, "launch.env.A", "'NOPE' is not set", "export NOPE"),
    ],
    ids=[
        "env-unset", "env-no-name", "unknown-resolver", "unescaped-shell-default", "user-with-args",
        "missing-reference", "unescaped-shell-variable", "list-index-out-of-range", "malformed", "empty",
        "two-key-cycle", "self-cycle", "parent-cycle", "mapping-embedded-in-string", "nested-key-named",
    ],
)
def test_interpolate_errors(infra, key, message, hint):
    with pytest.raises(ConfigError) as err:
        run(infra)
    assert err.value.message.startswith(f"{SOURCE}: {key}: ")
    assert message in err.value.message
    assert hint in err.value.hint


def test_errors_name_the_layer_that_set_the_key():
    provenance = Provenance()
    provenance.record({"image": "ok"}, Path("/low.yaml"))
    provenance.record({"launch": {"entrypoint": "${env:NOPE}"}}, Path("/high.yaml"))
    with pytest.raises(ConfigError, match=r"^/high\.yaml: launch\.entrypoint: "):
        interpolate({"image": "ok", "launch": {"entrypoint": "${env:NOPE}"}}, {}, provenance)


def test_interpolate_does_not_modify_its_input():
    infra = {"m": {"x": 1}, "copy": "${m}"}
    result = run(infra)
    result["copy"]["x"] = 2
    assert infra == {"m": {"x": 1}, "copy": "${m}"}
    assert result["m"] == {"x": 1}


# OmegaConf's semantics (checked against OmegaConf 2.3 while writing them), then ours on purpose.
@pytest.mark.parametrize(
    "infra, key, expected",
    [
        # references, relative to the node's parent with leading dots
        ({"g": {"replicas": 4, "minReplicas": "${.replicas}"}}, "g", {"replicas": 4, "minReplicas": 4}),
        ({"top": "t", "g": {"x": "${..top}"}}, "g", {"x": "t"}),
        ({"groups": [{"replicas": 2, "max": "${.replicas}"}]}, "groups", [{"replicas": 2, "max": 2}]),
        ({"s": {"n": 3, "l": [{"m": "${...n}"}]}}, "s", {"n": 3, "l": [{"m": 3}]}),
        ({"s": {"l": [{"n": 1}, {"m": "${..0.n}"}]}}, "s", {"l": [{"n": 1}, {"m": 1}]}),
        ({"a": "${.b}", "b": 1}, "a", 1),
        ({"l": [5, 6], "x": "${l[1]}"}, "x", 6),
        ({"m": {"k": {"v": 1}}, "x": "${m[k].v}"}, "x", 1),
        ({"k": "b", "b": 7, "x": "${${k}}"}, "x", 7),
        ({"k": "v", "m": {"v": 2}, "x": "${m.${k}}"}, "x", 2),
        ({"a": {"b": "${c}"}, "c": {"d": 1}, "x": "${a.b.d}"}, "x", 1),
        ({"a": {"x": 1, "y": "${.x}"}, "b": "${a}"}, "b", {"x": 1, "y": 1}),
        ({"b": 1, "x": "${ b }"}, "x", 1),
        ({"b": 4.0, "x": "pre-${b}-post"}, "x", "pre-4.0-post"),
        # escapes: an odd number of backslashes before ${ escapes it, pairs halve
        ({"b": "v", "x": "\\\\${b}"}, "x", "\\v"),
        ({"b": "v", "x": "\\\\\\${b}"}, "x", "\\${b}"),
        ({"b": "v", "x": "x\\y ${b} \\\\ z"}, "x", "x\\y v \\\\ z"),
        ({"b": "v", "x": "a$b${b}$"}, "x", "a$bv$"),
        # oc.env
        ({"x": "${oc.env:HOME}"}, "x", "/home/j"),
        ({"x": "${oc.env:NOPE,dflt}"}, "x", "dflt"),
        ({"x": "${oc.env:NOPE,null}"}, "x", None),
        ({"x": "${oc.env:NOPE,5}"}, "x", "5"),
        ({"x": "${oc.env:NOPE,}"}, "x", ""),
        ({"x": "${oc.env:NOPE,${oc.env:HOME}/x}"}, "x", "/home/j/x"),
        ({"x": "${oc.env:EMPTY,dflt}"}, "x", ""),
        # oc.select: absolute, or relative with a dot; missing (or '???') gives the default or null
        ({"a": {"b": 3}, "x": "${oc.select:a.b,7}"}, "x", 3),
        ({"x": "${oc.select:a.b,7}"}, "x", 7),
        ({"x": "${oc.select:nope}"}, "x", None),
        ({"d": {"b": 1, "x": "${oc.select:.b,3}"}}, "d", {"b": 1, "x": 1}),
        ({"m": "???", "x": "${oc.select:m,fallback}"}, "x", "fallback"),
        ({"b": 2, "x": "${oc.select:nope,${b}}"}, "x", 2),
        ({"x": "${oc.select:nope,[1, [2, 3]]}"}, "x", [1, [2, 3]]),
        ({"x": "${oc.select:nope,{a: 1, b: [x]}}"}, "x", {"a": 1, "b": ["x"]}),
        ({"l": [5, 6], "x": "${oc.select:l.1}"}, "x", 6),
        # oc.decode: text to a typed value
        ({"x": "${oc.decode:'5'}"}, "x", 5),
        ({"x": "${oc.decode:${oc.env:NUM}}"}, "x", 4),
        ({"x": "${oc.decode:'[1, 2]'}"}, "x", [1, 2]),
        ({"x": "${oc.decode:'{a: 1}'}"}, "x", {"a": 1}),
        ({"x": "${oc.decode:'true'}"}, "x", True),
        ({"x": "${oc.decode:null}"}, "x", None),
        ({"x": "${oc.decode:' 5 '}"}, "x", " 5 "),
        # oc.dict
        ({"d": {"a": 1, "b": 2}, "x": "${oc.dict.keys:d}"}, "x", ["a", "b"]),
        ({"d": {"a": 1, "b": "${.a}"}, "x": "${oc.dict.values:d}"}, "x", [1, 1]),
        # the earlier launcher's mul, div, max (div of integers that divide exactly: an integer)
        ({"x": "${mul:2,3}"}, "x", 6),
        ({"x": "${mul:2.5,2}"}, "x", 5.0),
        ({"n": 3, "x": "${mul:${n},${n}}"}, "x", 9),
        ({"x": "${mul:-2,+3}"}, "x", -6),
        ({"x": "${mul: 2 , 3 }"}, "x", 6),
        ({"x": "${max:3,9}"}, "x", 9),
        ({"x": "${max:-1.5,-2}"}, "x", -1.5),
        ({"x": "${div:8,2}"}, "x", 4),
        ({"x": "${div:7,2}"}, "x", 3.5),
        ({"x": "${div:7.0,2}"}, "x", 3.5),
        ({"g": {"replicas": 4, "gpus": "${mul:${.replicas},8}"}}, "g", {"replicas": 4, "gpus": 32}),
        # typed arguments: literals as OmegaConf types them, quoted text, escapes
        ({"x": "${oc.env:NOPE,1_000}"}, "x", "1000"),
        ({"x": "${oc.env:NOPE,1e3}"}, "x", "1000.0"),
        ({"x": "${oc.env:NOPE,TRUE}"}, "x", "True"),
        ({"x": "${oc.env:NOPE,01}"}, "x", "01"),
        ({"x": "${oc.env:NOPE,'a,b'}"}, "x", "a,b"),
        ({"x": "${oc.env:NOPE,a\\,b}"}, "x", "a,b"),
        ({"x": "${oc.env:NOPE,'a\\'b'}"}, "x", "a'b"),
        ({"x": '${oc.env:NOPE,"a\\"b"}'}, "x", 'a"b'),
        ({"x": "${oc.env:NOPE,'a\\\\'}"}, "x", "a\\"),
        ({"x": "${oc.env:NOPE,  a b  }"}, "x", "a b"),
        ({"x": "${oc.env:NOPE,a\\ }"}, "x", "a "),
        ({"x": "${oc.env:NOPE,http://h:80/p}"}, "x", "http://h:80/p"),
        ({"b": 1, "x": "${oc.env:NOPE,'${b}'}"}, "x", "1"),
        # ours, unlike OmegaConf: env keeps the text after the first comma; embedded null is empty
        ({"x": "${env:NOPE,true}"}, "x", "true"),
        ({"x": "${env:NOPE, 1_000 }"}, "x", "1_000"),
        ({"n": None, "x": "v=${n}."}, "x", "v=."),
    ],
)
def test_omegaconf_forms(infra, key, expected):
    assert run(infra, {**ENV, "NUM": "4"})[key] == expected


@pytest.mark.parametrize(
    "infra, key, message, hint",
    [
        ({"x": "${"}, "x", "malformed interpolation '${': expected a key at the end", "${oc.env:NAME[,default]}"),
        ({"x": "${a"}, "x", "malformed interpolation '${a': expected '}'", "\\${VAR}"),
        ({"x": "${env:X"}, "x", "malformed interpolation '${env:X': expected '}'", "\\${VAR}"),
        ({"x": "${a.}"}, "x", "expected a key", "\\${VAR}"),
        ({"x": "${oc.env:X,'abc}"}, "x", "unterminated quote", "\\${VAR}"),
        ({"x": "${oc.select:l[1]}"}, "x", "unexpected '[' (quote the argument)", "\\${VAR}"),
        ({"x": "${oc.env:X,[1}"}, "x", "malformed interpolation '${oc.env:X,[1}': expected ',' or ']'", "\\${VAR}"),
        ({"k": 1, "x": "${${k}}"}, "x", "'${k}' is used as a key and must give a string, got integer 1", "key name"),
        ({"x": "${..a}"}, "x", "'${..a}' goes 2 levels up from 'x', above the top of the infra", "fewer leading dots"),
        ({"g": {"x": "${.nope}"}}, "g.x", "'${.nope}' refers to a missing key 'g.nope'", "existing infra key"),
        ({"m": "???", "x": "${m}"}, "x", "refers to 'm', which is '???'", "set m"),
        ({"x": "${oc.create:{a: 1}}"}, "x", "unknown resolver 'oc.create'", "${oc.dict.keys:key}"),
        ({"x": "${mul:1}"}, "x", "'${mul:1}' takes 2 arguments, got 1", "${mul:a,b}"),
        ({"x": "${oc.env:}"}, "x", "takes 1 to 2 arguments, got 0", "${oc.env:NAME}"),
        ({"x": "${user: a}"}, "x", "takes no arguments, got 1", "${user:}"),
        ({"x": "${mul:a,2}"}, "x", "mul takes numbers, got string 'a'", "${oc.decode:...}"),
        ({"x": "${max:true,2}"}, "x", "max takes numbers, got boolean true", "numbers"),
        ({"x": "${mul:${oc.env:NUM},2}"}, "x", "mul takes numbers, got string '4'", "${oc.decode:...}"),
        ({"x": "${div:1,0}"}, "x", "divides by zero", "other than 0"),
        ({"x": "${mul:9223372036854775807,2}"}, "x", "out of the 64-bit integer range", "smaller"),
        ({"x": "${mul:" + "9" * 5000 + ",1}"}, "x", "(5000 characters) is out of the 64-bit integer range", "smaller"),
        ({"x": "${mul:1e308,10}"}, "x", "is not a finite number (inf)", "smaller"),
        ({"x": "${oc.decode:5}"}, "x", "decodes text, got integer 5", "string"),
        ({"x": "${oc.decode:'a,b'}"}, "x", "malformed interpolation 'a,b': text after the value", "\\${VAR}"),
        ({"x": "${oc.dict.keys:nope}"}, "x", "'${oc.dict.keys:nope}' refers to a missing key", "mapping"),
        ({"l": [1], "x": "${oc.dict.values:l}"}, "x", "refers to list, not a mapping", "mapping"),
        ({"x": "${oc.select:5}"}, "x", "needs a key, got integer 5", "dotted key"),
        ({"x": "${oc.env:NOPE}"}, "x", "environment variable 'NOPE' is not set", "${oc.env:NOPE,DEFAULT}"),
        ({"b": [1], "x": "${b}${b}"}, "x", "'${b}' is a list and cannot be embedded", "whole value"),
    ],
)
def test_omegaconf_form_errors(infra, key, message, hint):
    with pytest.raises(ConfigError) as err:
        run(infra, {**ENV, "NUM": "4"})
    assert err.value.message.startswith(f"{SOURCE}: {key}: ")
    assert message in err.value.message
    assert hint in err.value.hint


def _chain(count: int, value: Callable[[int], Any], *, last_first: bool = False) -> dict:
    """Keys k0..k<count-1>; with ``last_first`` resolving the first key walks the whole chain."""
    order = reversed(range(count)) if last_first else range(count)
    return {f"k{i}": value(i) for i in order}


@pytest.mark.parametrize(
    "infra, message",
    [
        (
            _chain(40, lambda i: f"${{k{i - 1}}}${{k{i - 1}}}" if i else "x" * 1000),
            "builds more than 4194304 characters",
        ),
        (_chain(40, lambda i: [f"${{k{i - 1}}}", f"${{k{i - 1}}}"] if i else [1]), "builds more than 50000 values"),
        (_chain(40, lambda i: f"${{mul:${{k{i - 1}}},${{k{i - 1}}}}}" if i else 10), "out of the 64-bit integer range"),
        (_chain(300, lambda i: f"${{k{i - 1}}}" if i else 1, last_first=True), "nest too deeply (resolving 'k299')"),
        (
            _chain(300, lambda i: f"${{oc.select:nope,${{oc.decode:'${{k{i - 1}}}'}}}}" if i else 1, last_first=True),
            "nest too deeply",
        ),
        (_chain(70, lambda i: [f"${{k{i - 1}}}"] if i else 1), "would nest more than 64 levels deep here"),
        ({"x": "${oc.decode:" * 300 + "1" + "}" * 300}, "nest too deeply"),
        ({"x": "${oc.env:NOPE," + "[" * 300 + "]" * 300 + "}"}, "nest too deeply"),
        ({"k0": "${k1}", "k1": "${k2}", "k2": "${k0}"}, "interpolation cycle: k0 -> k1 -> k2 -> k0"),
        ({"a": {"b": "${oc.select:a}"}}, "interpolation cycle: a -> a.b -> a"),
    ],
    ids=[
        "doubling-text",
        "doubling-lists",
        "squaring-numbers",
        "long-chain",
        "long-chain-through-resolvers",
        "deepening-lists",
        "nested-decode",
        "nested-lists",
        "three-key-cycle",
        "cycle-through-select",
    ],
)
def test_resolver_bombs_are_refused(infra, message):
    """Every key is resolved once and what interpolation builds is bounded: each bomb ends in one ConfigError."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        run(infra)


def test_a_key_referenced_many_times_is_resolved_once():
    infra = {"base": "${env:HOME}", **{f"k{i}": "${base}-${base}" for i in range(1000)}}
    assert run(infra)["k999"] == "/home/j-/home/j"
