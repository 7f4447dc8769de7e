"""The defaults that depend on the data: ``n_members="auto"``, ``numeric_embedding="auto"``
and ``first_mask="auto"`` (the architecture), and ``learning_rate="auto"`` (the training).

A fit resolves them once (a warm start keeps the network, and them) into the fitted attributes
``n_members_``, ``numeric_embedding_`` and ``first_mask_``; the network is built from those, and
model files save them. An estimator without them (unfitted, or loaded from a file written before
they existed) builds from its parameters, where "auto" cannot occur in such files.

The rules and the measurements behind them: the user guide ("Choosing parameters / defaults")
and ``benchmarks/README.md`` (quality rounds 13, 14 and 15).

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
    at 1,024. Without validation a fit runs all ``max_epochs`` and takes its last weights, and
    there the lower rate left ames_housing under-trained (RMSE +11%), so it keeps 0.02. The
    measurements: ``benchmarks/README.md``, quality round 15.

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
    cost covtype_50k_sample 7 points of accuracy)."""
    return "shared" if numeric_embedding is not None or n_members > 1 else "per_row"


def resolve_architecture(
    est: Any,
    n_rows: int,
    *,
    members_suit: bool,
    periodic_suits: bool,
    pretrained: Any = None,
) -> None:
    """Set ``est.n_members_``, ``est.numeric_embedding_`` and ``est.first_mask_`` for a fit on
    ``n_rows`` rows (``pretrained``: the pretrainer the fit starts from, or None).

    ``n_members="auto"``: :data:`AUTO_MEMBERS` below :data:`AUTO_MEMBERS_MAX_ROWS` rows where
    ``members_suit`` (one target column: class labels, or one regression column; multi-label,
    multi-task and 2-D regression targets were not measured with members), else 1.
    ``numeric_embedding="auto"``: ``"periodic"`` where ``periodic_suits`` (the estimator's
    judgement of its target: regression and binary classification) unless the fit starts from a
    pretrainer (whose input layer has no numeric embedding), else None.
    ``first_mask="auto"``: the pretrainer's first mask when there is one (its encoder is
    copied), else :func:`auto_first_mask`.
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
    est.n_members_ = int(members)
    est.numeric_embedding_ = embedding
    est.first_mask_ = first


def network_architecture(est: Any) -> tuple[int, str | None, str]:
    """``(n_members, numeric_embedding, first_mask)`` to build ``est``'s network with: the
    resolved fitted attributes, else the parameters ("auto" read as 1 member, no embedding and
    the first mask that resolves to)."""
    members = getattr(est, "n_members_", getattr(est, "n_members", 1))
    embedding = getattr(est, "numeric_embedding_", getattr(est, "numeric_embedding", None))
    members = 1 if members == AUTO else int(members)
    embedding = None if embedding == AUTO else embedding
    first = getattr(est, "first_mask_", getattr(est, "first_mask", "per_row"))
    if first == AUTO:
        first = auto_first_mask(members, embedding)
    return members, embedding, first
