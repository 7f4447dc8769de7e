"""A learned per-row column selector for a fitted network: which columns a row's prediction
needs, when every other column is replaced by values drawn from its marginal distribution.

A small network ``g`` (two hidden layers) reads a row's input channels and gives each column a
probability ``p_j`` of being needed. It is trained on background rows against the fitted
network ``f``, which stays as it is: each column is kept or replaced by a draw from the
background (a relaxed Bernoulli gate ``z_j`` of probability ``p_j``, temperature 0.5, mixing
the column's input channels with a drawn row's), and ``g`` minimises::

    size(f(x_z) - f(x)) / scale + budget * sum_j softplus(logit_j)

``size`` is :func:`tabsparse.nn.functional.output_size` (the change of the log-odds, the centred
logits, or the predictions), ``scale`` the mean size of the change when *every* column is
drawn, over the background: so a column is worth keeping in a row when dropping it would move
that row's prediction by more than about ``budget`` of a whole replacement's typical change.
The softplus penalty (``-log(1 - p_j)``) keeps pushing on columns that are already kept: with
``p_j`` itself as the penalty (L2X, INVASE) a column whose probability saturates near one early
is never dropped again, and the selector keeps both branches of a switch in every row
(quality round 24). A row's selected columns are those with ``p_j >= 0.5``.

Replacing by marginal draws rather than zeros keeps the selection from carrying information
itself (the leak INVASE avoids: with zeros, *which* columns are kept could encode the label).
Unlike the per-row effects of :mod:`tabsparse.training.effects`, one column at a time, the
selector chooses a set, and being one smooth function of the row it keeps the columns of the
row's regime even where one of them happens to matter little (``x2`` of ``x1 * x2`` where
``x1`` is near zero).

:func:`residual_change` measures how far a selection is from enough: the size of the change
when the unselected columns are drawn, over ``scale``. Pure torch: the estimators'
``fit_selector`` wraps it with table encoding and seeds. ``network`` is a
:class:`~tabsparse.nn.network.TabNet` (or anything with its ``inputs`` and ``from_inputs``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.training.batches import TensorData, batch_bounds
from tabsparse.training.effects import ColumnPlace

__all__ = [
    "SELECTION_BUDGET",
    "SelectorNet",
    "fit_selector",
    "held_out_loss",
    "residual_change",
    "selection_loss",
    "selection_probabilities",
]

#: The gates' relaxation temperature while training.
TEMPERATURE = 0.5
#: The default ``budget`` (chosen on seed 0 of the synthetic tables of ``bench_explain.py``
#: from 0.01, 0.02 and 0.05 before the three-seed run: quality round 24).
SELECTION_BUDGET = 0.02


class SelectorNet(nn.Module):
    """``g``: input channels ``(n, n_channels)`` -> one logit per column ``(n, n_columns)``,
    with the column of each channel (``channel_column``) and the scale of the change it was
    trained against (``scale``)."""

    channel_column: torch.Tensor

    def __init__(
        self, n_channels: int, channel_column: Sequence[int], n_columns: int, hidden: int
    ) -> None:
        super().__init__()
        self.n_columns = n_columns
        self.layers = nn.Sequential(
            nn.Linear(n_channels, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_columns),
        )
        self.register_buffer("channel_column", torch.as_tensor(channel_column, dtype=torch.int64))
        self.scale = 1.0

    def forward(self, channels: torch.Tensor) -> torch.Tensor:
        return self.layers(channels)

    def reset_parameters(self, generator: torch.Generator) -> None:
        """PyTorch's default ``Linear`` initialisation, from ``generator``."""
        for layer in self.layers:
            if isinstance(layer, nn.Linear):
                bound = 1.0 / math.sqrt(layer.in_features)
                with torch.no_grad():
                    for p in (layer.weight, layer.bias):
                        p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)


