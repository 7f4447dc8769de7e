"""Tests' access to the estimators' fixed choices (:mod:`tabsparse.estimators._fixed`): the
machinery behind a choice other than the fixed one stays in the core, and these tests drive it
through an estimator."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from tabsparse.estimators._fixed import REMOVED_PARAMS

E = TypeVar("E")


def with_fixed(estimator: E, **choices: Any) -> E:
    """``estimator`` with some of its fixed choices replaced (on this instance only: ``clone``
    gives the fixed ones back)."""
    current = estimator._fixed  # type: ignore[attr-defined]
    estimator._fixed = dataclasses.replace(current, **choices)  # type: ignore[attr-defined]
    return estimator


def build(cls: type[E], **params: Any) -> E:
    """``cls(**params)``, where the names among ``params`` that are fixed choices
    (:data:`~tabsparse.estimators._fixed.REMOVED_PARAMS`) set those choices instead."""
    fixed = {k: params.pop(k) for k in list(params) if k in REMOVED_PARAMS}
    return with_fixed(cls(**params), **fixed)
