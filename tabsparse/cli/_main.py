"""The entry point: parse the command line, run the command, turn failures into one line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from tabsparse.cli._errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    UsageError,
    _describe_exception,
    _one_line,
)
from tabsparse.cli._parser import build_parser

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    CliError,
    OSError,
    ValueError,
    TypeError,
    ImportError,
    KeyError,
    ArithmeticError,  # tabsparse.training.TrainingError: the loss became non-finite
)


def _error(message: str) -> None:
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at the null device, so that flushing it at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tabsparse`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (without the program name); ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        The exit status: 0 on success, 1 after an error, 2 for a malformed command line, 130
        after Ctrl-C.
    """
    debug = False
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except UsageError as exc:
            _error(str(exc))
            return EXIT_USAGE
        except SystemExit as exc:  # --help and --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        debug = bool(getattr(args, "debug", False))
        return _run(args, debug)
    except KeyboardInterrupt as exc:  # in a command, or while its modules (torch) are imported
        if debug:
            raise
        _error(str(exc) or "interrupted")
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace, debug: bool) -> int:
    """Run the command of ``args``, imported only now, with failures turned into one line."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            command = importlib.import_module(f"tabsparse.cli._{args.command}")
            return int(command.run(args))
        except BrokenPipeError:  # e.g. `tabsparse info MODEL | head`: stop quietly
            _silence_stdout()
            return EXIT_ERROR
        except EXPECTED_ERRORS as exc:
            if debug:
                raise
            _error(str(exc) if isinstance(exc, CliError) else _describe_exception(exc))
            return EXIT_ERROR
        except Exception as exc:
            if debug:
                raise
            _error(
                f"unexpected {type(exc).__name__}: {_describe_exception(exc)} "
                "(rerun with --debug to see the traceback)"
            )
            return EXIT_ERROR