def fit_selector(
    network: Any,
    background: TensorData,
    columns: Sequence[ColumnPlace],
    *,
    budget: float,
    n_iter: int,
    generator: torch.Generator,
    hidden: int = 100,
    batch_size: int = 256,
    lr: float = 1e-3,
    scale: float | None = None,
) -> SelectorNet:
    """Train a :class:`SelectorNet` for ``network`` on the rows of ``background`` (module
    docstring): ``n_iter`` Adam steps on batches of ``batch_size`` rows, each column of each row
    drawn from an independent background row. ``columns`` gives each selected column's place,
    in the order of the selector's outputs. ``scale``: the unit of the loss, measured on the
    background when None (selectors trained to be averaged share one). ``network``'s weights,
    mode and gradient flags are left as they were; the selector is on the network's device, in
    eval mode."""
    if not (budget > 0 and math.isfinite(budget)):
        raise ValueError(f"{budget=} must be a positive number")
    if n_iter < 1:
        raise ValueError(f"{n_iter=} must be >= 1")
    if len(background) < 2:
        raise ValueError("background needs at least 2 rows to draw values from")
    channels, channel_column = _channels(network, background, columns)
    device = channels.device
    n = channels.shape[0]
    selector = SelectorNet(channels.shape[1], channel_column, len(columns), hidden)
    selector.reset_parameters(generator)
    selector.to(device)
    was_training = network.training
    flags = [p.requires_grad for p in network.parameters()]
    network.eval()
    try:
        for p in network.parameters():
            p.requires_grad_(False)
        if scale is None:
            with torch.no_grad():
                centre = getattr(network, "output_centre", None)
                scale = _mean_full_change(network, channels, selector, centre, generator)
        selector.scale = scale
        optimiser = torch.optim.Adam(selector.parameters(), lr=lr)
        for _ in range(n_iter):
            rows = torch.randint(0, n, (min(batch_size, n),), generator=generator).to(device)
            loss = selection_loss(
                network, selector, channels[rows], channels, budget=budget, generator=generator
            ).mean()
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
    finally:
        for p, flag in zip(network.parameters(), flags, strict=True):
            p.requires_grad_(flag)
        network.train(was_training)
    selector.eval()
    return selector


