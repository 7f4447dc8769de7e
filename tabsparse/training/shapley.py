"""Shapley values of the interventional game over a table's columns: signed attributions that
add up to a row's output.

For a row ``x``, a background table ``B`` and a set ``S`` of columns (the players: one per input
column, each a group of places in the network's inputs), the game's value is::

    v(S) = mean_{b in B} f(x_S, b_{not S})

the mean output when the columns of ``S`` keep the row's values and all others take a background
row's (the *interventional* game: columns are replaced independently of the kept ones, so an
attribution says what the model does with a column, not how the column correlates with others).
Column ``i``'s Shapley value is the weighted mean of its marginal contributions::

    phi_i = sum_{S not containing i} |S|! (p - |S| - 1)! / p! * (v(S + i) - v(S))

They add up: ``v({}) + sum_i phi_i = v(all) = f(x)``, with ``v({}) = mean_b f(b)`` the *base
value*, the same for every row.

**Exact** (:func:`exact_shapley`): every coalition's value, ``2**p * len(B)`` evaluations of
``f`` per row, then the sum above in float64.

**Sampled** (:func:`sampled_shapley`): a random order of the columns and one background row
``b`` give a walk from ``b`` to ``x`` that switches one column at a time to the row's value; each
switch is that column's marginal contribution in this order, and the walk's contributions sum to
``f(x) - f(b)``. Over orders drawn uniformly and background rows drawn uniformly, their mean is
an unbiased estimate of ``phi_i``. Two refinements keep it cheap and exact where it can be:

* *antithetic orders*: every order is walked forwards and backwards with the same background
  row, whose contributions are negatively correlated, and the pair's mean is one sample;
* *background rows in turn*: the pairs take the background rows of a random order of ``B`` one
  after the other (each row once before any row twice), and each walk's contributions get
  ``(f(b) - v({})) / p`` added, whose expectation is zero: every estimate then sums to
  ``f(x) - v({})`` exactly, whatever the number of samples.

The standard error of each value is the standard deviation of the pairs' contributions over
``sqrt(n_pairs)``. A walk costs ``p - 1`` evaluations of ``f`` (its two ends, ``f(b)`` and
``f(x)``, are shared), so ``n_permutations`` orders cost ``n_permutations * (p - 1)``
evaluations per row, independent of the background's size.

Pure torch: the estimators' ``explain(X, attributions=True)`` wraps it with table encoding, the
output the attributions are in (log-odds, centred logits or predictions) and seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from tabsparse.training.batches import TensorData, batch_bounds
from tabsparse.training.places import ColumnPlace, check_places
from tabsparse.training.threads import inference_threads, intra_op_threads

__all__ = ["Attributions", "exact_shapley", "sampled_shapley", "shapley_weights"]

#: Rows of hybrid inputs evaluated per forward pass (the network's cost per row is lowest for
#: batches of about this size on a CPU thread).
EVAL_BATCH = 2048

#: Maps the network's logits ``(m, n_outputs)`` to the explained outputs ``(m, k)`` (float64).
Output = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Attributions:
    """Shapley values of the rows explained, all float64 on the CPU.

    ``values`` ``(n, p, k)``: column ``j``'s attribution to output ``o`` of row ``r``;
    ``base`` ``(k,)``: the mean output over the background; ``outputs`` ``(n, k)``: ``f(x)``;
    ``std`` ``(n, p, k)``: the standard error of each value (zeros where exact)."""

    values: torch.Tensor
    base: torch.Tensor
    outputs: torch.Tensor
    std: torch.Tensor


def shapley_weights(p: int) -> torch.Tensor:
    """``(2**p, p)`` float64: ``W[S, i]`` is the weight of ``v(S)`` in ``phi_i`` (coalition
    ``S`` as a bit mask, bit ``i`` for column ``i``): ``w(|S| - 1)`` where ``i`` is in ``S``,
    ``-w(|S|)`` where not, with ``w(s) = s! (p - s - 1)! / p!``."""
    masks = torch.arange(2**p).unsqueeze(1)
    member = (masks >> torch.arange(p)) & 1  # (2**p, p)
    size = member.sum(dim=1, keepdim=True)
    w = torch.tensor(
        [math.factorial(s) * math.factorial(p - s - 1) / math.factorial(p) for s in range(p)],
        dtype=torch.float64,
    )
    inside = w[(size - 1).clamp(min=0)].expand(-1, p)
    outside = w[size.clamp(max=p - 1)].expand(-1, p)
    return torch.where(member.bool(), inside, -outside)


@torch.inference_mode()
def exact_shapley(
    network: nn.Module,
    output: Output,
    data: TensorData,
    background: TensorData,
    players: Sequence[Sequence[ColumnPlace]],
) -> Attributions:
    """Exact Shapley values by enumerating all ``2**p`` coalitions (module docstring)."""
    p = _check(data, background, players)
    pool = background.take(slice(0, len(background)))
    n_bg, n_coalitions = len(pool), 2**p
    coalitions = ((torch.arange(n_coalitions).unsqueeze(1) >> torch.arange(p)) & 1).bool()
    weights = shapley_weights(p)
    hybrid = _Hybrid(data, pool, players)
    with _evaluating(network, output, data) as run:
        base = run(pool.numeric, pool.codes).mean(dim=0)
        values, outputs = [], []
        rows_per_chunk = max(1, EVAL_BATCH // (n_coalitions * n_bg))
        for start, stop in batch_bounds(len(data), rows_per_chunk):
            r = stop - start
            keep = coalitions.view(1, n_coalitions, 1, p).expand(r, n_coalitions, n_bg, p)
            rows = torch.arange(start, stop).view(r, 1, 1).expand(r, n_coalitions, n_bg)
            bgs = torch.arange(n_bg).view(1, 1, n_bg).expand(r, n_coalitions, n_bg)
            f = run(*hybrid(keep, rows, bgs))
            v = f.view(r, n_coalitions, n_bg, -1).mean(dim=2)  # (r, 2**p, k)
            values.append(torch.einsum("rsk,sp->rpk", v, weights))
            outputs.append(v[:, -1])
    values_t = torch.cat(values)
    return Attributions(values_t, base, torch.cat(outputs), torch.zeros_like(values_t))


@torch.inference_mode()
def sampled_shapley(
    network: nn.Module,
    output: Output,
    data: TensorData,
    background: TensorData,
    players: Sequence[Sequence[ColumnPlace]],
    *,
    n_permutations: int,
    generator: torch.Generator,
) -> Attributions:
    """Shapley values estimated from ``n_permutations`` orders per row (an even number >= 2:
    ``n_permutations // 2`` antithetic pairs), with their standard errors (module
    docstring); the orders and background rows are drawn from ``generator`` (on the CPU)."""
    p = _check(data, background, players)
    if isinstance(n_permutations, bool) or n_permutations < 2 or n_permutations % 2:
        raise ValueError(f"{n_permutations=} must be an even number >= 2")
    pool = background.take(slice(0, len(background)))
    n_pairs, T, steps = n_permutations // 2, n_permutations, p - 1
    hybrid = _Hybrid(data, pool, players)
    with _evaluating(network, output, data) as run:
        f_bg = run(pool.numeric, pool.codes)  # (n_bg, k)
        base = f_bg.mean(dim=0)
        k = f_bg.shape[1]
        rows_per_chunk = max(1, EVAL_BATCH // max(1, T * steps))
        values, stds, outputs = [], [], []
        for start, stop in batch_bounds(len(data), rows_per_chunk):
            r = stop - start
            chunk = data.take(slice(start, stop))
            f_x = run(chunk.numeric, chunk.codes)  # (r, k)
            # n_pairs random orders per row, each followed by its reverse
            order = torch.argsort(torch.rand(r, n_pairs, p, generator=generator), dim=2)
            order = torch.stack([order, order.flip(2)], dim=2).reshape(r, T, p)
            rank = torch.argsort(order, dim=2)  # rank[., t, i]: column i's place in order t
            # background rows in turn (a random order of the pool, repeated), one per pair
            bg = _background_in_turn(len(pool), r * n_pairs, generator).view(r, n_pairs)
            bg = bg.repeat_interleave(2, dim=1)  # (r, T)
            walk = [f_bg[bg].unsqueeze(2)]  # state 0: the background row
            if steps:
                # state j (1 .. p - 1) keeps the row's values of the order's first j columns
                keep = rank.unsqueeze(2) < torch.arange(1, p).view(1, 1, steps, 1)
                rows = torch.arange(start, stop).view(r, 1, 1).expand(r, T, steps)
                f = run(*hybrid(keep, rows, bg.unsqueeze(2).expand(r, T, steps)))
                walk.append(f.view(r, T, steps, k))
            walk.append(f_x.view(r, 1, 1, k).expand(r, T, 1, k))  # state p: the row
            states = torch.cat(walk, dim=2)  # (r, T, p + 1, k)
            change = states[:, :, 1:] - states[:, :, :-1]  # of the order's j-th column
            contribution = torch.zeros(r, T, p, k, dtype=torch.float64)
            contribution.scatter_(2, order.unsqueeze(3).expand(r, T, p, k), change)
            contribution += ((f_bg[bg] - base) / p).unsqueeze(2)
            pairs = contribution.view(r, n_pairs, 2, p, k).mean(dim=2)
            values.append(pairs.mean(dim=1))
            if n_pairs > 1:
                stds.append(pairs.std(dim=1, correction=1) / math.sqrt(n_pairs))
            else:
                stds.append(torch.full_like(pairs[:, 0], math.nan))
            outputs.append(f_x)
    return Attributions(torch.cat(values), base, torch.cat(outputs), torch.cat(stds))


def _check(
    data: TensorData, background: TensorData, players: Sequence[Sequence[ColumnPlace]]
) -> int:
    """The number of players, after checking the places and the background."""
    if len(background) < 1:
        raise ValueError("background has no rows")
    if not players or any(not group for group in players):
        raise ValueError("every player needs at least one column place")
    places = [place for group in players for place in group]
    check_places(data, places)
    seen: set[ColumnPlace] = set()
    for place in places:
        if place in seen:
            raise ValueError(f"column place {place} belongs to two players")
        seen.add(place)
    return len(players)


def _background_in_turn(n_bg: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` background positions: random orders of ``range(n_bg)`` one after the other."""
    rounds = -(-n // n_bg)
    return torch.cat([torch.randperm(n_bg, generator=generator) for _ in range(rounds)])[:n]


class _Hybrid:
    """Rows that take some players' values from the explained rows and the others' from
    background rows: ``hybrid(keep, rows, bgs)`` with ``keep`` bool ``(..., p)`` (whether each
    player keeps the row's value) and ``rows`` / ``bgs`` positions in the data / the pool of
    shape ``keep.shape[:-1]`` gives ``(numeric, codes)`` of ``keep[..., 0].numel()`` rows on the
    data's device. A place no player holds keeps the row's value."""

    def __init__(
        self, data: TensorData, pool: TensorData, players: Sequence[Sequence[ColumnPlace]]
    ) -> None:
        self.data = data
        self.pool = pool
        p = len(players)
        owner = {"numeric": [p] * pool.numeric.shape[1], "codes": [p] * pool.codes.shape[1]}
        for player, group in enumerate(players):
            for kind, position in group:
                owner[kind][position] = player
        self.numeric_owner = torch.tensor(owner["numeric"], dtype=torch.long)
        self.codes_owner = torch.tensor(owner["codes"], dtype=torch.long)

    def __call__(
        self, keep: torch.Tensor, rows: torch.Tensor, bgs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keep = keep.reshape(-1, keep.shape[-1])
        keep = torch.cat([keep, torch.ones(keep.shape[0], 1, dtype=torch.bool)], dim=1)
        device = self.pool.numeric.device
        rows_d = rows.reshape(-1).to(device)
        bgs_d = bgs.reshape(-1).to(device)
        row_data = self.data.take(rows_d)
        numeric = torch.where(
            keep[:, self.numeric_owner].to(device), row_data.numeric, self.pool.numeric[bgs_d]
        )
        codes = torch.where(
            keep[:, self.codes_owner].to(device), row_data.codes, self.pool.codes[bgs_d]
        )
        return numeric, codes


@contextmanager
def _evaluating(
    network: nn.Module, output: Output, data: TensorData
) -> Iterator[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The network in eval mode (restored after) under the inference thread count, as a function
    of ``(numeric, codes)`` to the explained outputs, float64 on the CPU, in batches of
    :data:`EVAL_BATCH` rows."""
    threads = torch.get_num_threads()
    if data.device.type == "cpu":
        threads = inference_threads(EVAL_BATCH, network)

    def run(numeric: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        out = []
        for start, stop in batch_bounds(numeric.shape[0], EVAL_BATCH):
            logits = network(numeric[start:stop], codes[start:stop], with_masks=False).logits
            out.append(output(logits).to(torch.float64).cpu())
        return torch.cat(out)

    was_training = network.training
    network.eval()
    try:
        with intra_op_threads(threads):
            yield run
    finally:
        network.train(was_training)
