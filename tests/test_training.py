"""Tests of the pure-torch training loop."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import torch
from conftest import ce, make_data, make_net

from tabsparse.distributed import DistContext
from tabsparse.training import (
    Callback,
    Checkpointing,
    CompileTrial,
    EarlyStopping,
    EpochLog,
    LRSchedule,
    TrainConfig,
    Trainer,
    TrainingError,
    WeightAveraging,
    auto_batch_size,
    batch_bounds,
    batch_multiple,
    default_callbacks,
    inference_batch_size,
    load_checkpoint,
    predict_outputs,
    training_threads,
)
from tabsparse.training.callbacks import Hooks


@pytest.mark.parametrize(
    ("n", "batch_size", "expected"),
    [
        (0, 10, []),
        (5, 10, [(0, 5)]),
        (10, 10, [(0, 10)]),
        (11, 10, [(0, 6), (6, 11)]),
        (2049, 1024, [(0, 683), (683, 1366), (1366, 2049)]),
    ],
)
def test_batch_bounds_are_near_equal_and_cover_all_rows(
    n: int, batch_size: int, expected: list[tuple[int, int]]
) -> None:
    assert batch_bounds(n, batch_size) == expected


@pytest.mark.parametrize(
    ("n", "batch_size", "vbs"),
    [(50_000, 1024, 128), (45_000, 1024, 128), (1100, 1024, 128), (3000, 512, 100)],
)
def test_batch_bounds_make_batches_that_split_into_equal_virtual_batches(
    n: int, batch_size: int, vbs: int
) -> None:
    multiple = batch_multiple(n, batch_size, vbs)
    bounds = batch_bounds(n, batch_size, multiple)
    assert len(bounds) == math.ceil(n / batch_size)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) <= batch_size + multiple and min(sizes) > 0
    for size in sizes[:-1]:  # every batch but the last splits without a remainder
        assert size % math.ceil(size / vbs) == 0


def test_batch_multiple_accounts_for_every_rank() -> None:
    assert batch_multiple(50_000, 1024, 128) == 8
    assert batch_multiple(50_000, 1024, 128, world_size=2) == 8  # 4 virtual batches per rank
    assert batch_multiple(50_000, 1024, 100, world_size=2) == 12
    assert batch_multiple(0, 1024, 128) == 1


def test_training_reduces_the_loss_and_records_history() -> None:
    net = make_net()
    cfg = TrainConfig(max_epochs=15, batch_size=64, learning_rate=0.02)
    trainer = Trainer(net, ce, cfg).fit(make_data())
    losses = [r["train_loss"] for r in trainer.history]
    assert len(losses) == 15
    assert losses[-1] < 0.8 * losses[0]
    assert set(trainer.history[0]) == {"epoch", "train_loss", "learning_rate", "seconds"}
    assert trainer.best_iteration == 14


def test_training_is_reproducible_and_leaves_global_rng_alone() -> None:
    state = torch.get_rng_state()
    cfg = TrainConfig(max_epochs=3, batch_size=64, seed=7)
    a = Trainer(make_net(), ce, cfg).fit(make_data()).network
    torch.set_rng_state(state)
    b = Trainer(make_net(), ce, cfg).fit(make_data()).network
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(pa, pb)


def test_early_stopping_keeps_best_weights() -> None:
    class Spy(Callback):
        def __init__(self) -> None:
            self.states: list[dict[str, torch.Tensor]] = []

        def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            self.states.append({k: v.clone() for k, v in trainer.network.state_dict().items()})

    spy = Spy()
    cfg = TrainConfig(max_epochs=40, batch_size=64, n_iter_no_change=3, learning_rate=0.05)
    trainer = Trainer(make_net(), ce, cfg, callbacks=[spy]).fit(make_data(), make_data(80, 1))
    hist = trainer.history
    best = max(range(len(hist)), key=lambda i: hist[i]["val_score"])
    assert trainer.best_iteration == best
    for key, value in trainer.network.state_dict().items():
        torch.testing.assert_close(value, spy.states[best][key])
    assert all("val_loss" in r for r in hist)


def test_callback_can_stop_training() -> None:
    class StopAfterTwo(Callback):
        def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            if len(trainer.history) == 2:
                trainer.stop = True

    trainer = Trainer(make_net(), ce, TrainConfig(max_epochs=10), callbacks=[StopAfterTwo()])
    trainer.fit(make_data())
    assert len(trainer.history) == 2


def test_non_finite_loss_raises_naming_the_epoch() -> None:
    def bad_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return logits.sum(dim=1) * math.inf

    with pytest.raises(TrainingError, match=r"epoch 1 \(history index 0\)"):
        Trainer(make_net(), bad_loss, TrainConfig(max_epochs=2)).fit(make_data())


def test_keyboard_interrupt_keeps_a_usable_network() -> None:
    class Interrupt(Callback):
        def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            if len(trainer.history) == 2:
                raise KeyboardInterrupt

    trainer = Trainer(make_net(), ce, TrainConfig(max_epochs=10), callbacks=[Interrupt()])
    with pytest.warns(RuntimeWarning, match="interrupted after 2 epochs"):
        trainer.fit(make_data())
    assert trainer.interrupted
    assert len(predict_outputs(trainer.network, make_data(5)).logits) == 5


def test_predict_outputs_is_batch_independent_and_in_eval_mode() -> None:
    net = make_net()
    Trainer(net, ce, TrainConfig(max_epochs=2)).fit(make_data())
    data = make_data(50, 3)
    big = predict_outputs(net, data, batch_size=1000, with_masks=True)
    small = predict_outputs(net, data, batch_size=7, with_masks=True)
    torch.testing.assert_close(big.logits, small.logits)
    torch.testing.assert_close(big.masks, small.masks)
    assert big.masks.shape == (2, 50, 4)


def test_unknown_schedule_is_rejected() -> None:
    with pytest.raises(ValueError, match="lr_schedule='linear'"):
        Trainer(make_net(), ce, TrainConfig(max_epochs=1, lr_schedule="linear")).fit(make_data())


@pytest.mark.parametrize("schedule", ["constant", "cosine", "onecycle", "exponential"])
def test_every_schedule_trains(schedule: str) -> None:
    trainer = Trainer(make_net(), ce, TrainConfig(max_epochs=3, lr_schedule=schedule))
    trainer.fit(make_data())
    assert len(trainer.history) == 3
    assert all(math.isfinite(r["train_loss"]) for r in trainer.history)


def test_small_batches_train_on_one_thread_and_the_setting_is_restored() -> None:
    net = make_net()
    outer = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert training_threads(64, 10_000, net) == 1
        assert training_threads(1 << 20, 1 << 20, net) == 2  # capped by the setting
        seen: list[int] = []

        class Record(Callback):
            def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
                seen.append(torch.get_num_threads())

        cfg = TrainConfig(max_epochs=2, batch_size=64)
        Trainer(net, ce, cfg, callbacks=[Record()]).fit(make_data())
        assert seen == [1, 1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(outer)


def test_snapshot_is_an_independent_copy_of_the_state_dict() -> None:
    from tabsparse.training import snapshot

    net = make_net()
    state = snapshot(net)
    reference = net.state_dict()
    expected = {key: value.clone() for key, value in reference.items()}
    assert list(state) == list(reference)
    assert state._metadata == reference._metadata  # type: ignore[attr-defined]
    # one shared Linear layer, listed under several names, stays one tensor
    shared = [k for k in state if k.endswith("shared.layers.0.fc.weight")]
    assert len(shared) > 1 and len({id(state[k]) for k in shared}) == 1
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    net.train()
    net(torch.randn(64, 4), torch.zeros(64, 0, dtype=torch.int64))  # running statistics move
    assert not torch.equal(net.state_dict()["head.bias"], expected["head.bias"])
    for key, value in expected.items():  # the snapshot did not move with the network
        torch.testing.assert_close(state[key], value, rtol=0, atol=0)
    net.load_state_dict(state)
    for key, value in expected.items():
        torch.testing.assert_close(net.state_dict()[key], value, rtol=0, atol=0)


def test_auto_batch_size_gives_small_tables_enough_steps_per_epoch() -> None:
    # 1024 (pytorch-tabnet's default) from 16 x 1024 rows on; below, the largest power of
    # two with at least 16 steps per epoch, never under 128 rows nor under one virtual batch
    assert [auto_batch_size(n) for n in (1_000_000, 16_384, 16_383, 5_000, 2_000, 300, 0)] == [
        1024,
        1024,
        512,
        256,
        128,
        128,
        128,
    ]
    assert auto_batch_size(2_000, virtual_batch_size=256) == 256
    assert auto_batch_size(100_000, virtual_batch_size=2048) == 2048
    assert inference_batch_size("auto") == inference_batch_size(1024) == 16384
    assert inference_batch_size(50_000) == 50_000


def test_events_reach_callbacks_in_the_order_of_a_fit() -> None:
    class Recorder(Callback):
        def __init__(self) -> None:
            self.events: list[str] = []

        def on_setup(self, trainer: Trainer) -> None:
            self.events.append("setup")

        def on_fit_begin(self, trainer: Trainer) -> None:
            self.events.append("fit_begin")

        def on_epoch_begin(self, trainer: Trainer) -> None:
            self.events.append(f"epoch_begin {trainer.epoch}")

        def on_batch_end(self, trainer: Trainer) -> None:
            self.events.append("batch")

        def on_batches_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            self.events.append(f"batches_end {sorted(record)}")

        def on_validation_begin(self, trainer: Trainer) -> None:
            self.events.append("validation_begin")

        def on_validation_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            self.events.append(f"validation_end {'val_score' in record}")

        def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            self.events.append(f"epoch_end {len(trainer.history)}")

        def on_fit_end(self, trainer: Trainer) -> None:
            self.events.append("fit_end")

    rec = Recorder()
    cfg = TrainConfig(max_epochs=2, batch_size=100)
    Trainer(make_net(), ce, cfg, callbacks=[rec]).fit(make_data(200), make_data(50, 1))
    epoch = [
        "batch",
        "batch",  # 200 rows in batches of 100
        "batches_end ['epoch', 'learning_rate', 'train_loss']",
        "validation_begin",
        "validation_end True",
    ]
    assert rec.events == [
        "setup",
        "fit_begin",
        "epoch_begin 0",
        *epoch,
        "epoch_end 1",
        "epoch_begin 1",
        *epoch,
        "epoch_end 2",
        "fit_end",
    ]


def test_trainer_builds_its_callbacks_from_the_config(tmp_path: Any) -> None:
    kinds = [type(cb) for cb in default_callbacks(TrainConfig(lr_schedule="constant"))]
    assert kinds == [EarlyStopping]
    cfg = TrainConfig(ema_decay=0.9, compile="auto", verbose=2, checkpoint_dir=tmp_path)
    kinds = [type(cb) for cb in default_callbacks(cfg)]
    assert kinds == [
        EarlyStopping,
        LRSchedule,
        WeightAveraging,
        CompileTrial,
        EpochLog,
        Checkpointing,
    ]
    # log and checkpoints on rank 0 only
    other_rank = DistContext(rank=1, world_size=2, local_rank=1, backend="gloo")
    kinds = [type(cb) for cb in default_callbacks(cfg, other_rank)]
    assert kinds == [EarlyStopping, LRSchedule, WeightAveraging, CompileTrial]


def test_batch_hooks_are_only_called_where_overridden() -> None:
    class Counter(Callback):
        def __init__(self) -> None:
            self.batches = 0

        def on_batch_end(self, trainer: Trainer) -> None:
            self.batches += 1

    plain = [Callback(), EarlyStopping(None, 0.0)]
    assert Hooks(plain)["on_batch_end"] == []
    assert Hooks(plain)["on_validation_end"] == [plain[1].on_validation_end]
    counter = Counter()
    cfg = TrainConfig(max_epochs=3, batch_size=64, lr_schedule="constant")
    trainer = Trainer(make_net(), ce, cfg, callbacks=[counter]).fit(make_data(200))
    assert counter.batches == 3 * 4  # ceil(200 / 64) batches per epoch
    assert Hooks(trainer.fit_callbacks)["on_batch_end"] == [counter.on_batch_end]


def test_early_stopping_sets_stop_after_patience_epochs_without_improvement() -> None:
    net = make_net()
    stopping = EarlyStopping(patience=2, tol=0.0)

    class Fake:
        network = net
        best_iteration: int | None = None
        stop = False

    trainer: Any = Fake()
    stopping.on_setup(trainer)
    for epoch, score in enumerate([0.5, 0.7, 0.7, 0.6]):
        stopping.on_validation_end(trainer, {"epoch": float(epoch), "val_score": score})
        assert stopping.improved is (epoch in (0, 1))
        assert trainer.stop is (epoch == 3)
    assert trainer.best_iteration == 1 and stopping.best_score == 0.7
    # without validation every epoch is the latest best, and the fit never stops early
    stopping.on_setup(trainer)
    trainer.stop = False
    for epoch in range(4):
        stopping.on_validation_end(trainer, {"epoch": float(epoch), "train_loss": 1.0})
    assert trainer.best_iteration == 3 and not trainer.stop


def test_user_fit_begin_sees_the_restored_fit(tmp_path: Any) -> None:
    class Stop(Callback):
        def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
            trainer.stop = len(trainer.history) == 2

    class Seen(Callback):
        def on_fit_begin(self, trainer: Trainer) -> None:
            self.history = len(trainer.history)

    cfg = TrainConfig(max_epochs=4, batch_size=64, checkpoint_dir=tmp_path)
    Trainer(make_net(), ce, cfg, callbacks=[Stop()]).fit(make_data())
    seen = Seen()
    resumed = Trainer(make_net(), ce, TrainConfig(max_epochs=4, batch_size=64), callbacks=[seen])
    resumed.fit(make_data(), resume=load_checkpoint(tmp_path))
    assert seen.history == 2 and len(resumed.history) == 4


def test_epoch_log_shows_the_watched_score_by_name_and_sign(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def accuracy(logits: torch.Tensor, data: Any) -> float:
        return 0.75

    named: Any = lambda logits, data: -0.3125  # noqa: E731
    named.name = "neg_log_loss"

    class Fake:
        score_fn: Any = None

    trainer: Any = Fake()
    base = {"epoch": 2.0, "train_loss": 0.5, "seconds": 0.125}
    head = "epoch    3  train_loss 0.50000  "
    cases = [
        (None, {}, head + "0.12s"),
        (None, {"val_loss": 0.25, "val_score": -0.25}, head + "val_loss 0.25000  0.12s"),
        (
            named,
            {"val_loss": 0.3125, "val_score": -0.3125},
            head + "val_loss 0.31250  neg_log_loss -0.31250  0.12s",
        ),
        (
            accuracy,
            {"val_loss": 0.4, "val_score": 0.75},
            head + "val_loss 0.40000  val_score 0.75000  0.12s",
        ),
    ]
    for score_fn, extra, expected in cases:
        trainer.score_fn = score_fn
        caplog.clear()
        with caplog.at_level("INFO", logger="tabsparse"):
            EpochLog().on_epoch_end(trainer, {**base, **extra})
        assert [r.getMessage() for r in caplog.records] == [expected]
    # an estimator's scoring, as its history records it
    from tabsparse import TabNetClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    settings: dict[str, Any] = {"max_epochs": 2, "n_d": 4, "n_a": 4, "random_state": 0}
    for scoring in ("neg_log_loss", "loss"):
        caplog.clear()
        with caplog.at_level("INFO", logger="tabsparse"):
            clf = TabNetClassifier(**settings, scoring=scoring, verbose=2)
            clf.fit(X[:150], y[:150], X_val=X[150:], y_val=y[150:])
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch")]
        for line, record in zip(lines, clf.history_, strict=True):
            assert f"val_loss {record['val_loss']:.5f}" in line
            shown = f"neg_log_loss {record['val_score']:.5f}"
            assert (shown in line) is (scoring == "neg_log_loss"), line
            assert "val_score" not in line