def selection_loss(
    network: Any,
    selector: SelectorNet,
    x: torch.Tensor,
    pool: torch.Tensor,
    *,
    budget: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """The selector's objective for each row of ``x`` (input channels ``(n, n_channels)``),
    ``(n,)``: ``size(f(x_z) - f(x)) / scale + budget * sum_j softplus(logit_j)`` with relaxed
    gates ``z`` and each column drawn from its own random row of ``pool`` (input channels).
    What :func:`fit_selector` minimises (with gradients to the selector), and what
    :func:`held_out_loss` averages on other rows."""
    index = selector.channel_column.to(x.device)
    drawn = _drawn(pool, index, len(x), selector.n_columns, generator)
    logits = selector(x)
    u = torch.rand(logits.shape, generator=generator).to(x.device).clamp_(1e-6, 1 - 1e-6)
    gate = torch.sigmoid((logits + torch.log(u) - torch.log1p(-u)) / TEMPERATURE)[:, index]
    with torch.no_grad():
        base = _outputs(network, x)
    moved = _outputs(network, gate * x + (1 - gate) * drawn)
    change = F.output_size(moved - base, getattr(network, "output_centre", None))
    return change / selector.scale + budget * nn.functional.softplus(logits).sum(dim=1)


@torch.no_grad()
def held_out_loss(
    network: Any,
    selector: SelectorNet,
    data: TensorData,
    background: TensorData,
    *,
    budget: float,
    n_draws: int,
    generator: torch.Generator,
    batch_size: int = 16384,
) -> float:
    """The mean of :func:`selection_loss` over the rows of ``data`` and ``n_draws`` draws of
    the gates and of the replacement values (from ``background``): how well the selector
    fits its objective on rows it was not trained on (lower is better)."""
    _check_draws(n_draws)
    total = 0.0
    with _evaluating(network):
        pool = _input_channels(network, background, batch_size)
        for start, stop in batch_bounds(len(data), batch_size):
            x = _input_channels(network, data.take(slice(start, stop)), batch_size)
            for _ in range(n_draws):
                loss = selection_loss(
                    network, selector, x, pool, budget=budget, generator=generator
                )
                total += float(loss.sum())
    return total / (len(data) * n_draws)


@torch.no_grad()
def selection_probabilities(
    network: Any, selector: SelectorNet, data: TensorData, *, batch_size: int = 16384
) -> torch.Tensor:
    """Each row's probability that each column is needed ``(n_rows, n_columns)``, float32 on
    the CPU."""
    with _evaluating(network):
        out = [
            torch.sigmoid(selector(_input_channels(network, data.take(slice(start, stop)))))
            for start, stop in batch_bounds(len(data), batch_size)
        ]
    return torch.cat(out).cpu() if out else torch.zeros(0, selector.n_columns)


@torch.no_grad()
def residual_change(
    network: Any,
    selector: SelectorNet,
    data: TensorData,
    background: TensorData,
    keep: torch.Tensor,
    *,
    n_draws: int,
    generator: torch.Generator,
    batch_size: int = 16384,
) -> torch.Tensor:
    """How far each row's outputs move, over the selector's ``scale``, when the columns not in
    ``keep`` (bool ``(n_rows, n_columns)``) are drawn from ``background``: the mean over
    ``n_draws`` draws, ``(n_rows,)`` float32 on the CPU. 0 where every column is kept."""
    _check_draws(n_draws)
    with _evaluating(network):
        pool = _input_channels(network, background, batch_size)
        index = selector.channel_column.to(pool.device)
        centre = getattr(network, "output_centre", None)
        out = torch.zeros(len(data))
        for start, stop in batch_bounds(len(data), batch_size):
            chunk = data.take(slice(start, stop))
            x = network.inputs(chunk.numeric, chunk.codes).float()
            kept = keep[start:stop].to(x.device)[:, index]
            base = _outputs(network, x)
            total = torch.zeros(len(x), device=x.device)
            for _ in range(n_draws):
                drawn = _drawn(pool, index, len(x), selector.n_columns, generator)
                moved = _outputs(network, torch.where(kept, x, drawn))
                total += F.output_size(moved - base, centre)
            out[start:stop] = (total / n_draws).cpu()
    return out / selector.scale


@torch.no_grad()
def _input_channels(network: Any, data: TensorData, batch_size: int = 16384) -> torch.Tensor:
    """The input channels of every row of ``data`` ``(n, n_channels)`` float32, on its device."""
    parts = []
    for start, stop in batch_bounds(len(data), batch_size):
        chunk = data.take(slice(start, stop))
        parts.append(network.inputs(chunk.numeric, chunk.codes).float())
    return torch.cat(parts)


def _channels(
    network: Any, background: TensorData, columns: Sequence[ColumnPlace]
) -> tuple[torch.Tensor, list[int]]:
    """The background's input channels (computed once, without gradients) and the position in
    ``columns`` of each channel's column."""
    inputs = network.inputs
    owner = [-1] * inputs.output_dim
    for c, (kind, position) in enumerate(columns):
        for ch in range(inputs.output_dim)[inputs.channels(kind, position)]:
            owner[ch] = c
    if -1 in owner or len(set(columns)) != len(columns):
        raise ValueError("columns must name every input column once")
    with _evaluating(network):
        channels = _input_channels(network, background)
    return channels, owner


@contextlib.contextmanager
def _evaluating(network: Any) -> Iterator[None]:
    """``network`` in eval mode inside, back in its mode after."""
    was_training = network.training
    network.eval()
    try:
        yield
    finally:
        network.train(was_training)


def _check_draws(n_draws: int) -> None:
    if n_draws < 1:
        raise ValueError(f"{n_draws=} must be >= 1")


def _drawn(
    channels: torch.Tensor,
    index: torch.Tensor,
    n_rows: int,
    n_columns: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``n_rows`` rows whose every column comes from its own random row of ``channels``."""
    source = torch.randint(0, len(channels), (n_rows, n_columns), generator=generator)
    source = source.to(channels.device)[:, index]
    return torch.gather(channels, 0, source)


def _mean_full_change(
    network: Any,
    channels: torch.Tensor,
    selector: SelectorNet,
    centre: torch.Tensor | None,
    generator: torch.Generator,
    batch_size: int = 16384,
) -> float:
    """The mean size of the change of the outputs when every column of a background row is
    drawn: the unit of the selector's loss."""
    index = selector.channel_column.to(channels.device)
    total, n = 0.0, len(channels)
    for start, stop in batch_bounds(n, batch_size):
        x = channels[start:stop]
        drawn = _drawn(channels, index, stop - start, selector.n_columns, generator)
        moved = _outputs(network, drawn)
        total += float(F.output_size(moved - _outputs(network, x), centre).sum())
    mean = total / n
    if not mean > 0:
        raise ValueError(
            "the network's outputs do not change when the columns are drawn from the "
            "background: there is nothing to select"
        )
    return mean


def _outputs(network: Any, channels: torch.Tensor) -> torch.Tensor:
    return network.from_inputs(channels, with_masks=False).logits.float()
