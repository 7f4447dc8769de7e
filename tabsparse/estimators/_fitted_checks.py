"""The checks of an estimator's fitted attributes read from a model file (each raises a
``ValueError`` naming the attribute and what it must be): the attributes every estimator has
(:func:`check_common`, with the background rows and the architecture), and a classifier's or
regressor's target (:func:`check_target`). :mod:`tabsparse.estimators._persistence` runs them
before it builds anything from the file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tabsparse.data import TableEncoder
from tabsparse.estimators._targets import kind_of, target_from_json, target_of
from tabsparse.io._values import is_int as _is_int
from tabsparse.io._values import is_real as _is_real
from tabsparse.nn.encoder import FIRST_MASKS
from tabsparse.nn.numeric_embedding import NUMERIC_EMBEDDINGS

__all__ = ["check_common", "check_target"]


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and v >= low


def _real_in(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: _is_real(v) and low <= float(v) <= high


# what each entry of a file's architecture_ may hold (the networks' own checks follow at build)
_ARCHITECTURE_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "n_d": (_int_at_least(1), "an integer >= 1"),
    "n_a": (_int_at_least(1), "an integer >= 1"),
    "n_steps": (_int_at_least(1), "an integer >= 1"),
    "gamma": (_real_in(1.0, float("inf")), "a finite number >= 1"),
    "n_independent": (_int_at_least(0), "an integer >= 0"),
    "n_shared": (_int_at_least(0), "an integer >= 0"),
    "mask_type": (lambda v: v in ("sparsemax", "entmax"), "'sparsemax' or 'entmax'"),
    "first_mask": (lambda v: isinstance(v, str) and v in FIRST_MASKS, f"one of {FIRST_MASKS}"),
    "virtual_batch_size": (_int_at_least(1), "an integer >= 1"),
    "momentum": (_real_in(0.0, 1.0), "a number in [0, 1]"),
    "cat_emb_dim": (_int_at_least(1), "an integer >= 1"),
    "grouped_features": (
        lambda v: (
            v is None
            or (
                isinstance(v, list) and all(isinstance(g, list) and all(map(_is_int, g)) for g in v)
            )
        ),
        "None or a list of lists of feature positions",
    ),
    "numeric_embedding": (
        lambda v: v is None or (isinstance(v, str) and v in NUMERIC_EMBEDDINGS),
        f"None or one of {sorted(NUMERIC_EMBEDDINGS)}",
    ),
    "numeric_embedding_dim": (_int_at_least(2), "an integer >= 2"),
    "n_members": (_int_at_least(1), "an integer >= 1"),
    "n_shared_decoder": (_int_at_least(0), "an integer >= 0"),
    "n_indep_decoder": (_int_at_least(0), "an integer >= 0"),
}


def _check_background(background: Any, enc: TableEncoder) -> None:
    """``background_``: encoded rows, ``{"numeric": float32 (m, n_numeric), "codes": int64 (m,
    n_categorical)}`` with 1 <= m, codes within the vocabularies."""
    if not isinstance(background, dict) or set(background) != {"numeric", "codes"}:
        raise ValueError("background_ must be a dict of 'numeric' and 'codes' arrays")
    numeric, codes = background["numeric"], background["codes"]
    n_num, n_cat = len(enc.numeric_columns), len(enc.categorical_columns)
    if (
        not isinstance(numeric, np.ndarray)
        or numeric.dtype != np.float32
        or numeric.ndim != 2
        or numeric.shape[0] < 1
        or numeric.shape[1] != n_num
    ):
        raise ValueError(f"background_['numeric'] must be a float32 array of shape (m, {n_num})")
    if (
        not isinstance(codes, np.ndarray)
        or codes.dtype != np.int64
        or codes.shape != (numeric.shape[0], n_cat)
    ):
        raise ValueError(
            f"background_['codes'] must be an int64 array of shape ({numeric.shape[0]}, {n_cat})"
        )
    limits = np.asarray(enc.cardinalities, dtype=np.int64)
    if codes.size and (bool((codes < 0).any()) or bool((codes >= limits).any())):
        raise ValueError("background_['codes'] holds codes outside the vocabularies")


def check_common(est: Any) -> None:
    enc: TableEncoder = est.encoder_
    if not _is_int(est.n_features_in_) or est.n_features_in_ != len(enc.input_names):
        raise ValueError(f"n_features_in_={est.n_features_in_!r} disagrees with the encoder")
    if enc.has_feature_names != hasattr(est, "feature_names_in_"):
        raise ValueError("feature_names_in_ is present exactly when the encoder has names")
    if enc.has_feature_names:
        names = est.feature_names_in_
        if (
            not isinstance(names, np.ndarray)
            or names.dtype != object
            or names.tolist() != list(enc.input_names)
        ):
            raise ValueError("feature_names_in_ must be the encoder's names as an object array")
    n_columns = len(enc.input_names)  # one importance per input column
    imp = est.feature_importances_
    if not isinstance(imp, np.ndarray) or imp.dtype.kind != "f" or imp.shape != (n_columns,):
        raise ValueError(f"feature_importances_ must be a float array of shape ({n_columns},)")
    std = getattr(est, "feature_importances_std_", None)
    if std is not None and (
        not isinstance(std, np.ndarray)
        or std.dtype.kind != "f"
        or std.shape != (n_columns,)
        or not np.all(np.isfinite(std))
        or bool((std < 0).any())
    ):
        raise ValueError(
            f"feature_importances_std_ must be a finite float array >= 0 of shape ({n_columns},)"
        )
    if hasattr(est, "background_"):
        _check_background(est.background_, enc)
    history = est.history_
    if not isinstance(history, list) or not all(
        isinstance(r, dict) and all(isinstance(k, str) and _is_real(v) for k, v in r.items())
        for r in history
    ):
        raise ValueError("history_ must be a list of dicts of numbers")
    if not _is_int(est.n_iter_) or est.n_iter_ < 0:
        raise ValueError(f"n_iter_={est.n_iter_!r} must be an integer >= 0")
    if est.best_iteration_ is not None and not _is_int(est.best_iteration_):
        raise ValueError(f"best_iteration_={est.best_iteration_!r} must be an integer or None")
    compiled = getattr(est, "compiled_", False)
    if not isinstance(compiled, (bool, np.bool_)):
        raise ValueError(f"compiled_={compiled!r} must be a bool")
    _check_architecture(est)


def _check_architecture(est: Any) -> None:
    """The resolved architecture, where present: ``n_members_`` an integer >= 1,
    ``numeric_embedding_`` None or a known embedding, ``first_mask_`` a known first mask,
    ``cat_emb_dim_`` an integer >= 1; ``architecture_`` (:func:`_check_fitted_architecture`)
    agrees with them."""
    members = getattr(est, "n_members_", 1)
    if not _is_int(members) or members < 1:
        raise ValueError(f"n_members_={members!r} must be an integer >= 1")
    embedding = getattr(est, "numeric_embedding_", None)
    if embedding is not None and embedding not in NUMERIC_EMBEDDINGS:
        raise ValueError(
            f"numeric_embedding_={embedding!r} must be None or one of {sorted(NUMERIC_EMBEDDINGS)}"
        )
    first = getattr(est, "first_mask_", "per_row")
    if first not in FIRST_MASKS:
        raise ValueError(f"first_mask_={first!r} must be one of {list(FIRST_MASKS)}")
    width = getattr(est, "cat_emb_dim_", 1)
    if not _is_int(width) or width < 1:
        raise ValueError(f"cat_emb_dim_={width!r} must be an integer >= 1")
    if "architecture_" in vars(est):
        _check_fitted_architecture(est)


def _check_fitted_architecture(est: Any) -> None:
    """``architecture_``: exactly the class's entries (``_architecture_names``), each of its
    kind, grouped features inside the encoder's columns, and the resolved attributes
    (``n_members_``, ...) equal to its entries."""
    arch = est.architecture_
    if not isinstance(arch, dict):
        raise ValueError(f"architecture_ must be a dict, got {type(arch).__name__}")
    names = tuple(type(est)._architecture_names)
    missing = [n for n in names if n not in arch]
    extra = sorted(str(n) for n in set(arch) - set(names))
    if missing or extra:
        raise ValueError(f"architecture_ has missing entries {missing} / unexpected {extra}")
    for name, value in arch.items():
        rule = _ARCHITECTURE_RULES.get(name)
        if rule is not None and not rule[0](value):
            raise ValueError(f"architecture_[{name!r}]={value!r} must be {rule[1]}")
    n_features = est.encoder_.n_features
    grouped = arch.get("grouped_features")
    if grouped is not None and any(not 0 <= i < n_features for g in grouped for i in g):
        raise ValueError(
            f"architecture_['grouped_features'] names a feature outside 0 .. {n_features - 1}"
        )
    for name in ("n_members", "numeric_embedding", "first_mask", "cat_emb_dim"):
        if f"{name}_" in vars(est) and name in arch and getattr(est, f"{name}_") != arch[name]:
            raise ValueError(
                f"{name}_={getattr(est, f'{name}_')!r} disagrees with "
                f"architecture_[{name!r}]={arch[name]!r}"
            )


def check_target(est: Any) -> None:
    """The fitted target attributes: the kind's own check (single-output files from before
    multi-output support have only ``classes_``; regressor files from before objectives have no
    ``_objective``), then the target they make must survive its JSON round trip."""
    kind = kind_of(est)  # the class default ("single") when a classifier file has none
    kind.check_attributes(est)
    target = target_of(est)
    doc = target.to_json()
    if target_from_json(doc).to_json() != doc:
        raise ValueError(f"the fitted target does not survive its JSON round trip: {doc!r}")
