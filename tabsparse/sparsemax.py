"""Sparsemax and entmax-1.5: sparse mappings onto the probability simplex.

Sparsemax (Martins & Astudillo, 2016) is the Euclidean projection of a score vector onto the
probability simplex, ``sparsemax(z) = [z - tau]_+`` with the threshold ``tau`` chosen so that the
output sums to one. Entmax-1.5 (Peters, Niculae & Martins, 2019) is ``[z / 2 - tau]_+ ** 2``.

Algorithm
---------
Both mappings reduce to finding the threshold ``tau``, the root of the convex, decreasing,
piecewise smooth function ``f(tau) = sum_j g([z_j - tau]_+) - 1``. The textbook algorithm sorts
each row (``O(d log d)``). Here the root is found without sorting:

* Sparsemax uses the Michelot / Newton fixed point ``tau <- (sum_{z > tau} z - 1) / #{z > tau}``
  started from a lower bound of ``tau``. Every iterate is a lower bound and the iteration is exact
  as soon as the support ``{z > tau}`` stops changing, which is detected by the support size.
* Entmax-1.5 uses Newton steps from the left (every iterate is a lower bound). After each pass the
  exact threshold of the current support is computed in closed form (a quadratic) and accepted
  once every element of that support stays above it, which makes it the exact root.
* For wide rows, candidates are pruned first: the row is cut into blocks of 16, the threshold of
  the vector of block maxima is a lower bound of ``tau`` (a subset of the scores), so only blocks
  whose maximum exceeds it can hold the support; those blocks are gathered into a narrow matrix.
* On CPU the iteration works on the rows that have not converged yet and stops as soon as all
  have; on other devices a fixed number of passes runs without a host synchronisation. In both
  cases rows that are still not exact after the pass cap (adversarial inputs) are solved by the
  sort-based algorithm, so the result is always the exact one.

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

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Entmax15", "Sparsemax", "entmax15", "sparsemax"]

#: Width of the blocks used to prune candidates: narrow blocks below this row width, wide above.
_WIDE_BLOCK_FROM = 2048
#: Rows at least this wide are pruned with block maxima before the threshold search.
_PRUNE_MIN_WIDTH = 128
#: Pass cap of the adaptive (CPU) threshold search before the sort-based fallback.
_MAX_PASSES_ADAPTIVE = 24
#: Number of passes of the fixed (synchronisation-free, non-CPU) threshold search.
_MAX_PASSES_FIXED = 10
#: Passes run before the first convergence test (earlier ones rarely converge).
_FIRST_CHECK = 3
#: Passes of the search on the block maxima that give the lower bound used for pruning
#: (sparsemax, entmax-1.5).
_BOUND_PASSES = (4, 6)
#: Cost, in rows of full width, of searching the rows with many candidates separately.
_SPLIT_ROWS = 32

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


# A step of the threshold search: (scores, tau, k_prev, scratch, check) -> (done, final, next, k).
_Step = Callable[
    [Tensor, Tensor, "Tensor | None", Tensor, bool],
    tuple["Tensor | None", Tensor, Tensor, "Tensor | None"],
]


def _sparsemax_step(
    z: Tensor, tau: Tensor, k_prev: Tensor | None, buf: Tensor, check: bool
) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None]:
    """One Michelot pass for sparsemax.

    Parameters
    ----------
    z : Tensor
        Scores ``(m, w)`` with ``z - tau <= 1`` (true when ``tau >= max(z) - 1``).
    tau : Tensor
        Current lower bound of the threshold, ``(m, 1)``.
    k_prev : Tensor or None
        Support size at the previous iterate.
    buf : Tensor
        Scratch buffers ``(1, m, w)``.
    check : bool
        Whether to test convergence.

    Returns
    -------
    done : Tensor or None
        Rows whose support did not change (the iterate is exact) or that are NaN; None when
        not checked.
    final : Tensor
        The threshold to keep for the rows that are done.
    nxt : Tensor
        Next iterate.
    k : Tensor
        Support size at ``tau``.
    """
    r = buf[0]
    torch.sub(z, tau, out=r)
    r.clamp_(min=0.0)
    s = r.sum(dim=-1, keepdim=True)
    r.ceil_()  # 0 < z - tau <= 1 on the support, so ceil gives the indicator
    k = r.sum(dim=-1, keepdim=True)
    nxt = torch.addcdiv(tau, s.sub_(1.0), k)
    done = None
    if check and k_prev is not None:
        done = (k == k_prev).logical_or_(torch.isnan(nxt))
    return done, nxt, nxt, k


def _entmax15_step(
    u: Tensor, tau: Tensor, k_prev: Tensor | None, buf: Tensor, check: bool
) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None]:
    """One Newton pass for entmax-1.5, optionally with the exact closed form on the support.

    Parameters
    ----------
    u : Tensor
        Half scores ``(m, w)`` with ``u - tau <= 1``.
    tau : Tensor
        Current lower bound of the threshold, ``(m, 1)``.
    k_prev : Tensor or None
        Unused (common signature).
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
    del k_prev
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
    n_buf: int,
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
    n_buf : int
        Number of scratch planes the step needs.

    Returns
    -------
    Tensor
        Exact threshold ``(n, 1)``.
    """
    n = z.shape[0]
    if n == 0:
        return tau.clone()
    buf = torch.empty((n_buf, *z.shape), dtype=z.dtype, device=z.device)
    k: Tensor | None = None
    # Unchecked passes: almost no row can be exact yet, so skip the bookkeeping.
    for _ in range(_FIRST_CHECK - 1):
        _, _, tau, k = step(z, tau, k, buf, False)
    out = tau.clone()
    settled = torch.zeros((n, 1), dtype=torch.bool, device=z.device)
    rows: Tensor | None = None  # original row of each working row (None: identity)
    zc, tc = z, tau
    max_passes = _MAX_PASSES_ADAPTIVE if adaptive else _MAX_PASSES_FIXED
    for _ in range(_FIRST_CHECK - 1, max_passes):
        m = zc.shape[0]
        done, final, tc, k = step(zc, tc, k, buf[:, :m], True)
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
            k = k.index_select(0, keep) if k is not None else None
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


def _block_bound(bz: Tensor, entmax: bool) -> Tensor:
    """Lower bound of the threshold of whole rows from their block maxima.

    The block maxima are a subset of the scores of a row, so every lower bound of their own
    threshold (any iterate of the search started below it) is a lower bound of the threshold
    of the row. The bound is also raised to ``-1`` (``max - 1`` of the row).

    Parameters
    ----------
    bz : Tensor
        Block maxima ``(n, nb)`` in the coordinates of the search (row maximum at most 0).
    entmax : bool
        Entmax-1.5 threshold if true, sparsemax threshold otherwise.

    Returns
    -------
    Tensor
        Finite lower bound ``(n, 1)``, at least ``-1``.
    """
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    tau = bz.amax(dim=1, keepdim=True) - 1.0
    buf = torch.empty((2 if entmax else 1, *bz.shape), dtype=bz.dtype, device=bz.device)
    k: Tensor | None = None
    for _ in range(_BOUND_PASSES[int(entmax)]):
        _, _, tau, k = step(bz, tau, k, buf, False)
    return torch.fmax(tau, torch.full_like(tau, -1.0))  # fmax: NaN rows get -1


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
    if 2 * int(cost[n_live]) > n * width:
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


def _pruned_threshold(x2: Tensor, entmax: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """Row maxima and exact thresholds of wide rows, searching only candidate blocks (CPU).

    Parameters
    ----------
    x2 : Tensor
        Scores ``(n, w)`` in working precision, unit stride along the last dimension,
        ``w >= 8``. Never modified.
    entmax : bool
        Entmax-1.5 threshold (in half-score coordinates) if true, sparsemax otherwise.

    Returns
    -------
    m : Tensor
        Row maxima ``(n, 1)``.
    tau : Tensor
        Thresholds ``(n, 1)`` relative to ``m`` (of ``u = (x - m) / 2`` for entmax-1.5).
    z : Tensor or None
        The shifted scores when they had to be computed at full width (no pruning), else None.
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
    bz = (bm - m).mul_(scale)
    tau = _block_bound(bz, entmax)
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    fallback = _entmax15_tau_sort if entmax else _sparsemax_tau_sort
    n_buf = 2 if entmax else 1
    live = bz > tau
    cnt = live.sum(dim=1)
    n_live = _candidate_slots(cnt, nb, block, w - cut, w)
    if n_live is None:  # dense rows: search at full width from the bound
        z = torch.sub(x2, m).mul_(scale)
        return m, _search(z, tau, step, fallback, True, n_buf), z
    zc = _gather_candidates(x2, live, cnt, n_live, block).sub_(m).mul_(scale)
    wide = (cnt > n_live).nonzero().view(-1)
    if wide.numel() == 0:
        return m, _search(zc, tau, step, fallback, True, n_buf), None
    # Rows with more live blocks than slots are searched at full width; their truncated
    # candidate rows are replaced by a trivial row (a single 0) that converges at once.
    zc.index_fill_(0, wide, float("-inf"))
    zc[:, :1].index_fill_(0, wide, 0.0)
    out = _search(zc, tau.index_fill(0, wide, -1.0), step, fallback, True, n_buf)
    zw = torch.sub(x2.index_select(0, wide), m.index_select(0, wide)).mul_(scale)
    tau_w = _search(zw, tau.index_select(0, wide), step, fallback, True, n_buf)
    out.index_copy_(0, wide, tau_w)
    return m, out, None


