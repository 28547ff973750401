"""``concurrency.gather``: calls at once, results in order, the first error in call order."""

from __future__ import annotations

import threading

import pytest

from nrl_k8s.errors import ConfigError, ForbiddenError
from nrl_k8s.flows.concurrency import gather


def test_results_come_in_call_order():
    assert gather(lambda: 1, lambda: "two", lambda: None) == [1, "two", None]


def test_calls_run_at_once():
    both = threading.Barrier(3, timeout=60)  # broken (an error) unless all three wait together

    def meet(value):
        return lambda: (both.wait(), value)[1]

    assert gather(meet("a"), meet("b"), meet("c")) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "failing", [(0, 1), (1, 2), (0, 2)], ids=["first-and-second", "second-and-third", "first-and-third"]
)
def test_the_first_error_in_call_order_wins(failing):
    errors = [ForbiddenError("permissions"), ConfigError("drift"), ConfigError("package")]

    def call(index):
        def run():
            if index in failing:
                raise errors[index]
            return index
        return run

    with pytest.raises(type(errors[failing[0]])) as raised:
        gather(call(0), call(1), call(2))
    assert raised.value is errors[failing[0]]
