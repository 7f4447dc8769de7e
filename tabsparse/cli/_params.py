"""``--param NAME=VALUE``: reading values and checking names against the estimator."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tabsparse.cli._errors import CliError, _suggest

NOT_SETTABLE = {"callbacks": "use --verbose for a progress bar"}


def parse_value(text: str) -> Any:
    """Read a ``--param`` value: None, a bool, an int, a float, JSON, or else the string itself.

    ``none``/``null`` (any case) give None, ``true``/``false`` give booleans, numbers give int or
    float, text starting with ``[``, ``{`` or ``"`` is read as JSON (e.g. ``[["a","b"]]`` or
    ``{"yes": 2}``); anything else is kept as a string (e.g. ``cosine``).

    Raises
    ------
    ValueError
        The text looks like JSON but is not valid JSON.
    """
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        pass
    if stripped[:1] in ("[", "{", '"'):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{text!r} is not valid JSON ({exc.msg} at character {exc.pos})"
            ) from None
    return text


def parse_param(item: str, valid: Sequence[str], owner: str) -> tuple[str, Any]:
    """Split and check one ``NAME=VALUE`` item of ``--param``.

    Parameters
    ----------
    item : str
        The text after ``--param``.
    valid : sequence of str
        The parameter names of the estimator.
    owner : str
        The estimator's class name, for messages.

    Returns
    -------
    (str, object)
        The name and the parsed value (see :func:`parse_value`).

    Raises
    ------
    CliError
        Malformed item, unknown name (with close matches) or bad JSON.
    """
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise CliError(f"--param expects NAME=VALUE, got {item!r}")
    if name not in valid:
        hint = _suggest(name, valid) or f"; its parameters are: {', '.join(sorted(valid))}"
        raise CliError(f"unknown parameter {name!r} for {owner}{hint}")
    if name in NOT_SETTABLE:
        raise CliError(
            f"parameter {name!r} cannot be set on the command line; {NOT_SETTABLE[name]}"
        )
    try:
        return name, parse_value(text)
    except ValueError as exc:
        raise CliError(f"bad value for parameter {name!r}: {exc}") from exc


def _parse_params(items: Sequence[str], estimator_class: type) -> dict[str, Any]:
    valid = sorted(estimator_class().get_params())
    params: dict[str, Any] = {}
    for item in items:
        name, value = parse_param(item, valid, estimator_class.__name__)
        if name in params:
            raise CliError(f"parameter {name!r} is given more than once")
        params[name] = value
    return params
