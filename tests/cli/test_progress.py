"""The progress renderer offline: events fed with an injected clock, frames rendered to text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from nrl_k8s.events import Applied, Became, RolledBack, Waiting
from nrl_k8s_cli._progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def console(*, terminal: bool) -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=terminal, color_system=None, highlight=False,
                   soft_wrap=True, emoji=False)


def frame(progress: Progress) -> str:
    """The live table as a terminal would show it now."""
    view = console(terminal=False)
    view.print(progress.table())
    return view.file.getvalue()


def row(progress: Progress, resource: str) -> str:
    return next(line.strip() for line in frame(progress).splitlines() if line.strip().startswith(resource))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def progress(clock):
    return Progress(console=console(terminal=False), live=False, clock=clock, stdout=io.StringIO())


def test_a_wait_ticks_with_the_clock(progress, clock):
    progress(Waiting("dynamo.serving", "0/1 pods ready"))
    shown = set()
    for _ in range(4):
        shown.add(row(progress, "dynamo.serving").split()[-1])
        clock.now += 1.0
    assert shown == {"0.0s", "1.0s", "2.0s", "3.0s"}
    assert frame(progress).splitlines()[-1].strip() == "4.0s"  # the whole run's time under the rows


def test_a_new_reason_keeps_the_wait_s_start(progress, clock):
    progress(Waiting("rayjob", "waiting for KubeRay to name the RayCluster"))
    clock.now += 2.0
    progress(Waiting("rayjob", "waiting for KubeRay to submit the driver"))
    clock.now += 1.5
    assert row(progress, "rayjob").endswith("3.5s")


@pytest.mark.parametrize("final, shown", [
    (Became("dynamo.serving", "ready"), "ok"),
    (Applied("dynamo.serving", "job-dgd", "reused"), "reused"),
], ids=["became", "applied"])
def test_a_final_state_replaces_the_waiting_one(progress, clock, final, shown):
    progress(Waiting("dynamo.serving", "0/1 pods ready"))
    clock.now += 10.0
    progress(final)
    clock.now += 5.0
    line = row(progress, "dynamo.serving")
    assert "waiting" not in line and "pods ready" not in line and shown in line
    assert line.endswith("10.0s")  # how long the wait took, frozen


def test_a_late_report_of_an_ended_wait_is_dropped(progress, clock):
    progress(Waiting("dynamo.serving", "0/1 pods ready"))
    progress(Became("dynamo.serving", "ready"))
    progress(Waiting("dynamo.serving", "0/1 pods ready"))  # a watcher thread that had not seen it end
    assert "waiting" not in row(progress, "dynamo.serving")
    progress(Waiting("dynamo.serving", "probing the frontend"))  # a new wait shows
    assert "probing the frontend" in row(progress, "dynamo.serving")


def test_rollback_row_ends_with_the_rollback(progress):
    progress(Waiting("rollback", "deleting RayJob job-1"))
    progress(RolledBack(deleted=("RayJob job-1",)))
    assert "deleting" not in row(progress, "rollback")


def test_no_row_waits_once_the_operation_is_over(progress, clock):
    with progress:
        progress(Waiting("rayjob", "Running  job RUNNING"))
        clock.now += 7.0
    line = row(progress, "rayjob")
    assert "waiting" not in line and "RUNNING" not in line and line.endswith("7.0s")


def test_through_a_pipe_every_line_is_kept_in_order(clock):
    stdout, messages = io.StringIO(), console(terminal=False)
    with Progress(console=messages, live=False, clock=clock, stdout=stdout) as progress:
        progress(Waiting("rayjob", "waiting for KubeRay to submit the driver"))
        progress.log("step 1\nstep")
        progress.log(" 2\n")
        progress(Became("driver", "submitted"))
        progress.log("step 3\n")
    assert stdout.getvalue() == "step 1\nstep 2\nstep 3\n"
    assert [line.split()[2:4] for line in messages.file.getvalue().splitlines()] == [
        ["rayjob", "waiting"], ["driver", "ok"], ["rayjob", "ended"]]


def test_in_a_terminal_log_lines_print_above_the_live_table(clock):
    screen = console(terminal=True)
    with Progress(console=screen, live=True, clock=clock) as progress:
        progress(Waiting("dynamo.serving", "0/1 pods ready"))
        for n in range(1, 4):
            progress.log(f"line {n}\n")
        progress.log("no newline at the end")
        progress(Became("dynamo.serving", "ready"))
    text = screen.file.getvalue()
    for line in ("line 1", "line 2", "line 3", "no newline at the end"):
        assert line in text
    assert text.index("line 1") < text.index("line 2") < text.index("line 3")
    last_frame = text[text.rindex("dynamo.serving"):]
    assert "ok" in last_frame and "pods ready" not in last_frame


def test_a_frame_drawn_with_a_log_line_is_the_table_itself(clock):
    """A log line prints with markup off, and rich draws the live table below it with the same
    options: the table must not hang on markup, or that frame shows "[dim]" and takes another shape."""
    screen = console(terminal=True)
    with Progress(console=screen, live=True, clock=clock) as progress:
        progress(Became("lease", "released"))
        progress(Waiting("dynamo.serving", "0/1 pods ready [not yet]"))
        progress.log("a driver line\n")
    text = screen.file.getvalue()
    assert "a driver line" in text and "[dim]" not in text and "/]" not in text
    assert "0/1 pods ready [not yet]" in text  # what the operator says is shown as it is
