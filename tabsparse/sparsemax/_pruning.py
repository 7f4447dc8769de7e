"""Wide rows (``d >= 256``): candidate pruning with the maxima of strided blocks.

A row is cut into strided blocks of 8 or 16 scores. The block maxima are a subset of the scores,
so the iterates of the threshold search on them are lower bounds of the row's threshold. For
sparsemax the threshold of the block maxima is tried as is: it is exact whenever the row has as
many scores above it as the block maxima have, which one count over the output checks. Rows
failing that test (and all rows of entmax-1.5, whose supports are larger) are searched from the
bound, on the gathered candidate blocks when they are few enough, else at full width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tabsparse.sparsemax._iterative import _entmax15_step, _search, _sparsemax_step, _Step
from tabsparse.sparsemax._sorted import _entmax15_tau_sort, _sparsemax_tau_sort

#: Width of the blocks used to prune candidates: narrow blocks below this row width, wide above.
_WIDE_BLOCK_FROM = 2048
#: Rows at least this wide are pruned with block maxima before the threshold search.
_PRUNE_MIN_WIDTH = 256
#: Passes of the search on the block maxima that give the lower bound used for pruning
#: (sparsemax, entmax-1.5).
_BOUND_PASSES = (4, 6)
#: Cost, in rows of full width, of searching the rows with many candidates separately.
_SPLIT_ROWS = 32
#: Gather candidates only if they are at most this fraction of the scores (gathers are slow).
_PRUNE_MAX_FRACTION = 0.5
#: Below this many scores, rows are searched at full width without gathering candidates.
_DIRECT_SEARCH_ELEMENTS = 1 << 18
#: Largest scratch buffer (elements) used to count supports.
_SCRATCH_ELEMENTS = 1 << 22


def _block_size(width: int) -> int:
    """Number of scores per block used to prune a row of ``width`` scores."""
    return 8 if width < _WIDE_BLOCK_FROM else 16


def _block_max(z: Tensor, block: int) -> Tensor:
    """Maxima of the strided blocks ``{j, j + nb, j + 2 nb, ...}`` of the first ``nb * block``
    columns.

    Parameters
    ----------
    z : Tensor
        Scores ``(n, w)`` with ``w >= block`` and unit stride along the last dimension.
    block : int
        Number of scores per block.

    Returns
    -------
    Tensor
        Block maxima ``(n, nb)`` with ``nb = w // block``.
    """
    n, w = z.shape
    nb = w // block
    # Reducing over the middle dimension vectorises over the contiguous block index.
    return z[:, : nb * block].reshape(n, block, nb).amax(dim=1)


def _candidate_slots(cnt: Tensor, nb: int, block: int, tail: int, width: int) -> int | None:
    """Number of live blocks ``L`` to keep per row, or None when pruning does not pay.

    Rows with more than ``L`` live blocks are searched at full width instead; ``L`` minimises
    the number of scores the search touches.
    """
    n = cnt.shape[0]
    hist = torch.bincount(cnt, minlength=nb + 1)
    rows_within = hist.cumsum(0)
    widths = torch.arange(nb + 1, device=cnt.device) * block + tail
    cost = rows_within * widths + (n - rows_within) * width
    # A separate search of the wide rows costs dozens of small operations: count it as rows.
    cost += (rows_within < n) * (_SPLIT_ROWS * width)
    n_live = int(cost.argmin())
    if int(cost[n_live]) > _PRUNE_MAX_FRACTION * n * width:
        return None
    return n_live


def _gather_candidates(x2: Tensor, live: Tensor, cnt: Tensor, n_live: int, block: int) -> Tensor:
    """Gather the first ``n_live`` live strided blocks of each row, padded with ``-inf``.

    Parameters
    ----------
    x2 : Tensor
        Scores ``(n, w)`` with unit stride along the last dimension.
    live : Tensor
        Boolean ``(n, nb)``: blocks (see :func:`_block_max`) that may hold the support.
    cnt : Tensor
        Number of live blocks of each row, ``(n,)``.
    n_live : int
        Number of slots; rows with more live blocks are truncated (and must be discarded).
    block : int
        Number of scores per block.

    Returns
    -------
    Tensor
        Candidates ``(n, block * n_live + tail)`` where the ``tail = w - nb * block`` last
        columns are always kept.
    """
    n, nb = live.shape
    cut = nb * block
    slots = max(n_live, 1)
    hit = live.nonzero()  # (T, 2) live (row, block) pairs in row-major order
    row, col = hit[:, 0], hit[:, 1]
    first = cnt.cumsum(0).sub_(cnt)  # index in `hit` of the first live block of each row
    slot = torch.arange(hit.shape[0], device=x2.device).sub_(first.index_select(0, row))
    if n_live < int(cnt.max()):
        ok = (slot < slots).nonzero().view(-1)
        row, col, slot = row.index_select(0, ok), col.index_select(0, ok), slot.index_select(0, ok)
    blocks = x2[:, :cut].view(n, block, nb)
    zc = torch.full((n, slots, block), float("-inf"), dtype=x2.dtype, device=x2.device)
    zc.index_put_((row, slot), blocks[row, :, col])
    zc = zc.view(n, slots * block)
    if cut < x2.shape[1]:
        zc = torch.cat([zc, x2[:, cut:]], dim=1)
    return zc


def _block_passes(bz: Tensor, entmax: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Threshold search on the block maxima, ending with one checked pass.

    The block maxima are a subset of the scores of a row, so every lower bound of their own
    threshold (any iterate of the search started below it) is a lower bound of the threshold
    of the whole row.

    Parameters
    ----------
    bz : Tensor
        Block maxima ``(n, nb)`` in the coordinates of the search.
    entmax : bool
        Entmax-1.5 threshold if true, sparsemax threshold otherwise.

    Returns
    -------
    lower : Tensor
        Finite lower bound ``(n, 1)`` of the threshold of the whole rows, at least ``-1``.
    final : Tensor
        Threshold of the block maxima, exact where ``done``.
    done : Tensor
        Rows where ``final`` is the exact threshold of the block maxima (or NaN rows).
    k : Tensor
        Number of block maxima above the threshold where ``done``.
    """
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    tau = bz.amax(dim=1, keepdim=True) - 1.0
    buf = torch.empty((2, *bz.shape), dtype=bz.dtype, device=bz.device)
    for _ in range(_BOUND_PASSES[int(entmax)]):
        _, _, tau, _ = step(bz, tau, buf, False)
    done, final, nxt, k = step(bz, tau, buf, True)
    assert done is not None and k is not None
    lower = torch.fmax(nxt, torch.full_like(nxt, -1.0))  # fmax: NaN rows get -1
    return lower, final, done, k


