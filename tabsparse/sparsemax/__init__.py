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
* Everything is plain eager PyTorch; no compilation is needed or used. While ``torch.compile``
  or ``torch.export`` traces them, the functions run the branch-free sort-based forms
  :func:`sparsemax_sorted` / :func:`entmax15_sorted` instead.

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

Layout
------
``_api`` (the autograd Functions, :func:`sparsemax`, :func:`entmax15`, the modules),
``_forward_pass`` (rows, algorithm choice, output), ``_iterative`` (the threshold search),
``_pruning`` (wide rows), ``_sorted`` (the sort-based algorithms), ``_backward_pass`` (the
closed-form backward). The private names other tabsparse modules use are re-exported here.

Its modules:

======================  =========================================================
:mod:`._api`            the public API: autograd Functions, functions, modules
:mod:`._forward_pass`   the forward: any shape reduced to rows, threshold, output
:mod:`._backward_pass`  closed-form vector-Jacobian products from the output
:mod:`._iterative`      the sort-free threshold search (Michelot / Newton passes)
:mod:`._pruning`        wide rows: candidate pruning with strided block maxima
:mod:`._sorted`         the sort-based forms (no data-dependent branches)
======================  =========================================================
"""

from tabsparse.sparsemax._api import Entmax15, Sparsemax, entmax15, sparsemax

# Private names other tabsparse modules import from here (``as``: an explicit re-export).
from tabsparse.sparsemax._api import _Entmax15Function as _Entmax15Function
from tabsparse.sparsemax._api import _SparsemaxFunction as _SparsemaxFunction
from tabsparse.sparsemax._backward_pass import _backward as _backward
from tabsparse.sparsemax._backward_pass import _entmax15_vjp as _entmax15_vjp
from tabsparse.sparsemax._backward_pass import _sparsemax_vjp as _sparsemax_vjp
from tabsparse.sparsemax._forward_pass import _forward as _forward
from tabsparse.sparsemax._forward_pass import _work_dtype as _work_dtype
from tabsparse.sparsemax._sorted import entmax15_sorted, sparsemax_sorted

__all__ = [
    "Entmax15",
    "Sparsemax",
    "entmax15",
    "entmax15_sorted",
    "sparsemax",
    "sparsemax_sorted",
]
