"""The core Shapley estimators (tabsparse.training.shapley) against brute force and a linear
model, whose interventional Shapley values are known in closed form."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tabsparse.training import TensorData
from tabsparse.training.shapley import exact_shapley, sampled_shapley, shapley_weights


class Toy(nn.Module):
    """A network-like module: numeric (n, 3), codes (n, 1) -> logits (n, 2); nonlinear with
    interactions when ``linear`` is False."""

    def __init__(self, linear: bool = False) -> None:
        super().__init__()
        self.linear = linear
        self.w = torch.tensor([[1.5, -0.5], [-2.0, 1.0], [0.7, 0.2]], dtype=torch.float64)
        self.emb = torch.tensor([[0.0, 0.3], [1.0, -1.0], [-0.5, 2.0]], dtype=torch.float64)

    def forward(self, numeric: torch.Tensor, codes: torch.Tensor, with_masks: bool = False):
        x = numeric.double()
        z = x @ self.w + self.emb[codes[:, 0]]
        if not self.linear:
            z = z + torch.stack([x[:, 0] * x[:, 1], torch.tanh(x[:, 2]) * codes[:, 0]], dim=1)
            z = z + (x[:, 1] > 0).double().unsqueeze(1) * x[:, 2:3]
        return SimpleNamespace(logits=z)


PLAYERS = [[("numeric", 0)], [("numeric", 1), ("numeric", 2)], [("codes", 0)]]


def table(n: int, seed: int) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    return TensorData(
        numeric=torch.randn(n, 3, generator=g, dtype=torch.float64),
        codes=torch.randint(0, 3, (n, 1), generator=g),
    )


def identity(z: torch.Tensor) -> torch.Tensor:
    return z


def sampled(net: nn.Module, x: TensorData, bg: TensorData, n: int, seed: int = 0):  # type: ignore[no-untyped-def]
    """``sampled_shapley`` of the toy's logits over :data:`PLAYERS`, ``n`` orders from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return sampled_shapley(net, identity, x, bg, PLAYERS, n_permutations=n, generator=generator)


def brute_force(net: nn.Module, x: TensorData, bg: TensorData) -> torch.Tensor:
    """The definition, one coalition at a time: (n, p, k)."""
    p = len(PLAYERS)

    def value(row: int, coalition: set[int]) -> torch.Tensor:
        numeric, codes = bg.numeric.clone(), bg.codes.clone()
        for player in coalition:
            for kind, pos in PLAYERS[player]:
                target = numeric if kind == "numeric" else codes
                source = x.numeric if kind == "numeric" else x.codes
                target[:, pos] = source[row, pos]
        return net(numeric, codes).logits.mean(dim=0)

    out = torch.zeros(len(x), p, 2, dtype=torch.float64)
    for row in range(len(x)):
        for i in range(p):
            others = [j for j in range(p) if j != i]
            for size in range(p):
                w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
                for subset in itertools.combinations(others, size):
                    s = set(subset)
                    out[row, i] += w * (value(row, s | {i}) - value(row, s))
    return out


def test_shapley_weights_sum_to_the_efficiency_identity() -> None:
    for p in (1, 2, 5):
        w = shapley_weights(p)
        # sum_i phi_i = v(all) - v({}): the weights of all players add to +1 for the full
        # coalition, -1 for the empty one and 0 for every other
        total = w.sum(dim=1)
        expected = torch.zeros(2**p, dtype=torch.float64)
        expected[-1], expected[0] = 1.0, -1.0
        torch.testing.assert_close(total, expected)


def test_exact_shapley_equals_brute_force_and_adds_up() -> None:
    net, x, bg = Toy(), table(5, 0), table(7, 1)
    got = exact_shapley(net, identity, x, bg, PLAYERS)
    torch.testing.assert_close(got.values, brute_force(net, x, bg), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got.base, net(bg.numeric, bg.codes).logits.mean(dim=0))
    torch.testing.assert_close(got.outputs, net(x.numeric, x.codes).logits)
    torch.testing.assert_close(got.base + got.values.sum(dim=1), got.outputs)
    assert torch.all(got.std == 0)


@pytest.mark.parametrize("n_background", [9, 400])
def test_sampled_shapley_adds_up_exactly_and_is_unbiased_within_its_errors(
    n_background: int,
) -> None:
    net, x, bg = Toy(), table(6, 2), table(n_background, 3)
    exact = exact_shapley(net, identity, x, bg, PLAYERS).values
    got = sampled(net, x, bg, 200)
    torch.testing.assert_close(
        got.base + got.values.sum(dim=1), got.outputs, rtol=1e-12, atol=1e-12
    )
    assert torch.all(got.std > 0)
    z = (got.values - exact) / got.std
    assert float(z.abs().max()) < 3.5
    rms = float(z.pow(2).mean().sqrt())
    if n_background > 200:
        # fewer pairs than background rows: each pair an independent sample, the errors of
        # the size the standard errors say
        assert 0.6 < rms < 1.5
    else:
        # the pairs cover the background evenly, which removes its share of the noise: the
        # standard errors are conservative
        assert rms < 1.0


def test_sampled_shapley_of_a_linear_model_is_its_closed_form() -> None:
    # phi_i = w_i (x_i - mean_b b_i) for a linear model; with every background row used equally
    # often (pairs a multiple of the background), the estimate is exact
    net, x, bg = Toy(linear=True), table(4, 4), table(5, 5)
    got = sampled(net, x, bg, 20, seed=1)
    mean_num = bg.numeric.mean(dim=0)
    emb_mean = net.emb[bg.codes[:, 0]].mean(dim=0)
    want = torch.stack(
        [
            (x.numeric[:, :1] - mean_num[:1]) * net.w[0],
            (x.numeric[:, 1:] - mean_num[1:]) @ net.w[1:],
            net.emb[x.codes[:, 0]] - emb_mean,
        ],
        dim=1,
    )
    torch.testing.assert_close(got.values, want, rtol=1e-10, atol=1e-10)


def test_sampled_shapley_is_seeded_and_restores_train_mode() -> None:
    net, x, bg = Toy(), table(3, 6), table(4, 7)
    net.train()
    a, b = (sampled(net, x, bg, 6, seed=3) for _ in range(2))
    torch.testing.assert_close(a.values, b.values, rtol=0, atol=0)
    assert net.training


@pytest.mark.parametrize("n", [0, 1, 3, True])
def test_sampled_shapley_needs_an_even_number_of_orders(n: int) -> None:
    with pytest.raises(ValueError, match="must be an even number >= 2"):
        sampled(Toy(), table(2, 0), table(2, 1), n)


def test_places_must_be_in_the_data_and_held_once() -> None:
    with pytest.raises(ValueError, match=r"column place \('numeric', 3\) is not in the data"):
        exact_shapley(Toy(), identity, table(2, 0), table(2, 1), [[("numeric", 3)]])
    with pytest.raises(ValueError, match="belongs to two players"):
        exact_shapley(
            Toy(), identity, table(2, 0), table(2, 1), [[("numeric", 0)], [("numeric", 0)]]
        )
    with pytest.raises(ValueError, match="background has no rows"):
        exact_shapley(Toy(), identity, table(2, 0), table(0, 1), PLAYERS)
