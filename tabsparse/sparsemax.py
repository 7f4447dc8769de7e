"""Sparsemax and entmax-1.5: sparse mappings onto the probability simplex.

Sparsemax (Martins & Astudillo, 2016) is the Euclidean projection of a score vector onto the
probability simplex, ``sparsemax(z) = [z - tau]_+`` with the threshold ``tau`` chosen so that the
output sums to one. Entmax-1.5 (Peters, Niculae & Martins, 2019) is ``[z / 2 - tau]_+ ** 2``.

Algorithm
---------
Both mappings reduce to finding the threshold ``tau``, the root of the convex, decreasing,
piecewise smooth function ``f(tau) = sum_j g([z_j - tau]_+) - 1`` (on ``z - max z``, so that
large offsets cost no precision). The textbook algorithm sorts each row (``O(d log d)``); it is
used here only for tiny inputs (fewer operations) and as the exact fallback. Otherwise:

* Sparsemax uses the Michelot / Newton fixed point ``tau <- (sum_{z > tau} z - 1) / #{z > tau}``
  started from a lower bound of ``tau``; every iterate is again a lower bound. Entmax-1.5 uses
  Newton steps from the left (also lower bounds). A checked pass also computes the exact
  threshold of the current support in closed form (linear for sparsemax, a quadratic for
  entmax-1.5) and accepts it when every score of that support stays above it: the support is
  then final and the threshold exact.
* Wide rows (``d >= 256``) are cut into strided blocks of 8 or 16 scores. The block maxima are a
  subset of the scores, so the iterates of the search on them are lower bounds of ``tau``. For
  sparsemax the threshold of the block maxima is tried as is: it is exact whenever the row has
  as many scores above it as the block maxima have, which one count over the output checks. Rows
  failing that test (and all rows of entmax-1.5, whose supports are larger) are searched from
  the bound, on the gathered candidate blocks when they are few enough, else at full width.
* On CPU the search stops as soon as every row converged and keeps working only on the rows
  not converged yet (host synchronisations are free there); on other devices a fixed number of
  passes runs with a single synchronisation at the end. Rows still not exact after the pass cap
  (adversarial inputs) are solved by the sort-based algorithm: the result is always exact.
* Everything is plain eager PyTorch; no compilation is needed or used.

The backward passes are closed form and use only the saved output ``y``: for sparsemax
``dx = s * (v - sum(s * v) / sum(s))`` with ``s = [y > 0]``; for entmax-1.5
``dx = g * v - g * sum(g * v) / sum(g)`` with ``g = sqrt(y)``.

Edge cases (documented behaviour)
---------------------------------
* Any shape and any ``dim`` (negative dims and dims of size one included).
* ``float16`` / ``bfloat16`` inputs are computed in ``float32`` and returned in the input dtype.
* A row containing NaN gives a row of NaN (like :func:`torch.softmax`).
* ``-inf`` entries get exactly 0 output and 0 gradient.
* A row of only ``-inf`` gives a row of NaN (like :func:`torch.softmax`).
* A row containing ``+inf`` gives a row of NaN (like :func:`torch.softmax`).
* Empty tensors give empty outputs. The input is never modified.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Entmax15", "Sparsemax", "entmax15", "sparsemax"]

#: Inputs with ``numel * log2(d)`` up to this use the sort-based algorithm (fewer operations).
_SORT_MAX_WORK = 1 << 17
#: Width of the blocks used to prune candidates: narrow blocks below this row width, wide above.
_WIDE_BLOCK_FROM = 2048
#: Rows at least this wide are pruned with block maxima before the threshold search.
_PRUNE_MIN_WIDTH = 256
#: Pass cap of the adaptive (CPU) threshold search before the sort-based fallback.
_MAX_PASSES_ADAPTIVE = 24
#: Number of passes of the fixed (synchronisation-free, non-CPU) threshold search.
_MAX_PASSES_FIXED = 10
#: From this pass on, the narrow search drops the rows that converged once they are 3/4 of all.
#: Dropping them costs about two passes (index lists, gathers), so it only pays for the rare
#: inputs whose search runs long: typical attention scores converge in 5 or 6 passes.
_NARROW_PRUNE_FROM = 6
#: The narrow sparsemax search starts at ``max - _NARROW_START`` (see
#: :func:`_narrow_sparsemax_threshold`); any start is exact, this one saves passes.
_NARROW_START = 0.7
#: First tested pass of a search started from ``max - 1`` (earlier ones rarely converge).
_FIRST_CHECK = 3
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

# --------------------------------------------------------------------------------------------
# Sort-based reference thresholds (exact, used as fallback for unconverged rows)
# --------------------------------------------------------------------------------------------


def _sparsemax_tau_sort(z: Tensor) -> Tensor:
    """Sort-based sparsemax threshold along the last dimension.

    Parameters
    ----------
    z : Tensor
        Scores of shape ``(n, w)``; ``-inf`` entries are allowed.

    Returns
    -------
    Tensor
        Threshold ``tau`` of shape ``(n, 1)``.
    """
    w = z.shape[-1]
    zs = torch.sort(z, dim=-1, descending=True).values
    csum = zs.cumsum(dim=-1)
    k = torch.arange(1, w + 1, device=z.device, dtype=z.dtype)
    cond = 1.0 + k * zs > csum
    kk = cond.sum(dim=-1, keepdim=True).clamp_(min=1).to(z.dtype)
    zero = torch.zeros((), dtype=z.dtype, device=z.device)
    ssum = torch.where(cond, zs, zero).sum(dim=-1, keepdim=True)
    return (ssum - 1.0) / kk


def _entmax15_tau_sort(u: Tensor) -> Tensor:
    """Sort-based entmax-1.5 threshold along the last dimension.

    Parameters
    ----------
    u : Tensor
        Half scores of shape ``(n, w)``; ``-inf`` entries are allowed.

    Returns
    -------
    Tensor
        Threshold ``tau`` of shape ``(n, 1)`` with ``sum([u - tau]_+ ** 2) == 1``.
    """
    w = u.shape[-1]
    us = torch.sort(u, dim=-1, descending=True).values
    k = torch.arange(1, w + 1, device=u.device, dtype=u.dtype)
    zero = torch.zeros((), dtype=u.dtype, device=u.device)
    finite = torch.isfinite(us)
    usf = torch.where(finite, us, zero)
    mean = usf.cumsum(dim=-1) / k
    msq = (usf * usf).cumsum(dim=-1) / k
    delta = (1.0 - k * (msq - mean * mean)) / k
    tau_k = mean - torch.sqrt(delta.clamp(min=0.0))
    cond = (tau_k <= us) & finite
    kk = cond.sum(dim=-1, keepdim=True).clamp_(min=1).to(u.dtype)
    s1 = torch.where(cond, us, zero).sum(dim=-1, keepdim=True)
    s2 = torch.where(cond, us * us, zero).sum(dim=-1, keepdim=True)
    m = s1 / kk
    dl = (1.0 - (s2 - s1 * m)) / kk
    return m - torch.sqrt(dl.clamp(min=0.0))


# --------------------------------------------------------------------------------------------
# Sort-free threshold search
# --------------------------------------------------------------------------------------------


# A step of the threshold search: (scores, tau, scratch, check) -> (done, final, next, k).
_Step = Callable[
    [Tensor, Tensor, Tensor, bool],
    tuple["Tensor | None", Tensor, Tensor, "Tensor | None"],
]


def _sparsemax_step(
    z: Tensor, tau: Tensor, buf: Tensor, check: bool
) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None]:
    """One Michelot pass for sparsemax, optionally testing the new iterate for exactness.

    Parameters
    ----------
    z : Tensor
        Scores ``(m, w)`` with ``z - tau <= 1`` (true when ``tau >= max(z) - 1``).
    tau : Tensor
        Current lower bound of the threshold, ``(m, 1)``.
    buf : Tensor
        Scratch buffers ``(2, m, w)``.
    check : bool
        Whether to test the new iterate.

    Returns
    -------
    done : Tensor or None
        Rows whose new iterate is exact (every score of the support ``{z > tau}`` stays above
        it, so the support is final) or that are NaN; None when not checked.
    final : Tensor
        The new iterate (the threshold to keep where done).
    nxt : Tensor
        Next iterate (the same: Michelot iterates are lower bounds).
    k : Tensor or None
        Support size at ``tau`` (None when not checked).
    """
    r = buf[0]
    torch.sub(z, tau, out=r)
    r.clamp_(min=0.0)
    s = r.sum(dim=-1, keepdim=True).sub_(1.0)
    if not check:
        r.ceil_()  # 0 < z - tau <= 1 on the support, so ceil gives the indicator
        k = r.sum(dim=-1, keepdim=True)
        nxt = torch.addcdiv(tau, s, k)
        return None, nxt, nxt, None
    c = buf[1]
    torch.ceil(r, out=c)
    k = c.sum(dim=-1, keepdim=True)
    # Smallest positive r: support entries map to r - 2 < 0, the others to 0.
    torch.add(r, c, alpha=-2.0, out=c)
    rmin = c.amin(dim=-1, keepdim=True).add_(2.0)
    step = s.div_(k)
    nxt = tau + step
    done = (rmin > step).logical_or_(torch.isnan(nxt))
    return done, nxt, nxt, k


def _entmax15_step(
    u: Tensor, tau: Tensor, buf: Tensor, check: bool
) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None]:
    """One Newton pass for entmax-1.5, optionally with the exact closed form on the support.

    Parameters
    ----------
    u : Tensor
        Half scores ``(m, w)`` with ``u - tau <= 1``.
    tau : Tensor
        Current lower bound of the threshold, ``(m, 1)``.
    buf : Tensor
        Scratch buffers ``(2, m, w)``.
    check : bool
        Whether to compute the closed-form threshold of the support and test it.

    Returns
    -------
    done : Tensor or None
        Rows where the closed-form threshold of the support is exact, or NaN rows; None when
        not checked.
    final : Tensor
        Closed-form threshold of the current support (``nxt`` when not checked).
    nxt : Tensor
        Newton iterate (a lower bound of the threshold).
    k : Tensor or None
        Support size at ``tau`` (None when not checked).
    """
    r, tmp = buf[0], buf[1]
    torch.sub(u, tau, out=r)
    r.clamp_(min=0.0)
    s1 = r.sum(dim=-1, keepdim=True)
    torch.mul(r, r, out=tmp)
    s2 = tmp.sum(dim=-1, keepdim=True)
    nxt = torch.addcdiv(tau, s2.sub_(1.0), s1, value=0.5)
    if not check:
        return None, nxt, nxt, None
    torch.ceil(r, out=tmp)
    k = tmp.sum(dim=-1, keepdim=True)
    # Smallest positive r: support entries map to r - 2 < 0, the others to 0.
    torch.add(r, tmp, alpha=-2.0, out=tmp)
    rmin = tmp.amin(dim=-1, keepdim=True).add_(2.0)
    # Exact root of sum_{support} (r - t)^2 = 1 (the smaller one), relative to tau.
    disc = (s1 * s1).sub_(k * s2).clamp_(min=0.0)  # s2 already holds s2 - 1
    step = (s1 - disc.sqrt_()).div_(k)
    final = tau + step
    done = (rmin > step).logical_or_(torch.isnan(final))
    return done, final, nxt, k


def _search(
    z: Tensor,
    tau: Tensor,
    step: _Step,
    fallback: Callable[[Tensor], Tensor],
    adaptive: bool,
    first_check: int,
) -> Tensor:
    """Run a threshold search to exactness, with a sort-based fallback.

    Parameters
    ----------
    z : Tensor
        Scores ``(n, w)`` (contiguous), with ``max(z) - tau <= 1`` on every row.
    tau : Tensor
        Starting lower bound of the threshold, ``(n, 1)``.
    step : callable
        One pass, see :func:`_sparsemax_step`.
    fallback : callable
        Exact sort-based threshold for the rows still unconverged after the pass cap.
    adaptive : bool
        If true (CPU), stop as soon as every row converged and keep working only on the rows
        not yet converged. If false, run a fixed number of passes with a single host
        synchronisation at the end.
    first_check : int
        First pass whose iterate is tested (earlier ones rarely converge from a poor start).

    Returns
    -------
    Tensor
        Exact threshold ``(n, 1)``.
    """
    n = z.shape[0]
    if n == 0:
        return tau.clone()
    buf = torch.empty((2, *z.shape), dtype=z.dtype, device=z.device)
    # Unchecked passes: almost no row can be exact yet, so skip the bookkeeping.
    for _ in range(first_check - 1):
        _, _, tau, _ = step(z, tau, buf, False)
    out = tau.clone()
    settled = torch.zeros((n, 1), dtype=torch.bool, device=z.device)
    rows: Tensor | None = None  # original row of each working row (None: identity)
    zc, tc = z, tau
    max_passes = _MAX_PASSES_ADAPTIVE if adaptive else _MAX_PASSES_FIXED
    for _ in range(first_check - 1, max_passes):
        m = zc.shape[0]
        done, final, tc, _ = step(zc, tc, buf[:, :m], True)
        assert done is not None
        if not adaptive:
            out = torch.where(done, final, out)
            settled |= done
            continue
        if rows is None:
            out = torch.where(done, final, out)
        else:
            out.index_copy_(0, rows, torch.where(done, final, out.index_select(0, rows)))
        keep = (~done).view(-1).nonzero().view(-1)
        n_keep = keep.numel()
        if n_keep == 0:
            return out
        if 4 * n_keep <= 3 * m:
            zc = zc.index_select(0, keep)
            tc = tc.index_select(0, keep)
            rows = keep if rows is None else rows.index_select(0, keep)
            settled = torch.zeros((n_keep, 1), dtype=torch.bool, device=z.device)
        else:
            settled = done
    left = (~settled).view(-1).nonzero().view(-1)  # the only host synchronisation
    if left.numel() > 0:
        tau_left = fallback(zc.index_select(0, left))
        dest = left if rows is None else rows.index_select(0, left)
        out.index_copy_(0, dest, tau_left)
    return out


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


def _is_adaptive(device: torch.device) -> bool:
    """Whether the threshold search may synchronise with the host after every pass (CPU)."""
    return device.type == "cpu"


def _narrow_sparsemax_threshold(z: Tensor) -> Tensor:
    """Sparsemax threshold of narrow rows (``w < 256``) on the CPU: plain Michelot passes.

    A pass maps ``tau`` to ``(sum_A z - 1) / |A|`` over ``A = {z > tau}``, which is a lower
    bound of the threshold for *any* set ``A`` (the threshold is the largest such mean over
    the top-``k`` sets, and ``A``'s sum is at most that of the top ``|A|``). So the search may
    start from a guess: ``max - _NARROW_START`` (0.7 below the maximum, where the first pass
    finds fewer candidates than from the classic ``max - 1`` and attention scores need a pass
    less: 48 instead of 56 passes on nine captured training batches). From the first iterate
    on the iterates rise and the supports ``{z > tau}`` shrink; once a pass leaves the support
    size of every row unchanged, the support is final and the iterate just computed is exact
    (also after the first pass: from above or below, equal sizes of nested sets mean equal
    sets). Each pass is five operations over the scores plus a comparison of
    the support sizes; once at most a quarter of the rows still move, the search goes on with
    those rows only. Rows still moving after ``_MAX_PASSES_ADAPTIVE`` passes take the sort-based
    threshold.

    Parameters
    ----------
    z : Tensor
        Scores ``(n, w)``, contiguous, row maxima 0 (rows with NaN allowed).

    Returns
    -------
    Tensor
        Threshold ``(n, 1)`` (meaningless for rows with NaN: the caller makes those NaN).
    """
    nan_rows = torch.isnan(z[:, :1])  # a NaN anywhere made the row maximum, so all of z, NaN
    if bool(nan_rows.any()):  # keep NaN out of the convergence test
        z = torch.where(nan_rows, torch.zeros((), dtype=z.dtype, device=z.device), z)
    one = torch.ones((), dtype=z.dtype, device=z.device)
    ones = torch.ones((z.shape[1], 1), dtype=z.dtype, device=z.device)
    tau = out = torch.full((), -_NARROW_START, dtype=z.dtype, device=z.device)  # 0-d: no column
    r = torch.empty_like(z)
    rows: Tensor | None = None  # the rows of z still searched (None: all)
    k = k_prev = None
    for p in range(_MAX_PASSES_ADAPTIVE):
        k_prev, (tau, k) = k, _michelot_pass(z, tau, r, one, ones)
        if k_prev is None:
            continue
        if torch.equal(k, k_prev):  # no support moved: every iterate is exact
            return tau if rows is None else out.index_copy_(0, rows, tau)
        if p >= _NARROW_PRUNE_FROM:  # go on with the rows still moving once they are few
            moving = (k != k_prev).view(-1).nonzero().view(-1)
            if 4 * moving.numel() <= z.shape[0]:
                if rows is None:
                    out = tau
                    rows = moving
                else:
                    out.index_copy_(0, rows, tau)
                    rows = rows.index_select(0, moving)
                z, tau = z.index_select(0, moving), tau.index_select(0, moving)
                k = k.index_select(0, moving)
                r = r[: moving.numel()]
    if k is None or k_prev is None:  # a cap of one pass: nothing is known to be final
        return _sparsemax_tau_sort(z)
    left = (k != k_prev).view(-1).nonzero().view(-1)
    tau.index_copy_(0, left, _sparsemax_tau_sort(z.index_select(0, left)))
    return tau if rows is None else out.index_copy_(0, rows, tau)


def _michelot_pass(
    z: Tensor, tau: Tensor, r: Tensor, one: Tensor, ones: Tensor
) -> tuple[Tensor, Tensor]:
    """``tau <- (sum_{z > tau} z - 1) / #{z > tau}``; returns it and the support sizes.

    ``one`` is a 0-d tensor holding 1 (subtracting a Python number converts it every time),
    ``ones`` a column of ``w`` ones: the row sums are matrix-vector products, which take 40%
    less time than ``sum(dim=1)`` over rows this narrow."""
    torch.sub(z, tau, out=r).clamp_(min=0.0)
    s = torch.mm(r, ones)  # sum(z - tau) over the support
    k = torch.mm(r.ceil_(), ones)  # 0 < z - tau <= 1 on the support
    return torch.addcdiv(tau, s.sub_(one), k), k


def _threshold(z: Tensor, entmax: bool) -> Tensor:
    """Exact threshold of each row of ``z`` (full-width search).

    Parameters
    ----------
    z : Tensor
        Scores ``(n, w)``, contiguous, row maxima 0 (NaN rows allowed). For entmax-1.5 these
        are the half scores ``u``.
    entmax : bool
        Entmax-1.5 threshold if true, sparsemax threshold otherwise.

    Returns
    -------
    Tensor
        Threshold ``(n, 1)``.
    """
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    fallback = _entmax15_tau_sort if entmax else _sparsemax_tau_sort
    n, w = z.shape
    if not entmax and w < _PRUNE_MIN_WIDTH and _is_adaptive(z.device):
        return _narrow_sparsemax_threshold(z)
    if w >= _PRUNE_MIN_WIDTH:
        tau = _block_bound(_block_max(z, _block_size(w)), entmax)  # better than max - 1
    else:
        tau = torch.full((n, 1), -1.0, dtype=z.dtype, device=z.device)
    first = 1 if w >= _PRUNE_MIN_WIDTH else _FIRST_CHECK
    return _search(z, tau, step, fallback, _is_adaptive(z.device), first)


# --------------------------------------------------------------------------------------------
# Forward / backward
# --------------------------------------------------------------------------------------------


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the computation runs in: float32 for half precision, else ``dtype``."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _restore(y: Tensor, shape: torch.Size, dim: int, dtype: torch.dtype) -> Tensor:
    """Rows ``(n, d)`` back to the input layout (contiguous, like softmax) and dtype."""
    out = y.view(shape).movedim(-1, dim)
    if dim != len(shape) - 1:
        out = out.contiguous()
    return out.to(dtype)


def _forward(x: Tensor, dim: int, entmax: bool) -> Tensor:
    """Sparsemax or entmax-1.5 of ``x`` along ``dim``, in the dtype of ``x``.

    Parameters
    ----------
    x : Tensor
        Input scores (never modified).
    dim : int
        Non-negative dimension.
    entmax : bool
        Entmax-1.5 if true, sparsemax otherwise.

    Returns
    -------
    Tensor
        Output with the shape and dtype of ``x``.
    """
    if x.numel() == 0:
        return torch.zeros_like(x)
    xt = x.movedim(dim, -1)
    shape = xt.shape
    d = shape[-1]
    x2 = xt.reshape(-1, d).to(_work_dtype(x.dtype))
    if x2.stride(-1) != 1 or (x2.shape[0] > 1 and x2.stride(0) != d):
        x2 = x2.contiguous()
    small = x2.numel() * math.log2(max(d, 2)) <= _SORT_MAX_WORK
    if d >= _PRUNE_MIN_WIDTH and not small and _is_adaptive(x2.device):
        return _restore(_wide_forward(x2, entmax), shape, dim, x.dtype)
    m = x2.amax(dim=1, keepdim=True)
    z = torch.sub(x2, m)
    if entmax:  # half scores u = (x - max) / 2
        z.mul_(0.5)
    if small:  # a handful of operations: sorting beats the iterative search
        tau = _entmax15_tau_sort(z) if entmax else _sparsemax_tau_sort(z)
    else:
        tau = _threshold(z, entmax)
    tau = tau + (m - m)  # NaN for rows with a non-finite maximum (NaN, +inf, all -inf)
    z.sub_(tau).clamp_(min=0.0)
    if entmax:
        z.square_()
    return _restore(z, shape, dim, x.dtype)


def _sparsemax_vjp(y: Tensor, grad: Tensor, dim: int, out: Tensor, s: Tensor) -> None:
    """Write ``s * (v - mean_s(v))`` into ``out`` using ``s`` as scratch (``s = [y > 0]``)."""
    torch.sign(y, out=s)  # support indicator (y >= 0)
    torch.mul(grad, s, out=out)
    mean = out.sum(dim=dim, keepdim=True).div_(s.sum(dim=dim, keepdim=True))
    out.addcmul_(s, mean, value=-1.0)


def _entmax15_vjp(y: Tensor, grad: Tensor, dim: int, out: Tensor, g: Tensor) -> None:
    """Write ``g v - g sum(g v) / sum(g)`` (``g = sqrt(y)``) into ``out``, ``g`` as scratch."""
    # sqrt(y), avoiding torch.sqrt on zeros (a slow path of the vectorised CPU kernel, and
    # entmax outputs are mostly zeros): sqrt(max(y, tiny)) - sqrt(tiny) is exactly 0 at 0
    # and equal to sqrt(y) (to rounding) elsewhere.
    tiny = torch.finfo(y.dtype).tiny
    torch.clamp(y, min=tiny, out=g).sqrt_().sub_(math.sqrt(tiny))
    torch.mul(grad, g, out=out)
    q = out.sum(dim=dim, keepdim=True).div_(g.sum(dim=dim, keepdim=True))
    out.addcmul_(g, q, value=-1.0)


def _backward(y: Tensor, grad: Tensor, dim: int, entmax: bool) -> Tensor:
    """Closed-form vector-Jacobian product, in float32 for half precision.

    Large inputs reduced along their last dimension are processed in row chunks that share one
    small scratch buffer: fresh large buffers cost page faults.
    """
    dtype = grad.dtype
    if dtype in (torch.float16, torch.bfloat16):
        y, grad = y.float(), grad.float()
    else:
        y = y.to(dtype)
    vjp = _entmax15_vjp if entmax else _sparsemax_vjp
    last = dim == y.dim() - 1 and y.is_contiguous() and grad.is_contiguous()
    d = y.shape[-1] if y.dim() > 0 else 1
    if not last or y.numel() <= _SCRATCH_ELEMENTS or d == 0:
        out = torch.empty_like(y, memory_format=torch.contiguous_format)
        vjp(y, grad, dim, out, torch.empty_like(out))
        return out.to(dtype)
    y2, g2 = y.view(-1, d), grad.view(-1, d)
    out = torch.empty_like(y2)
    rows = max(1, _SCRATCH_ELEMENTS // d)
    scratch = torch.empty((min(rows, y2.shape[0]), d), dtype=y.dtype, device=y.device)
    for start in range(0, y2.shape[0], rows):
        stop = min(start + rows, y2.shape[0])
        vjp(y2[start:stop], g2[start:stop], 1, out[start:stop], scratch[: stop - start])
    return out.view(y.shape).to(dtype)


class _SparsemaxFunction(torch.autograd.Function):
    """Autograd function for sparsemax with the closed-form backward."""

    @staticmethod
    def forward(x: Tensor, dim: int) -> Tensor:  # type: ignore[override]
        return _forward(x, dim, entmax=False)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _backward(y, grad_out, ctx.dim, entmax=False), None


class _Entmax15Function(torch.autograd.Function):
    """Autograd function for entmax-1.5 with the closed-form backward."""

    @staticmethod
    def forward(x: Tensor, dim: int) -> Tensor:  # type: ignore[override]
        return _forward(x, dim, entmax=True)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _backward(y, grad_out, ctx.dim, entmax=True), None


def _apply(fn: type[torch.autograd.Function], x: Tensor, dim: int) -> Any:
    """``fn.apply(x, dim)`` without the signature inspection that ``Function.apply`` does on
    every call for functions with ``setup_context`` (tens of microseconds, three calls per
    TabNet step); the public ``apply`` where functorch transforms need it."""
    if torch._C._are_functorch_transforms_active():
        return fn.apply(x, dim)
    return super(torch.autograd.Function, fn).apply(x, dim)  # type: ignore[misc]


def _check(x: Tensor, dim: int) -> int:
    """Validate the input and return ``dim`` as a non-negative index."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating point tensor, got dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension, got a 0-d tensor")
    ndim = x.dim()
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} is out of range for a tensor with {ndim} dimensions")
    return dim % ndim


