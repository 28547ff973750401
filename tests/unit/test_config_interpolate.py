"""Infra interpolation: user, env, references, escapes, scratch keys, and every error."""

from __future__ import annotations

from pathlib import Path

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
        ({"cmd": "$HOME and $ {x} and ${"}, {"cmd": "$HOME and $ {x} and ${"}),
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
