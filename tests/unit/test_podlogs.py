"""The pure parts of ``nrl-k8s logs``: flag parsing, tail, skipping what was printed, line prefixes."""

from __future__ import annotations

import pytest

from nrl_k8s.errors import ConfigError
from nrl_k8s.ops import logs as podlogs


@pytest.mark.parametrize(
    "source, role, expected",
    [
        ("driver", None, podlogs.Request("driver", None, "training")),
        ("head", "gym", podlogs.Request("head", None, "gym")),
        ("dgd", None, podlogs.Request("dgd", None, "training")),
        ("dgd:Frontend", None, podlogs.Request("dgd", "Frontend", "training")),
    ],
    ids=["driver", "head-of-a-role", "dgd", "dgd-component"],
)
def test_request_parse(source, role, expected):
    assert podlogs.Request.parse(source, role=role, tail=None, follow=False, dashboard_url=None) == expected


@pytest.mark.parametrize(
    "source, role, tail, url, words",
    [
        ("head:x", None, None, None, "--source head:x"),
        ("dgd:", None, None, None, "--source dgd:"),
        ("driver", None, -2, None, "--tail -2"),
        ("dgd", "training", None, None, "--role"),
        ("worker", None, None, "http://x", "--dashboard-url"),
    ],
    ids=["component-of-head", "empty-component", "negative-tail", "role-with-dgd", "url-with-worker"],
)
def test_request_parse_refuses(source, role, tail, url, words):
    with pytest.raises(ConfigError, match=words) as err:
        podlogs.Request.parse(source, role=role, tail=tail, follow=False, dashboard_url=url)
    assert err.value.hint


@pytest.mark.parametrize("count, expected", [(None, "a\nb\nc"), (0, ""), (2, "b\nc"), (9, "a\nb\nc")])
def test_last_lines(count, expected):
    assert podlogs.last_lines("a\nb\nc", count) == expected


def test_skip_chars_drops_what_was_printed_across_chunks():
    assert list(podlogs.skip_chars(iter(["ab", "cd", "ef"]), 3)) == ["d", "ef"]
    assert list(podlogs.skip_chars(iter(["ab"]), 0)) == ["ab"]


def test_prefixed_lines_keep_a_line_split_across_chunks_whole():
    target = podlogs.PodContainer("p", "main")
    assert list(podlogs._prefixed(target, iter(["one\ntw", "o\nthr", "ee"]))) == [
        "[pod/p/main] one\n", "[pod/p/main] two\n", "[pod/p/main] three\n"]