# --------------------------------------------------------------------------------------------
# Branch-free (sort-based) forms: exported and compiled graphs
# --------------------------------------------------------------------------------------------


def sparsemax_sorted(x: Tensor) -> Tensor:
    """Sparsemax along the last dimension by sorting: no data- or size-dependent branches.

    Parameters
    ----------
    x : Tensor
        Floating point scores ``(..., d)`` with finite entries.

    Returns
    -------
    Tensor
        ``[x - tau]_+`` with ``tau`` such that each row sums to one; same shape and dtype.

    Notes
    -----
    With the row sorted in decreasing order ``z_(1) >= ... >= z_(d)``, the support is the
    ``k*`` largest scores, where ``k*`` counts the ``k`` with ``1 + k z_(k) > z_(1) + ... +
    z_(k)`` (these ``k`` form a prefix), and ``tau = (z_(1) + ... + z_(k*) - 1) / k*``. Tied
    scores share one value of the condition, so ties are never split. Scores are shifted by the
    row maximum first, which changes nothing mathematically and keeps the sums small.

    Examples
    --------
    >>> sparsemax_sorted(torch.tensor([[1.0, 0.5, -1.0]]))
    tensor([[0.7500, 0.2500, 0.0000]])
    """
    d = x.shape[-1]
    z = x - x.amax(dim=-1, keepdim=True)
    zs = torch.sort(z, dim=-1, descending=True).values
    csum = zs.cumsum(dim=-1)
    k = torch.arange(1, d + 1, dtype=z.dtype, device=z.device)
    size = (1.0 + k * zs > csum).sum(dim=-1, keepdim=True)  # >= 1: the maximum always counts
    tau = (csum.gather(-1, size - 1) - 1.0) / size.to(z.dtype)
    return (z - tau).clamp(min=0.0)


