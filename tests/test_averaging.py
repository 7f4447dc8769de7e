"""Tests of the weight average (tabsparse.averaging) and of its use by the trainer."""

from __future__ import annotations

import pytest
import torch
from conftest import ce, make_data, make_net

from tabsparse.averaging import ExponentialAverage
from tabsparse.training import TrainConfig, Trainer, WeightAveraging


def test_update_follows_the_warmed_up_decay() -> None:
    p = torch.nn.Parameter(torch.full((3,), 100.0))
    ema = ExponentialAverage([p], decay=0.9)
    expected = torch.full((3,), 100.0)
    for t in range(1, 120):
        with torch.no_grad():
            p.fill_(float(t))
        ema.update()
        d = min(0.9, (1 + t) / (10 + t))  # 2/11 at the first step, 0.9 from step 80 on
        expected = d * expected + (1 - d) * float(t)
        torch.testing.assert_close(ema.shadow[0], expected)
    assert ema.t == 119


def test_swap_exchanges_and_swapping_twice_restores() -> None:
    p = torch.nn.Parameter(torch.ones(2))
    ema = ExponentialAverage([p], decay=0.5)
    with torch.no_grad():
        p.fill_(5.0)
    ema.swap()
    torch.testing.assert_close(p.detach(), torch.ones(2))
    torch.testing.assert_close(ema.shadow[0], torch.full((2,), 5.0))
    ema.swap()
    torch.testing.assert_close(p.detach(), torch.full((2,), 5.0))


def test_frozen_parameters_are_not_averaged() -> None:
    layer = torch.nn.Linear(2, 2)
    layer.bias.requires_grad_(False)
    assert len(ExponentialAverage(layer.parameters(), decay=0.9).shadow) == 1


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5, 2.0])
def test_decay_outside_the_open_unit_interval_is_refused(decay: float) -> None:
    with pytest.raises(ValueError, match=f"decay={decay}"):
        ExponentialAverage([torch.nn.Parameter(torch.zeros(1))], decay=decay)


def test_state_round_trip_and_mismatch() -> None:
    p = torch.nn.Parameter(torch.zeros(2))
    ema = ExponentialAverage([p], decay=0.9)
    with torch.no_grad():
        p.fill_(1.0)
    ema.update()
    other = ExponentialAverage([torch.nn.Parameter(torch.zeros(2))], decay=0.5)
    other.load_state_dict(ema.state_dict())
    assert (other.decay, other.t) == (0.9, 1)
    torch.testing.assert_close(other.shadow[0], ema.shadow[0])
    two = ExponentialAverage([p, torch.nn.Parameter(torch.zeros(1))], decay=0.9)
    with pytest.raises(ValueError, match="this model has 2"):
        two.load_state_dict(ema.state_dict())


@pytest.mark.parametrize("with_validation", [False, True])
def test_trainer_keeps_the_averaged_weights(with_validation: bool) -> None:
    cfg = TrainConfig(max_epochs=6, batch_size=64, ema_decay=0.9)
    trainer = Trainer(make_net(), ce, cfg).fit(
        make_data(), make_data(100, seed=1) if with_validation else None
    )
    (averaging,) = [cb for cb in trainer.fit_callbacks if isinstance(cb, WeightAveraging)]
    kept = [p.detach() for p in trainer.network.parameters()]
    if not with_validation or trainer.best_iteration == 5:
        # the last epoch's average is what the network holds; the live weights differ from it
        for p, avg in zip(kept, averaging.average.shadow, strict=True):
            torch.testing.assert_close(p, avg)
    plain = Trainer(make_net(), ce, TrainConfig(max_epochs=6, batch_size=64)).fit(make_data())
    assert any(
        not torch.equal(a, b.detach())
        for a, b in zip(kept, plain.network.parameters(), strict=True)
    )


def test_validation_scores_the_averaged_weights() -> None:
    """With a slow average the first epochs' validation loss stays near the initial weights'."""
    val = make_data(100, seed=1)
    fast = Trainer(make_net(), ce, TrainConfig(max_epochs=3, batch_size=64)).fit(make_data(), val)
    slow = Trainer(make_net(), ce, TrainConfig(max_epochs=3, batch_size=64, ema_decay=0.999)).fit(
        make_data(), val
    )
    assert slow.history[-1]["val_loss"] > fast.history[-1]["val_loss"]


def test_average_of_flat_parameters_is_one_buffer_and_equals_the_per_parameter_one() -> None:
    from tabsparse.optim import AdamW

    def params() -> list[torch.nn.Parameter]:
        g = torch.Generator().manual_seed(0)
        return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in [(5, 3), (3,), ()]]

    flat, plain = params(), params()
    opt = AdamW(flat, lr=0.1, flat=True)  # lays the parameters out back to back
    fast, ref = ExponentialAverage(flat, decay=0.9), ExponentialAverage(plain, decay=0.9)
    assert fast._flat is not None and ref._flat is None
    g = torch.Generator().manual_seed(1)
    for _ in range(12):
        with torch.no_grad():
            for a, b in zip(flat, plain, strict=True):
                delta = torch.randn(a.shape, generator=g)
                a.add_(delta)
                b.add_(delta)
        fast.update()
        ref.update()
    fast.swap()
    ref.swap()
    for a, b in zip(flat, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    fast.swap()
    ref.swap()
    opt.release()  # own storage again: the per-parameter path takes over
    fast.update()
    ref.update()
    for a, b in zip(fast.state_dict()["shadow"], ref.state_dict()["shadow"], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
