"""Column revival (a fixed choice of the estimators: 3 epochs, no pruning): columns that fall out
of the shared first mask early are put back for a trial; with pruning, after it the columns below
the uniform share are pruned from it (:mod:`tabsparse.nn.shared_mask`,
:class:`tabsparse.training.ColumnRevival`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fixed_helpers import with_fixed
from model_file_helpers import edit_doc, read_members, write_members

from tabsparse import TabNetClassifier, TabNetRegressor, load, save
from tabsparse.nn import TabNetEncoder, shared_mask
from tabsparse.optim import AdamW
from tabsparse.sparsemax import sparsemax
from tabsparse.training import Callback, ColumnRevival, TrainConfig
from tabsparse.training.loop import default_callbacks

# sparsemax support {2.0, 1.6, 1.5}: threshold tau = (5.1 - 1) / 3 = 1.36667
BIAS = [2.0, 1.6, 1.3, -3.0, 1.5, -4.0]
TAU = 4.1 / 3


def _encoder(first_mask: str = "shared", mask_type: str = "sparsemax") -> TabNetEncoder:
    enc = TabNetEncoder(
        input_dim=6, group_index=list(range(6)), first_mask=first_mask, mask_type=mask_type
    )
    with torch.no_grad():
        enc.attention[0].bn.bias.copy_(torch.tensor(BIAS))
    return enc


def test_the_shared_first_mask_is_the_sparsemax_of_the_first_attention_bias() -> None:
    enc = _encoder()
    mask = shared_mask.shared_first_mask(enc)
    assert mask is not None
    expected = torch.tensor(BIAS).sub(TAU).clamp(min=0)
    torch.testing.assert_close(expected.sum(), torch.tensor(1.0))
    torch.testing.assert_close(mask, expected)
    # the encoder computes the same first mask for every row, in training and in eval
    for training in (True, False):
        enc.train(training)
        out = enc(torch.randn(300, 6))
        torch.testing.assert_close(out.masks[0], expected.expand(300, 6))


def test_revive_puts_every_dead_column_back_just_above_the_threshold() -> None:
    enc = _encoder()
    before = sparsemax(enc.attention[0].bn.bias.detach())
    changed = shared_mask.revive(enc, weight=0.05)
    assert changed.tolist() == [False, False, True, True, False, True]
    bias = enc.attention[0].bn.bias.detach()
    torch.testing.assert_close(bias[changed], torch.full((3,), TAU + 0.05))
    after = sparsemax(bias)
    assert bool((after > 0).all())
    # the live columns keep their order and their biases
    torch.testing.assert_close(bias[~changed], torch.tensor(BIAS)[~changed])
    assert after[~changed].argsort().tolist() == before[~changed].argsort().tolist()
    assert not shared_mask.revive(enc).any()  # nothing left to revive


def test_prune_keeps_exactly_the_columns_at_or_above_the_uniform_share() -> None:
    enc = _encoder()
    shared_mask.revive(enc)
    bias = enc.attention[0].bn.bias.detach()
    # all six in: tau = (2 + 1.6 + 1.5 + 3 * (TAU + 0.05) - 1) / 6; weights 0.61, 0.21, 0.11,
    # 0.025 (three times): only the first two reach 1 / 6
    weights = sparsemax(bias.clone())
    assert (weights >= 1 / 6).tolist() == [True, True, False, False, False, False]
    changed = shared_mask.prune(enc)
    assert changed.tolist() == [False, False, True, True, True, True]
    after = sparsemax(bias)
    # the new mask is the sparsemax of the kept biases alone: (2 - 1.3, 1.6 - 1.3)
    torch.testing.assert_close(after, torch.tensor([0.7, 0.3, 0.0, 0.0, 0.0, 0.0]))
    torch.testing.assert_close(bias[changed], torch.full((4,), 1.3 - 0.05))


def test_prune_lowers_dead_columns_that_the_new_threshold_would_let_in() -> None:
    enc = _encoder()
    # without revival: weights 0.63, 0.23, 0, 0, 0.13, 0; keeping the two heaviest lowers the
    # threshold to 1.3, where column 2 (bias 1.3) would sit; it is lowered too
    changed = shared_mask.prune(enc)
    assert changed.tolist() == [False, False, True, False, True, False]
    after = sparsemax(enc.attention[0].bn.bias.detach())
    torch.testing.assert_close(after, torch.tensor([0.7, 0.3, 0.0, 0.0, 0.0, 0.0]))
    assert enc.attention[0].bn.bias[3] == -3.0  # far below: untouched


def test_prune_keeps_the_heaviest_column_whatever_the_share() -> None:
    enc = _encoder()
    changed = shared_mask.prune(enc, share=2.0)
    after = sparsemax(enc.attention[0].bn.bias.detach())
    assert after.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert changed.tolist() == [False, True, True, False, True, False]


@pytest.mark.parametrize(
    ("first_mask", "mask_type"), [("per_row", "sparsemax"), ("shared", "entmax")]
)
def test_encoders_without_a_shared_sparsemax_first_mask_are_left_alone(
    first_mask: str, mask_type: str
) -> None:
    enc = _encoder(first_mask, mask_type)
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    assert shared_mask.editable_bias(enc) is None
    assert shared_mask.shared_first_mask(enc) is None
    assert not shared_mask.revive(enc).any() and not shared_mask.prune(enc).any()
    for k, v in enc.state_dict().items():
        torch.testing.assert_close(v, before[k])


@pytest.mark.parametrize("flat", [False, True])
def test_reset_momentum_zeroes_only_the_given_entries(flat: bool) -> None:
    a, b = torch.nn.Parameter(torch.zeros(4)), torch.nn.Parameter(torch.zeros(3))
    opt = AdamW([a, b], lr=0.1, flat=flat)
    for _ in range(2):
        opt.zero_grad()
        (a * torch.arange(1.0, 5.0)).sum().add((b * 2).sum()).backward()
        opt.step()
    m_a, v_a, m_b = opt.exp_avg[0].clone(), opt.exp_avg_sq[0].clone(), opt.exp_avg[1].clone()
    opt.reset_momentum(a, torch.tensor([True, False, True, False]))
    assert opt.exp_avg[0].tolist() == [0.0, float(m_a[1]), 0.0, float(m_a[3])]
    torch.testing.assert_close(opt.exp_avg_sq[0], v_a)  # the second moment is kept
    torch.testing.assert_close(opt.exp_avg[1], m_b)
    with pytest.raises(ValueError, match="not one this optimiser updates"):
        opt.reset_momentum(torch.nn.Parameter(torch.zeros(4)), torch.tensor([0]))


def test_the_trainer_runs_the_revival_after_the_schedule_and_before_the_log() -> None:
    cbs = default_callbacks(TrainConfig(column_revival=2, verbose=2))
    kinds = [type(cb).__name__ for cb in cbs]
    assert kinds.index("LRSchedule") < kinds.index("ColumnRevival") < kinds.index("EpochLog")
    revival = cbs[kinds.index("ColumnRevival")]
    assert isinstance(revival, ColumnRevival) and (revival.epochs, revival.prune) == (2, False)
    assert "ColumnRevival" not in [type(cb).__name__ for cb in default_callbacks(TrainConfig())]
    (pruning,) = [
        cb
        for cb in default_callbacks(TrainConfig(column_pruning=True))
        if type(cb) is ColumnRevival
    ]
    assert (pruning.epochs, pruning.prune) == (0, True)
    with pytest.raises(ValueError, match=r"epochs=0 must be >= 1, or >= 0 with prune=True"):
        ColumnRevival(0)
    with pytest.raises(ValueError, match="epochs=-1"):
        ColumnRevival(-1, prune=True)


class _Watch(Callback):
    """Records the shared first mask after every epoch (user callbacks run after the trainer's
    own, so it sees the edits)."""

    def __init__(self) -> None:
        self.masks: list[torch.Tensor] = []

    def on_epoch_end(self, trainer: Any, record: dict[str, float]) -> None:
        mask = shared_mask.shared_first_mask(trainer.network.encoder)
        assert mask is not None
        self.masks.append(mask.clone())


def _data(n: int = 600, d: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    return X, (X[:, 0] + X[:, 1] - X[:, 2] > 0).astype(int)


FIXED = ("column_revival", "column_pruning")


def _fit(**params: Any) -> tuple[TabNetClassifier, _Watch]:
    """A small fit with a shared first mask; ``column_revival`` / ``column_pruning`` replace the
    fixed choices."""
    watch = _Watch()
    fixed = {"first_mask": "shared", **{k: params.pop(k) for k in FIXED if k in params}}
    params = {
        "n_d": 8,
        "n_a": 8,
        "max_epochs": 8,
        "random_state": 0,
        "device": "cpu",
        "callbacks": [watch],
        "early_stopping": True,
        **params,
    }
    est = with_fixed(TabNetClassifier(**params), **fixed).fit(*_data())
    return est, watch


def test_a_fit_revives_then_prunes() -> None:
    _, watch = _fit(column_revival=2, column_pruning=True, n_iter_no_change=3)
    first, second, third = watch.masks[:3]
    assert bool((first > 0).all()) and bool((second > 0).all())  # every column in after epochs 1, 2
    assert bool((third == 0).any())  # pruned after epoch 3
    assert float(third[third > 0].min()) >= 1 / 12


def _edits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the edits (revive or prune) the callback makes, in order."""
    calls: list[str] = []
    for name in ("revive", "prune"):
        real = getattr(shared_mask, name)

        def record(encoder: Any, _name: str = name, _real: Any = real) -> torch.Tensor:
            calls.append(_name)
            return _real(encoder)

        monkeypatch.setattr(shared_mask, name, record)
    return calls


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["revive", "revive", "revive"]),  # the default: revival alone, 3 epochs
        ({"column_revival": 2, "column_pruning": True}, ["revive", "revive", "prune"]),
        ({"column_revival": 0, "column_pruning": True}, ["prune"]),  # after the first epoch
        ({"column_revival": 0}, []),
    ],
)
def test_which_edits_a_fit_makes(
    monkeypatch: pytest.MonkeyPatch, params: dict[str, Any], expected: list[str]
) -> None:
    calls = _edits(monkeypatch)
    _, watch = _fit(max_epochs=8, n_iter_no_change=8, **params)
    assert len(watch.masks) == 8
    assert calls == expected
    fixed = TabNetClassifier()._fixed
    assert (fixed.column_revival, fixed.column_pruning) == (3, False)


