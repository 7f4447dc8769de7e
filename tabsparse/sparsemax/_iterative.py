"""The sort-free threshold search: Michelot passes (sparsemax) and Newton passes (entmax-1.5).

Both mappings reduce to the root ``tau`` of a convex, decreasing function of the threshold. The
passes here start from a lower bound of ``tau`` and every iterate is again a lower bound; a
checked pass also computes the exact threshold of the current support in closed form and accepts
it when every score of that support stays above it. On CPU the search stops as soon as every row
converged and keeps working only on the rows not converged yet; on other devices a fixed number
of passes runs with one host synchronisation at the end. Rows not exact after the pass cap take
the sort-based threshold of :mod:`tabsparse.sparsemax._sorted`: the result is always exact.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from tabsparse.sparsemax._sorted import _sparsemax_tau_sort

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


def _is_adaptive(device: torch.device) -> bool:
    """Whether the threshold search may synchronise with the host after every pass (CPU)."""
    return device.type == "cpu"


def _narrow_sparsemax_threshold(z: Tensor) -> Tensor:
    """Sparsemax threshold of narrow rows (``w < 256``) on the CPU: plain Michelot passes.

    A pass maps ``tau`` to ``(sum_A z - 1) / |A|`` over ``A = {z > tau}``, which is a lower
    bound of the threshold for *any* set ``A`` (the threshold is the largest such mean over
    the top-``k`` sets, and ``A``'s sum is at most that of the top ``|A|``). So the search may
    start from a guess: ``max - _NARROW_START`` (0.7 below the maximum, where the first pass
    finds fewer candidates than from the classic ``max - 1``, which saves about a pass on
    attention scores). From the first iterate
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
    ``ones`` a column of ``w`` ones: the row sums are matrix-vector products, quicker than
    ``sum(dim=1)`` over rows this narrow."""
    torch.sub(z, tau, out=r).clamp_(min=0.0)
    s = torch.mm(r, ones)  # sum(z - tau) over the support
    k = torch.mm(r.ceil_(), ones)  # 0 < z - tau <= 1 on the support
    return torch.addcdiv(tau, s.sub_(one), k), k
