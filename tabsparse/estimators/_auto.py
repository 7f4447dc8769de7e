"""The rules behind every "auto": the defaults that depend on the data, in one table.

- ``n_members``: :data:`AUTO_MEMBERS` (4) below :data:`AUTO_MEMBERS_MAX_ROWS` (25,000) rows
  with one target column, else 1. Kept in ``n_members_``.
- ``numeric_embedding``: ``"periodic"`` for binary and regression targets (not from a
  pretrainer), else None. Kept in ``numeric_embedding_``.
- the first mask (a fixed choice, :mod:`tabsparse.estimators._fixed`): shared by all rows with
  a numeric embedding or members, else per row; from a pretrainer, the pretrainer's. Kept in
  ``first_mask_``.
- the categorical embedding's width (a fixed choice): as many channels as a numeric column
  gets (8) for a regressor with a numeric embedding, else 1; from a pretrainer, the
  pretrainer's. Kept in ``cat_emb_dim_``.
- ``learning_rate``: 0.01 for a validated fit in batches under 1,024 rows, else 0.02
  (``history_`` records each epoch's rate).
- ``batch_size``: 1,024 from 16,384 training rows on; below, the largest power of two giving 16
  steps per epoch, at least 128 (:func:`tabsparse.training.auto_batch_size`).
- ``early_stopping``: on when ``validation_fraction`` of the rows is at least 500 (100 for a
  binary target).
- ``device``: CUDA when available, else the CPU. Kept in ``device_``.

A fit resolves the architecture's rules once (a warm start keeps the network, and them) into
the fitted attributes above; the network is built from those, and model files save them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AUTO",
    "AUTO_MEMBERS",
    "AUTO_MEMBERS_MAX_ROWS",
    "LEARNING_RATE",
    "LEARNING_RATE_FULL_BATCH",
    "LEARNING_RATE_SMALL_BATCH",
    "auto_cat_emb_dim",
    "auto_first_mask",
    "auto_learning_rate",
    "auto_members",
    "auto_numeric_embedding",
    "network_architecture",
    "resolve_architecture",
]

AUTO = "auto"
#: members of ``n_members="auto"`` on a small table
AUTO_MEMBERS = 4
#: ``n_members="auto"`` trains :data:`AUTO_MEMBERS` members when ``X`` has fewer rows than this
AUTO_MEMBERS_MAX_ROWS = 25_000
#: ``learning_rate="auto"``: AdamW's rate, and the rate of a fit that validates and trains in
#: batches of fewer than :data:`LEARNING_RATE_FULL_BATCH` rows
LEARNING_RATE = 0.02
LEARNING_RATE_SMALL_BATCH = 0.01
LEARNING_RATE_FULL_BATCH = 1024


def auto_members(n_rows: int, members_suit: bool = True) -> int:
    """What ``n_members="auto"`` resolves to for a fit on ``n_rows`` rows (see
    :func:`resolve_architecture` for ``members_suit``)."""
    return AUTO_MEMBERS if members_suit and n_rows < AUTO_MEMBERS_MAX_ROWS else 1


def auto_learning_rate(batch_size: int, validating: bool) -> float:
    """What ``learning_rate="auto"`` resolves to for a fit training in batches of
    ``batch_size`` rows: :data:`LEARNING_RATE_SMALL_BATCH` (0.01) when the fit validates (early
    stopping keeps its best epoch) and the batches hold fewer than
    :data:`LEARNING_RATE_FULL_BATCH` rows, else :data:`LEARNING_RATE` (0.02).

    Smaller batches give noisier steps; 0.01 at 256 rows is Adam's square-root scaling of 0.02
    at 1,024. Without validation a fit runs all ``max_epochs`` and takes its last weights, where
    the lower rate can leave it under-trained, so it keeps 0.02.

    >>> [auto_learning_rate(1024, True), auto_learning_rate(256, True)]
    [0.02, 0.01]
    >>> auto_learning_rate(256, validating=False)
    0.02
    """
    if validating and batch_size < LEARNING_RATE_FULL_BATCH:
        return LEARNING_RATE_SMALL_BATCH
    return LEARNING_RATE


def auto_numeric_embedding(periodic_suits: bool, pretrained: bool = False) -> str | None:
    """What ``numeric_embedding="auto"`` resolves to: ``"periodic"`` where the estimator judges
    its target suited (``periodic_suits``: regression and binary classification) unless the fit
    starts from a pretrainer (whose input layer has no numeric embedding), else None."""
    return "periodic" if periodic_suits and not pretrained else None


def auto_first_mask(n_members: int, numeric_embedding: str | None) -> str:
    """The first mask (without a pretrainer): ``"shared"`` for a network
    with a numeric embedding (with the per-row first mask its masks stop explaining) or with
    members, ``"per_row"`` for one network without an embedding (where the shared first mask
    cost accuracy on some tables)."""
    return "shared" if numeric_embedding is not None or n_members > 1 else "per_row"


def auto_cat_emb_dim(wide_suits: bool, numeric_embedding: str | None, numeric_dim: int) -> int:
    """The categorical embedding's width (without a pretrainer): as many channels per
    categorical column as a numeric column has (``numeric_dim``) where the estimator judges its
    target suited (``wide_suits``: regression) and the network embeds its numeric columns,
    else 1: wider embeddings helped regression tables with categorical columns and not the
    classification tables.

    >>> [auto_cat_emb_dim(True, "periodic", 8), auto_cat_emb_dim(False, "periodic", 8)]
    [8, 1]
    >>> auto_cat_emb_dim(True, None, 8)
    1
    """
    return numeric_dim if wide_suits and numeric_embedding is not None else 1


def resolve_architecture(
    est: Any,
    n_rows: int,
    *,
    members_suit: bool,
    periodic_suits: bool,
    wide_categories_suit: bool = False,
    pretrained: Any = None,
) -> None:
    """Set ``est.n_members_``, ``est.numeric_embedding_``, ``est.first_mask_`` and
    ``est.cat_emb_dim_`` for a fit on ``n_rows`` rows (``pretrained``: the pretrainer the fit
    starts from, or None).

    ``n_members="auto"``: :data:`AUTO_MEMBERS` below :data:`AUTO_MEMBERS_MAX_ROWS` rows where
    ``members_suit`` (one target column: class labels, or one regression column; multi-label,
    multi-task and 2-D regression targets keep one network), else 1.
    ``numeric_embedding="auto"``: ``"periodic"`` where ``periodic_suits`` (the estimator's
    judgement of its target: regression and binary classification) unless the fit starts from a
    pretrainer (whose input layer has no numeric embedding), else None.
    The first mask: the pretrainer's first mask when there is one (its encoder is
    copied), else :func:`auto_first_mask`.
    The categorical width: the pretrainer's width when there is one, else
    :func:`auto_cat_emb_dim` (``wide_categories_suit``: the estimator's judgement of its target).
    """
    members = getattr(est, "n_members", 1)
    if members == AUTO:
        members = auto_members(n_rows, members_suit)
    embedding = getattr(est, "numeric_embedding", None)
    if embedding == AUTO:
        embedding = auto_numeric_embedding(periodic_suits, pretrained is not None)
    first = est._fixed.first_mask
    if first == AUTO:
        if pretrained is not None:
            first = getattr(pretrained.network_.encoder, "first_mask", "per_row")
        else:
            first = auto_first_mask(int(members), embedding)
    width = est._fixed.cat_emb_dim
    if width == AUTO:
        if pretrained is not None:
            width = pretrained.network_.inputs.cat_emb_dim
        else:
            numeric_dim = est._fixed.numeric_embedding_dim
            width = auto_cat_emb_dim(wide_categories_suit, embedding, numeric_dim)
    est.n_members_ = int(members)
    est.numeric_embedding_ = embedding
    est.first_mask_ = first
    est.cat_emb_dim_ = int(width)


def _built_from(est: Any, name: str, default: Any, auto: Any) -> Any:
    """The fitted ``name_`` of ``est``, else its parameter or fixed choice ``name`` (else
    ``default``), with ``auto`` in place of "auto"."""
    fixed = getattr(est._fixed, name, default)
    value = getattr(est, f"{name}_", getattr(est, name, fixed))
    return auto if value == AUTO else value


def network_architecture(est: Any) -> tuple[int, str | None, str, int]:
    """``(n_members, numeric_embedding, first_mask, cat_emb_dim)`` to build ``est``'s network
    with: the resolved fitted attributes, else the parameters ("auto" read as 1 member, no
    embedding, the first mask that resolves to and 1 channel per categorical column)."""
    members = int(_built_from(est, "n_members", 1, 1))
    embedding = _built_from(est, "numeric_embedding", None, None)
    first = _built_from(est, "first_mask", "per_row", None) or auto_first_mask(members, embedding)
    return members, embedding, first, int(_built_from(est, "cat_emb_dim", 1, 1))
