"""Exit statuses, the expected-failure exceptions and the one-line messages of the command line."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

PROG = "tabsparse"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An expected failure, reported as one ``tabsparse: error: ...`` line."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C whose message says what was kept (exit status 130, like any Ctrl-C)."""


class UsageError(CliError):
    """A malformed command line (exit status 2)."""


def _one_line(text: object) -> str:
    """Collapse a (possibly multi-line) message into one line."""
    parts = [line.strip() for line in str(text).splitlines()]
    return " ".join(part for part in parts if part)


def _short_list(names: Sequence[object], limit: int = 25) -> str:
    shown = ", ".join(str(n) for n in names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names) - limit} more)"
    return shown


def _suggest(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` when ``name`` is close to one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def _describe_exception(exc: BaseException) -> str:
    """One line about an expected exception, without its type's internals."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    if isinstance(exc, KeyError):
        return f"missing key or column {exc.args[0]!r}" if exc.args else "missing key"
    message = _one_line(exc)
    return message or type(exc).__name__