def entmax15_sorted(x: Tensor) -> Tensor:
    """Entmax-1.5 along the last dimension by sorting: no data- or size-dependent branches.

    Parameters
    ----------
    x : Tensor
        Floating point scores ``(..., d)`` with finite entries.

    Returns
    -------
    Tensor
        ``[x / 2 - tau]_+ ** 2`` with ``tau`` such that each row sums to one.

    Notes
    -----
    On the half scores ``u = (x - max x) / 2`` sorted in decreasing order, the candidate
    threshold of support size ``k`` is the smaller root of ``sum_{i <= k} (u_(i) - t) ** 2 =
    1``: ``t_k = m_k - sqrt(max(0, (1 - k (q_k - m_k ** 2)) / k))`` with ``m_k``, ``q_k`` the
    means of the ``k`` largest ``u`` and of their squares. The support size is the number of
    ``k`` with ``t_k <= u_(k)``, and ``tau`` is the candidate of that size.

    Examples
    --------
    >>> entmax15_sorted(torch.tensor([[2.0, 0.5, -1.0]]))
    tensor([[0.9496, 0.0504, 0.0000]])
    """
    d = x.shape[-1]
    u = (x - x.amax(dim=-1, keepdim=True)) * 0.5
    us = torch.sort(u, dim=-1, descending=True).values
    k = torch.arange(1, d + 1, dtype=u.dtype, device=u.device)
    mean = us.cumsum(dim=-1) / k
    mean_sq = (us * us).cumsum(dim=-1) / k
    delta = (1.0 - k * (mean_sq - mean * mean)) / k
    tau_k = mean - delta.clamp(min=0.0).sqrt()
    size = (tau_k <= us).sum(dim=-1, keepdim=True)  # >= 1: t_1 = u_(1) - 1
    tau = tau_k.gather(-1, size - 1)
    return (u - tau).clamp(min=0.0).square()