def _is_adaptive(device: torch.device) -> bool:
    """Whether the threshold search may synchronise with the host after every pass (CPU)."""
    return device.type == "cpu"


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
    if w >= _PRUNE_MIN_WIDTH:
        tau = _block_bound(_block_max(z, _block_size(w)), entmax)  # better than max - 1
    else:
        tau = torch.full((n, 1), -1.0, dtype=z.dtype, device=z.device)
    return _search(z, tau, step, fallback, _is_adaptive(z.device), 2 if entmax else 1)


# --------------------------------------------------------------------------------------------
# Forward / backward
# --------------------------------------------------------------------------------------------


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
    work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    x2 = xt.reshape(-1, d).to(work)
    if x2.stride(-1) != 1 or (x2.shape[0] > 1 and x2.stride(0) != d):
        x2 = x2.contiguous()
    z: Tensor | None
    if d >= _PRUNE_MIN_WIDTH and _is_adaptive(x2.device):
        m, tau, z = _pruned_threshold(x2, entmax)
    else:
        m = x2.amax(dim=1, keepdim=True)
        z = torch.sub(x2, m)
        if entmax:  # half scores u = (x - max) / 2
            z.mul_(0.5)
        tau = _threshold(z, entmax)
    tau = tau + (m - m)  # NaN for rows with a non-finite maximum (NaN, +inf, all -inf)
    if z is None:
        z = torch.sub(x2, m)
        if entmax:
            torch.add(tau.neg(), z, alpha=0.5, out=z)
        else:
            z.sub_(tau)
    else:
        z.sub_(tau)
    z.clamp_(min=0.0)
    if entmax:
        z.square_()
    return z.view(shape).movedim(-1, dim).to(x.dtype)


