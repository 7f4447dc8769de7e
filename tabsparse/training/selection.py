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
is never dropped again, and the selector keeps both branches of a switch in every row. A row's
selected columns are those with ``p_j >= 0.5``.

Replacing by marginal draws rather than zeros keeps the selection from carrying information
itself (the leak INVASE avoids: with zeros, *which* columns are kept could encode the label).
Being one smooth function of the row, the selector keeps the columns of the row's regime even
where one of them happens to matter little (``x2`` of ``x1 * x2`` where ``x1`` is near zero).

Pure torch: the estimators train one at the end of ``fit`` (``explain(X).selected``).
``network`` is a :class:`~tabsparse.nn.network.TabNet` (or anything with its ``inputs`` and
``from_inputs``); a column is a list of places in its inputs (an expanded datetime column has
several).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.optim import AdamW
from tabsparse.training.batches import TensorData, batch_bounds
from tabsparse.training.places import ColumnPlace

__all__ = [
    "SELECTION_BUDGET",
    "SelectorNet",
    "fit_selector",
    "selection_loss",
    "selection_probabilities",
]

#: The gates' relaxation temperature while training.
TEMPERATURE = 0.5
#: The default ``budget`` (chosen from 0.01, 0.02 and 0.05 on the synthetic tables of
#: ``bench_explain.py``).
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

    def state(self) -> dict[str, Any]:
        """The weights, ``channel_column`` (numpy, on the CPU) and ``scale``: what
        :meth:`from_state` rebuilds the selector from."""
        out: dict[str, Any] = {
            name: value.detach().cpu().numpy().copy() for name, value in self.state_dict().items()
        }
        out["scale"] = float(self.scale)
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SelectorNet:
        """The selector :meth:`state` describes (a ``ValueError`` for one it cannot be), built
        without drawing initial weights (the global random state is left as it was)."""
        try:
            first, last = state["layers.0.weight"], state["layers.4.weight"]
            hidden, n_channels = first.shape
            n_columns = last.shape[0]
            with torch.device("meta"):
                net = cls(n_channels, [0] * n_channels, n_columns, hidden)
            tensors = {k: torch.as_tensor(v) for k, v in state.items() if k != "scale"}
            net.load_state_dict(tensors, strict=True, assign=True)
        except (KeyError, AttributeError, ValueError, RuntimeError, TypeError) as exc:
            raise ValueError(f"not the state of a column selector: {exc}") from exc
        net.scale = float(state["scale"])
        return net.eval()

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
    columns: Sequence[Sequence[ColumnPlace]],
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
    drawn from an independent background row. ``columns`` gives each selected column's places
    in the network's inputs (all of them once), in the order of the selector's outputs.
    ``scale``: the unit of the loss, measured on the background when None. ``network``'s
    weights, mode and gradient flags are left as they were; the selector is on the network's
    device, in eval mode."""
    if not (budget > 0 and math.isfinite(budget)):
        raise ValueError(f"{budget=} must be a positive number")
    if n_iter < 1:
        raise ValueError(f"{n_iter=} must be >= 1")
    if len(background) < 2:
        raise ValueError("background needs at least 2 rows to draw values from")
    channels, channel_column = _channels(network, background, columns)
    device = channels.device
    n = channels.shape[0]
    with torch.random.fork_rng(devices=[]):  # the layers' default initial draws: undone
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
        # tabsparse.optim, not torch.optim: torch's first optimiser imports torch._dynamo
        optimiser = AdamW(selector.parameters(), lr=lr)
        for _ in range(n_iter):
            rows = torch.randint(0, n, (min(batch_size, n),), generator=generator).to(device)
            loss = selection_loss(
                network, selector, channels[rows], channels, budget=budget, generator=generator
            ).mean()
            optimiser.zero_grad()
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
    What :func:`fit_selector` minimises (with gradients to the selector)."""
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
def _input_channels(network: Any, data: TensorData, batch_size: int = 16384) -> torch.Tensor:
    """The input channels of every row of ``data`` ``(n, n_channels)`` float32, on its device."""
    parts = []
    for start, stop in batch_bounds(len(data), batch_size):
        chunk = data.take(slice(start, stop))
        parts.append(network.inputs(chunk.numeric, chunk.codes).float())
    return torch.cat(parts)


def _channels(
    network: Any, background: TensorData, columns: Sequence[Sequence[ColumnPlace]]
) -> tuple[torch.Tensor, list[int]]:
    """The background's input channels (computed once, without gradients) and the position in
    ``columns`` of each channel's column."""
    inputs = network.inputs
    owner = [-1] * inputs.output_dim
    places = [place for column in columns for place in column]
    for c, column in enumerate(columns):
        for kind, position in column:
            for ch in range(inputs.output_dim)[inputs.channels(kind, position)]:
                owner[ch] = c
    if -1 in owner or len(set(places)) != len(places) or not all(columns):
        raise ValueError("columns must name every place of the network's inputs once")
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
