"""The defaults that depend on the data: ``n_members="auto"``, ``numeric_embedding="auto"``,
``first_mask="auto"`` and ``cat_emb_dim="auto"`` (the architecture), and ``learning_rate="auto"``
(the training).

A fit resolves them once (a warm start keeps the network, and them) into the fitted attributes
``n_members_``, ``numeric_embedding_``, ``first_mask_`` and ``cat_emb_dim_``; the network is
built from those, and model files save them. An estimator without them (unfitted, or loaded
from a file written before they existed) builds from its parameters, where "auto" cannot occur
in such files.

The rules: the user guide ("Choosing parameters / defaults"); how they were chosen: the
quality benchmark in ``benchmarks/README.md``.

``learning_rate="auto"`` is resolved by every fit from its training batch and whether it
validates (:func:`auto_learning_rate`); it builds nothing, so no fitted attribute holds it
(``history_`` records each epoch's rate).
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
    """What ``first_mask="auto"`` resolves to (without a pretrainer): ``"shared"`` for a network
    with a numeric embedding (with the per-row first mask its masks stop explaining) or with
    members, ``"per_row"`` for one network without an embedding (where the shared first mask
    cost accuracy on some tables)."""
    return "shared" if numeric_embedding is not None or n_members > 1 else "per_row"


def auto_cat_emb_dim(wide_suits: bool, numeric_embedding: str | None, numeric_dim: int) -> int:
    """What ``cat_emb_dim="auto"`` resolves to (without a pretrainer): as many channels per
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
    ``first_mask="auto"``: the pretrainer's first mask when there is one (its encoder is
    copied), else :func:`auto_first_mask`.
    ``cat_emb_dim="auto"``: the pretrainer's width when there is one, else
    :func:`auto_cat_emb_dim` (``wide_categories_suit``: the estimator's judgement of its target).
    """
    members = getattr(est, "n_members", 1)
    if members == AUTO:
        members = auto_members(n_rows, members_suit)
    embedding = getattr(est, "numeric_embedding", None)
    if embedding == AUTO:
        embedding = auto_numeric_embedding(periodic_suits, pretrained is not None)
    first = getattr(est, "first_mask", "per_row")
    if first == AUTO:
        if pretrained is not None:
            first = getattr(pretrained.network_.encoder, "first_mask", "per_row")
        else:
            first = auto_first_mask(int(members), embedding)
    width = getattr(est, "cat_emb_dim", 1)
    if width == AUTO:
        if pretrained is not None:
            width = pretrained.network_.inputs.cat_emb_dim
        else:
            numeric_dim = getattr(est, "numeric_embedding_dim", 8)
            width = auto_cat_emb_dim(wide_categories_suit, embedding, numeric_dim)
    est.n_members_ = int(members)
    est.numeric_embedding_ = embedding
    est.first_mask_ = first
    est.cat_emb_dim_ = int(width)


def _built_from(est: Any, name: str, default: Any, auto: Any) -> Any:
    """The fitted ``name_`` of ``est``, else its parameter ``name`` (``default`` for an estimator
    pickled before the parameter existed), with ``auto`` in place of "auto"."""
    value = getattr(est, f"{name}_", getattr(est, name, default))
    return auto if value == AUTO else value


def network_architecture(est: Any) -> tuple[int, str | None, str, int]:
    """``(n_members, numeric_embedding, first_mask, cat_emb_dim)`` to build ``est``'s network
    with: the resolved fitted attributes, else the parameters ("auto" read as 1 member, no
    embedding, the first mask that resolves to and 1 channel per categorical column)."""
    members = int(_built_from(est, "n_members", 1, 1))
    embedding = _built_from(est, "numeric_embedding", None, None)
    first = _built_from(est, "first_mask", "per_row", None) or auto_first_mask(members, embedding)
    return members, embedding, first, int(_built_from(est, "cat_emb_dim", 1, 1))