def _traced(fn: Callable[[Tensor], Tensor], x: Tensor, dim: int) -> Tensor:
    """``fn`` (a sort-based form) along ``dim`` in float32 or wider, back in the dtype of
    ``x``: what :func:`sparsemax` and :func:`entmax15` run while ``torch.compile`` or
    ``torch.export`` traces them. The library's own search decides on the host how many passes
    a batch needs, which a traced graph cannot do; the sort-based form has no branches, and
    autograd through its closed-form threshold gives the exact Jacobian (for sparsemax: each
    score of the support moves the threshold by ``1 / |support|``)."""
    return fn(x.movedim(dim, -1).to(_work_dtype(x.dtype))).movedim(-1, dim).to(x.dtype)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def sparsemax(x: Tensor, dim: int = -1) -> Tensor:
    """Sparsemax: Euclidean projection of ``x`` onto the probability simplex along ``dim``.

    Parameters
    ----------
    x : Tensor
        Floating point scores of any shape.
    dim : int, default -1
        Dimension along which the output sums to one.

    Returns
    -------
    Tensor
        Sparse probabilities with the shape and dtype of ``x``.

    Notes
    -----
    Exact (equal to the sort-based algorithm of Martins & Astudillo up to floating point
    rounding) but sort-free in the common case. Rows containing NaN or ``+inf``, and rows of
    only ``-inf``, give NaN rows; ``-inf`` entries get zero probability and zero gradient.
    ``float16`` / ``bfloat16`` inputs are computed in float32. The input is never modified.

    Examples
    --------
    >>> sparsemax(torch.tensor([1.0, 0.5, -1.0]))
    tensor([0.7500, 0.2500, 0.0000])
    """
    d = _check(x, dim)
    if torch.compiler.is_compiling():
        return _traced(sparsemax_sorted, x, d)
    out: Tensor = _apply(_SparsemaxFunction, x, d)
    return out


