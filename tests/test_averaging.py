"""Tests of the weight average (tabsparse.averaging) and of its use by the trainer."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import ce, make_data, make_net

from tabsparse.averaging import ExponentialAverage
from tabsparse.training import TensorData, TrainConfig, Trainer, WeightAveraging


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


def test_fresh_statistics_weigh_every_call_equally_and_restore_the_layers() -> None:
    from tabsparse.nn.ghost_bn import GhostBatchNorm, fresh_statistics

    bn, frozen = GhostBatchNorm(3, virtual_batch_size=16), GhostBatchNorm(3, momentum=0.0)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(5):  # statistics of other activations, to be replaced
            bn(torch.randn(16, 3, generator=g) * 4 + 7)
    calls = [torch.randn(16, 3, generator=g) * s + s for s in (1.0, 2.0, 3.0)]
    with torch.no_grad(), fresh_statistics(torch.nn.Sequential(bn, frozen)) as layers:
        assert layers == [bn]  # frozen statistics are left alone
        for x in calls:
            frozen(bn(x))
    stacked = torch.stack(calls)  # one virtual batch per call
    torch.testing.assert_close(bn.running_mean, stacked.mean(1).mean(0))
    torch.testing.assert_close(bn.running_var, stacked.var(1).mean(0))  # unbiased, as PyTorch's
    assert int(bn.num_batches_tracked) == 3 and bn.momentum == 0.02
    torch.testing.assert_close(frozen.running_mean, torch.zeros(3))


def _statistics_gap(net: torch.nn.Module, data: TensorData, batch_size: int) -> float:
    """How far the running means of ``net``'s batch norms are from the activations its
    weights give in training mode on ``data`` (largest gap, in running standard deviations)."""
    import copy

    from tabsparse.nn.ghost_bn import GhostBatchNorm
    from tabsparse.training.batches import batch_bounds

    net = copy.deepcopy(net)
    layers = [m for m in net.modules() if isinstance(m, GhostBatchNorm)]
    seen: dict[int, list[Any]] = {id(m): [] for m in layers}
    for m in layers:  # capture the statistics instead of folding them in
        m.record = seen[id(m)].append  # type: ignore[method-assign]
    net.train()
    with torch.no_grad():
        for start, stop in batch_bounds(len(data), batch_size):
            chunk = data.take(slice(start, stop))
            net(chunk.numeric, chunk.codes)
    gaps = []
    for m in layers:
        means = torch.cat([part[0] for update in seen[id(m)] for part in update]).mean(0)
        gaps.append(float(((means - m.running_mean).abs() / m.running_var.sqrt()).max()))
    return max(gaps)


@pytest.mark.parametrize("with_validation", [False, True])
def test_the_average_is_judged_with_its_own_batch_norm_statistics(
    with_validation: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept average holds statistics of its own activations (recomputed when validated,
    or at the end of a fit without validation rows), not those the live weights gathered;
    training itself is not touched (same batches, same live weights, same losses)."""
    from tabsparse.training import Callback

    class LiveStatistics(Callback):
        """Checks that the live weights' statistics are back after every validation."""

        def on_batches_end(self, trainer: Trainer, record: Any) -> None:
            self.live = {k: v.clone() for k, v in trainer.network.state_dict().items()}

        def on_validation_end(self, trainer: Trainer, record: Any) -> None:
            for key, value in trainer.network.state_dict().items():
                if key.endswith(("running_mean", "running_var", "num_batches_tracked")):
                    torch.testing.assert_close(value, self.live[key], rtol=0, atol=0)
            self.checked = True

    train, val = make_data(1000), make_data(100, seed=1) if with_validation else None
    cfg = TrainConfig(max_epochs=6, batch_size=64, ema_decay=0.9, n_iter_no_change=None)
    check = LiveStatistics()
    fresh = Trainer(make_net(), ce, cfg, callbacks=[check]).fit(train, val)
    assert check.checked
    with pytest.raises(RuntimeError, match="rows of a running fit"):
        fresh.recompute_statistics()  # the trainer keeps no rows after the fit
    monkeypatch.setattr(Trainer, "recompute_statistics", lambda self, rows=0: None)
    stale = Trainer(make_net(), ce, cfg).fit(train, val)
    fresh_gap, stale_gap = (_statistics_gap(t.network, train, 64) for t in (fresh, stale))
    assert fresh_gap < 0.07 and stale_gap > 3 * fresh_gap, (fresh_gap, stale_gap)
    assert [r["train_loss"] for r in fresh.history] == [r["train_loss"] for r in stale.history]
    if with_validation:  # the same averaged weights, scored with other statistics
        assert fresh.history[-1]["val_loss"] != stale.history[-1]["val_loss"]