def _sparsemax_backward(y: Tensor, grad: Tensor, dim: int) -> Tensor:
    """Closed-form vector-Jacobian product of sparsemax: ``s * (v - mean_s(v))``."""
    s = torch.sign(y)  # support indicator (y >= 0)
    gs = torch.mul(grad, s)  # becomes the result: two full-size buffers in all
    mean = gs.sum(dim=dim, keepdim=True).div_(s.sum(dim=dim, keepdim=True))
    return gs.addcmul_(s, mean, value=-1.0)


def _entmax15_backward(y: Tensor, grad: Tensor, dim: int) -> Tensor:
    """Closed-form vector-Jacobian product of entmax-1.5: ``g v - g sum(g v) / sum(g)``."""
    g = torch.sqrt(y)
    gv = torch.mul(grad, g)  # becomes the result
    q = gv.sum(dim=dim, keepdim=True).div_(g.sum(dim=dim, keepdim=True))
    return gv.addcmul_(g, q, value=-1.0)


def _backward(y: Tensor, grad: Tensor, dim: int, entmax: bool) -> Tensor:
    """Backward in float32 for half precision, in the dtype of ``grad`` otherwise."""
    dtype = grad.dtype
    if dtype in (torch.float16, torch.bfloat16):
        y, grad = y.float(), grad.float()
    else:
        y = y.to(dtype)
    fn = _entmax15_backward if entmax else _sparsemax_backward
    return fn(y, grad, dim).to(dtype)


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
    out: Tensor = _SparsemaxFunction.apply(x, d)
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
    out: Tensor = _Entmax15Function.apply(x, d)
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