#: a sparsity penalty under which columns of ``_data`` die within a few epochs on any processor
#: (at the default penalty, whether one dies in 8 epochs hangs on the fit's last bits: it did on
#: an Intel Xeon, not on an AMD EPYC)
KILLING = 0.1


def test_revival_alone_puts_every_dead_column_back_for_its_epochs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After each of its epochs the revival puts every column outside the mask back in; a
    column then left out is one whose weight was below the bump's rise of the threshold
    (``0.05 * m / n`` for ``m`` columns put back of ``n``; :func:`shared_mask.revive`)."""
    _, plain = _fit(column_revival=0, lambda_sparse=KILLING)
    assert bool((plain.masks[4] == 0).any()), "the data must let some columns die by epoch 5"
    edits: list[tuple[torch.Tensor, torch.Tensor]] = []
    real = shared_mask.revive

    def record(encoder: Any) -> torch.Tensor:
        before = shared_mask.shared_first_mask(encoder).clone()
        changed = real(encoder)
        edits.append((before, shared_mask.shared_first_mask(encoder).clone()))
        return changed

    monkeypatch.setattr(shared_mask, "revive", record)
    _fit(column_revival=5, lambda_sparse=KILLING)
    assert len(edits) == 5 and any(bool((b == 0).any()) for b, _ in edits)
    for before, after in edits:
        dead = before == 0
        assert bool((after[dead] > 0).all())  # every column outside is back in
        bound = 0.05 * int(dead.sum()) / dead.numel()
        assert bool((before[after == 0] < bound).all())  # only a nearly dead one left out


def test_without_revival_dead_columns_stay_dead_and_the_fit_is_reproducible() -> None:
    est, watch = _fit(column_revival=0, lambda_sparse=KILLING)
    dead = [set(np.flatnonzero(m.numpy() == 0)) for m in watch.masks]
    assert dead[-1], "the data must let some columns die"
    assert all(dead[i] <= dead[i + 1] for i in range(len(dead) - 1))  # none comes back
    again, _ = _fit(column_revival=0, lambda_sparse=KILLING)
    np.testing.assert_array_equal(est.predict_proba(_data()[0]), again.predict_proba(_data()[0]))


def test_no_edit_is_made_in_the_last_epoch_or_after_early_stopping_decided() -> None:
    # max_epochs = revival + 1: the pruning would come after the last epoch, where no later
    # epoch could judge it, so the fit keeps its best validated weights unchanged
    est, watch = _fit(column_revival=2, column_pruning=True, max_epochs=3, n_iter_no_change=10)
    final = shared_mask.shared_first_mask(est.network_.encoder)
    assert final is not None and est.best_iteration_ is not None
    assert bool((watch.masks[-1] > 0).all())  # revived after epoch 2, not pruned after 3


def test_a_continued_fit_does_not_revive() -> None:
    est, _ = _fit(column_revival=0, max_epochs=2)
    with torch.no_grad():
        est.network_.encoder.attention[0].bn.bias[[4, 7]] = -50.0
    dead = shared_mask.shared_first_mask(est.network_.encoder) == 0
    assert dead[[4, 7]].all()
    watch = _Watch()
    est.set_params(warm_start=True, callbacks=[watch], max_epochs=2)
    with_fixed(est, column_revival=3).fit(*_data())
    assert all(bool((m[dead] == 0).all()) for m in watch.masks)


def test_the_revival_is_not_a_parameter_and_files_that_name_it_load_as_fitted(
    tmp_path: Path,
) -> None:
    X, _ = _data()
    for name in FIXED:
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
            TabNetClassifier(**{name: 1})
        assert name not in TabNetRegressor().get_params()
    est, _ = _fit(column_revival=1, column_pruning=True, max_epochs=3, callbacks=None)
    path = tmp_path / "model.tabsparse"
    save(est, path)
    np.testing.assert_array_equal(load(path).predict_proba(X), est.predict_proba(X))

    # a file written while they were parameters names them: they shaped the training only
    def named(doc: dict[str, Any]) -> None:
        doc["params"].update(column_revival=1, column_pruning=True)

    old = tmp_path / "old.tabsparse"
    write_members(old, edit_doc(read_members(path), named))
    back = load(old)
    assert "column_revival" not in back.get_params()
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
