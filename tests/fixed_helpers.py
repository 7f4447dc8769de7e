"""Tests' access to the estimators' fixed choices (:mod:`tabsparse.estimators._fixed`): the
machinery behind a choice other than the fixed one stays in the core, and these tests drive it
through an estimator."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

E = TypeVar("E")


def with_fixed(estimator: E, **choices: Any) -> E:
    """``estimator`` with some of its fixed choices replaced (on this instance only: ``clone``
    gives the fixed ones back)."""
    current = estimator._fixed  # type: ignore[attr-defined]
    estimator._fixed = dataclasses.replace(current, **choices)  # type: ignore[attr-defined]
    return estimator
