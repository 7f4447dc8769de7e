"""Where a table's column is in a network's inputs: a :data:`ColumnPlace`, and the check that a
list of them fits the data (shared by the Shapley values and the column selector)."""

from __future__ import annotations

from collections.abc import Sequence

from tabsparse.training.batches import TensorData

__all__ = ["ColumnPlace", "check_places"]

#: Where a network column's values are in a :class:`TensorData`: ``("numeric", position)`` in
#: ``numeric`` or ``("codes", position)`` in ``codes``.
ColumnPlace = tuple[str, int]


def check_places(data: TensorData, places: Sequence[ColumnPlace]) -> None:
    """A ``ValueError`` naming the first of ``places`` that is not a column of ``data``."""
    for kind, position in places:
        if kind not in ("numeric", "codes"):
            raise ValueError(f"column place {(kind, position)} is not in the data")
        width = (data.numeric if kind == "numeric" else data.codes).shape[1]
        if not 0 <= position < width:
            raise ValueError(f"column place {(kind, position)} is not in the data")