def entmax15(x: Tensor, dim: int = -1) -> Tensor:
    """Entmax-1.5 of ``x`` along ``dim``: ``[x / 2 - tau]_+ ** 2``, summing to one.

    Parameters
    ----------
    x : Tensor
        Floating point scores of any shape.
    dim : int, default -1
        Dimension along which the output sums to one.

    Returns
    -------
    Tensor
        Sparse probabilities with the shape and dtype of ``x``.

    Notes
    -----
    Exact and sort-free in the common case; same edge-case behaviour as :func:`sparsemax`.

    Examples
    --------
    >>> entmax15(torch.tensor([2.0, 0.5, -1.0]))
    tensor([0.9496, 0.0504, 0.0000])
    """
    d = _check(x, dim)
    if torch.compiler.is_compiling():
        return _traced(entmax15_sorted, x, d)
    out: Tensor = _apply(_Entmax15Function, x, d)
    return out


class Sparsemax(nn.Module):
    """Module wrapper of :func:`sparsemax`.

    Parameters
    ----------
    dim : int, default -1
        Dimension along which the output sums to one.
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        """Apply sparsemax along ``self.dim``.

        Parameters
        ----------
        x : Tensor
            Floating point scores.

        Returns
        -------
        Tensor
            Sparse probabilities shaped like ``x``.
        """
        return sparsemax(x, dim=self.dim)

    def extra_repr(self) -> str:
        """Describe the module configuration."""
        return f"dim={self.dim}"


class Entmax15(nn.Module):
    """Module wrapper of :func:`entmax15`.

    Parameters
    ----------
    dim : int, default -1
        Dimension along which the output sums to one.
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        """Apply entmax-1.5 along ``self.dim``.

        Parameters
        ----------
        x : Tensor
            Floating point scores.

        Returns
        -------
        Tensor
            Sparse probabilities shaped like ``x``.
        """
        return entmax15(x, dim=self.dim)

    def extra_repr(self) -> str:
        """Describe the module configuration."""
        return f"dim={self.dim}"
