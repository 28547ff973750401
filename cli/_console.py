"""Consoles: data goes to stdout, messages to stderr. Emoji codes are off: text such as ``:smile:``
in a job message or a name is printed as it is (and rich's emoji table is not loaded)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from nrl_k8s.errors import NrlK8sError, one_line
from nrl_k8s.redact import redact_text

out = Console(highlight=False, soft_wrap=True, emoji=False)  # ":x:" in a message stays text
if not out.is_terminal:
    out.width = 200  # pipes and CI logs: do not squeeze tables into 80 columns
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def _shown(text: str, *, lines: bool = False) -> str:
    """A message as printed: secret values redacted, on one line (a quoted value's newline or escape
    sequence written as an escape), rich markup escaped. ``lines``: each of its lines so (a failure's
    report of pods and events below its message)."""
    if lines:
        return "\n".join(_shown(line) for line in text.split("\n"))
    return escape(one_line(redact_text(text)))


def print_warning(message: str, hint: str | None = None) -> None:
    """``warning: MESSAGE`` and ``hint: HINT`` on stderr, one line each, secret values redacted."""
    err.print(f"[yellow]warning:[/] {_shown(message)}", markup=True, highlight=False)
    if hint:
        err.print(f"[yellow]hint:[/] {_shown(hint)}", markup=True, highlight=False)


def print_error(error: NrlK8sError) -> None:
    """``error: MESSAGE`` and ``hint: HINT`` on stderr, one line each, secret values redacted (a
    message may echo input)."""
    # bad input (exit 2) is one line whatever it quotes; a failure keeps the report it carries
    err.print(f"[bold red]error:[/] {_shown(error.message, lines=error.exit_code != 2)}", markup=True, highlight=False)
    if error.hint:
        err.print(f"[yellow]hint:[/] {_shown(error.hint)}", markup=True, highlight=False)


def print_request(request) -> None:
    """``--verbose``: one API request on stderr (method, path, status or failure, milliseconds)."""
    from urllib.parse import unquote

    outcome = request.status if request.status is not None else f"failed ({request.error})"
    err.print(f"api: {request.method} {redact_text(unquote(request.path))} {outcome} {request.ms:.0f} ms", markup=False,
              highlight=False)