def _block_bound(bz: Tensor, entmax: bool) -> Tensor:
    """Lower bound (at least ``-1``) of the row thresholds from block maxima ``bz``."""
    return _block_passes(bz, entmax)[0]


def _count_positive(y: Tensor) -> Tensor:
    """Number of positive entries of each row of ``y`` (NaN for NaN rows), as ``(n, 1)``.

    Works through row chunks so that the scratch buffer stays small (fresh large buffers cost
    page faults).
    """
    n, w = y.shape
    rows = max(1, _SCRATCH_ELEMENTS // max(w, 1))
    if rows >= n:
        return torch.sign(y).sum(dim=1, keepdim=True)
    out = torch.empty((n, 1), dtype=y.dtype, device=y.device)
    scratch = torch.empty((rows, w), dtype=y.dtype, device=y.device)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        part = scratch[: stop - start]
        torch.sign(y[start:stop], out=part)
        torch.sum(part, dim=1, keepdim=True, out=out[start:stop])
    return out


def _refine(
    x2: Tensor, m: Tensor, bz: Tensor, lower: Tensor, entmax: bool, block: int
) -> tuple[Tensor, Tensor | None]:
    """Exact thresholds of wide rows from a lower bound, searching only candidate blocks.

    Parameters
    ----------
    x2 : Tensor
        Scores ``(n, w)``, unit stride along the last dimension. Never modified.
    m : Tensor
        Row maxima ``(n, 1)``.
    bz : Tensor
        Block maxima ``(n, nb)`` in search coordinates (see :func:`_block_max`).
    lower : Tensor
        Lower bound of the thresholds ``(n, 1)``, at least ``-1``.
    entmax : bool
        Entmax-1.5 threshold (of the half scores) if true, sparsemax otherwise.
    block : int
        Block size used for ``bz``.

    Returns
    -------
    tau : Tensor
        Exact thresholds ``(n, 1)`` in search coordinates.
    z : Tensor or None
        The shifted scores when they had to be computed at full width (no pruning), else None.
    """
    w = x2.shape[1]
    nb = bz.shape[1]
    cut = nb * block
    scale = 0.5 if entmax else 1.0
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    fallback = _entmax15_tau_sort if entmax else _sparsemax_tau_sort
    live = bz > lower
    cnt = live.sum(dim=1)
    # Gathering candidates costs dozens of operations: only worth it on enough scores.
    n_live = None
    if x2.shape[0] * w > _DIRECT_SEARCH_ELEMENTS:
        n_live = _candidate_slots(cnt, nb, block, w - cut, w)
    if n_live is None:  # few or dense rows: search at full width from the bound
        z = torch.sub(x2, m).mul_(scale)
        return _search(z, lower, step, fallback, True, 1), z
    zc = _gather_candidates(x2, live, cnt, n_live, block).sub_(m).mul_(scale)
    wide = (cnt > n_live).nonzero().view(-1)
    if wide.numel() == 0:
        return _search(zc, lower, step, fallback, True, 1), None
    # Rows with more live blocks than slots are searched at full width; their truncated
    # candidate rows are replaced by a trivial row (a single 0) that converges at once.
    zc.index_fill_(0, wide, float("-inf"))
    zc[:, :1].index_fill_(0, wide, 0.0)
    out = _search(zc, lower.index_fill(0, wide, -1.0), step, fallback, True, 1)
    zw = torch.sub(x2.index_select(0, wide), m.index_select(0, wide)).mul_(scale)
    tau_w = _search(zw, lower.index_select(0, wide), step, fallback, True, 1)
    out.index_copy_(0, wide, tau_w)
    return out, None


def _apply_threshold(x2: Tensor, m: Tensor, tau: Tensor, entmax: bool) -> Tensor:
    """``[x - m - tau]_+`` (sparsemax) or ``[(x - m) / 2 - tau]_+`` (entmax, not squared)."""
    y = torch.sub(x2, m)
    if entmax:
        torch.add(tau.neg(), y, alpha=0.5, out=y)
    else:
        y.sub_(tau)
    return y.clamp_(min=0.0)


def _wide_forward(x2: Tensor, entmax: bool) -> Tensor:
    """Sparsemax / entmax-1.5 of wide rows on CPU, with candidate pruning.

    Sparsemax first tries the threshold of the block maxima: it is the exact threshold of the
    row whenever the row has as many scores above it as the block maxima have, which one count
    over the output checks. Only the rows failing that test (and all rows of entmax-1.5, whose
    supports are larger) go through :func:`_refine`.

    Parameters
    ----------
    x2 : Tensor
        Scores ``(n, w)`` in working precision, unit stride along the last dimension,
        ``w >= _PRUNE_MIN_WIDTH``. Never modified.
    entmax : bool
        Entmax-1.5 if true, sparsemax otherwise.

    Returns
    -------
    Tensor
        Output ``(n, w)`` in working precision.
    """
    w = x2.shape[1]
    block = _block_size(w)
    nb = w // block
    cut = nb * block
    bm = _block_max(x2, block)
    m = bm.amax(dim=1, keepdim=True)
    if cut < w:
        m = torch.maximum(m, x2[:, cut:].amax(dim=1, keepdim=True))
    scale = 0.5 if entmax else 1.0
    nan_rows = m - m  # 0, or NaN for rows with a non-finite maximum
    bz = (bm - m).mul_(scale)
    lower, final, done, k = _block_passes(bz, entmax)
    if entmax:
        tau, z = _refine(x2, m, bz, lower, entmax, block)
        tau = tau + nan_rows
        if z is None:
            y = _apply_threshold(x2, m, tau, entmax)
        else:
            y = z.sub_(tau).clamp_(min=0.0)
        return y.square_()
    y = _apply_threshold(x2, m, torch.where(done, final, lower) + nan_rows, entmax)
    exact = done & (_count_positive(y) == k)
    exact |= torch.isnan(nan_rows)
    redo = (~exact).view(-1).nonzero().view(-1)
    if redo.numel() > 0:
        xs, ms = x2.index_select(0, redo), m.index_select(0, redo)
        tau_s, z_s = _refine(
            xs, ms, bz.index_select(0, redo), lower.index_select(0, redo), entmax, block
        )
        if z_s is None:
            y_s = _apply_threshold(xs, ms, tau_s, entmax)
        else:
            y_s = z_s.sub_(tau_s).clamp_(min=0.0)
        y.index_copy_(0, redo, y_s)
    return y
