"""The architecture defaults that depend on the data: ``n_members="auto"``,
``numeric_embedding="auto"`` and ``first_mask="auto"``.

A fit resolves them once (a warm start keeps the network, and them) into the fitted attributes
``n_members_``, ``numeric_embedding_`` and ``first_mask_``; the network is built from those, and
model files save them. An estimator without them (unfitted, or loaded from a file written before
they existed) builds from its parameters, where "auto" cannot occur in such files.

The rules and the measurements behind them: the user guide ("Choosing parameters / defaults")
and ``benchmarks/README.md`` (quality rounds 13 and 14).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AUTO",
    "AUTO_MEMBERS",
    "AUTO_MEMBERS_MAX_ROWS",
    "auto_first_mask",
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


def auto_members(n_rows: int, members_suit: bool = True) -> int:
    """What ``n_members="auto"`` resolves to for a fit on ``n_rows`` rows (see
    :func:`resolve_architecture` for ``members_suit``)."""
    return AUTO_MEMBERS if members_suit and n_rows < AUTO_MEMBERS_MAX_ROWS else 1


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
