"""tabsparse.optim against torch.optim: the same updates and the same learning-rate schedules."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tabsparse.optim import AdamW, Schedule


def make_params(seed: int, dtype: torch.dtype = torch.float64) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.nn.Parameter(torch.randn(shape, generator=g, dtype=dtype))
        for shape in [(5, 3), (3,), (7,), ()]
    ]


def set_grads(params: list[torch.nn.Parameter], step: int) -> None:
    g = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_matches_torch(fused: bool, weight_decay: float) -> None:
    mine, ref = make_params(0), make_params(0)
    opt = AdamW(mine, lr=0.05, weight_decay=weight_decay, fused=fused)
    ref_opt = torch.optim.AdamW(ref, lr=0.05, weight_decay=weight_decay, foreach=False)
    for step in range(6):
        set_grads(mine, step)
        set_grads(ref, step)
        opt.step()
        ref_opt.step()
    for a, b in zip(mine, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_adamw_skips_parameters_without_gradients_and_round_trips_its_state() -> None:
    params = make_params(1)
    opt = AdamW(params, lr=0.1)
    set_grads(params, 0)
    params[2].grad = None
    before = params[2].detach().clone()
    opt.step()
    torch.testing.assert_close(params[2].detach(), before)
    state = opt.state_dict()
    clone = [torch.nn.Parameter(p.detach().clone()) for p in params]
    other = AdamW(clone, lr=0.1)
    other.load_state_dict(state)
    set_grads(params, 1)
    set_grads(clone, 1)
    opt.step()
    other.step()
    for a, b in zip(params, clone, strict=True):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="optimiser state for 4 parameters"):
        AdamW(params[:2], lr=0.1).load_state_dict(state)


def torch_schedule(kind: str, opt: torch.optim.Optimizer, total: int, gamma: float) -> object:
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=0.0)
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.02, total_steps=total)
    return torch.optim.lr_scheduler.ExponentialLR(opt, gamma=gamma)


@pytest.mark.parametrize("kind", ["cosine", "onecycle", "exponential"])
def test_schedules_match_torch(kind: str) -> None:
    total, gamma = 50, 0.97
    opt = AdamW(make_params(2), lr=0.02)
    sched = Schedule(opt, kind, total=total, gamma=gamma)
    ref_opt = torch.optim.AdamW(make_params(2), lr=0.02)
    ref = torch_schedule(kind, ref_opt, total, gamma)
    for _ in range(total):
        group = ref_opt.param_groups[0]
        assert opt.lr == pytest.approx(group["lr"], rel=1e-9, abs=1e-15)
        assert opt.betas[0] == pytest.approx(group["betas"][0], rel=1e-12)
        sched.step()
        ref.step()  # type: ignore[attr-defined]


def test_schedule_rejects_unknown_kinds_and_resumes() -> None:
    opt = AdamW(make_params(3), lr=0.1)
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'linear'"):
        Schedule(opt, "linear", total=10)
    sched = Schedule(opt, "cosine", total=10)
    for _ in range(4):
        sched.step()
    state = sched.state_dict()
    other = Schedule(AdamW(make_params(3), lr=0.1), "cosine", total=10)
    other.load_state_dict(state)
    assert other.optimizer.lr == opt.lr


def test_training_does_not_import_torch_dynamo() -> None:
    # the reason tabsparse.optim exists: torch.optim's first optimiser imports torch._dynamo
    code = (
        "import sys, numpy as np\n"
        "from tabsparse import TabNetClassifier\n"
        "X = np.random.default_rng(0).normal(size=(200, 4)).astype('float32')\n"
        "TabNetClassifier(max_epochs=2, device='cpu').fit(X, X[:, 0] > 0).predict(X)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("fused", [True, False])
def test_flat_mode_matches_separate_parameters_and_clips_like_torch(fused: bool) -> None:
    flat, plain = make_params(3), make_params(3)
    opt = AdamW(flat, lr=0.05, weight_decay=0.1, fused=fused, flat=True)
    ref = AdamW(plain, lr=0.05, weight_decay=0.1, fused=fused)
    storage = flat[0].untyped_storage().data_ptr()
    assert all(p.untyped_storage().data_ptr() == storage for p in flat)  # one buffer
    for step in range(5):
        opt.zero_grad()
        assert all(p.grad is not None and not p.grad.any() for p in flat)
        g = torch.Generator().manual_seed(200 + step)
        for p in flat:
            p.grad.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 3)  # type: ignore[union-attr]
        set_grads(plain, 0)
        g = torch.Generator().manual_seed(200 + step)
        for p in plain:
            p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype) * 3
        norm = opt.clip_grad_norm_(1.0)
        ref_norm = torch.nn.utils.clip_grad_norm_(plain, 1.0)
        torch.testing.assert_close(norm, ref_norm)
        for a, b in zip(flat, plain, strict=True):
            torch.testing.assert_close(a.grad, b.grad)
        opt.step()
        ref.step()
    for a, b in zip(flat, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    state = opt.state_dict()  # the same format as without flat buffers
    other = AdamW([torch.nn.Parameter(p.detach().clone()) for p in plain], lr=0.05)
    other.load_state_dict(state)
    torch.testing.assert_close(other.exp_avg, ref.exp_avg)
    opt.release()
    assert all(p.grad is None for p in flat)
    assert len({p.untyped_storage().data_ptr() for p in flat}) == len(flat)
    for a, b in zip(flat, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_plateau_schedule_divides_the_rate_after_patience_stalled_epochs_and_resumes() -> None:
    opt = AdamW(make_params(2), lr=0.1)
    sched = Schedule(opt, "plateau", total=100, patience=3, factor=0.5)
    for _ in range(5):
        sched.step()  # steps alone never change it
    assert opt.lr == 0.1
    seen = []
    for improved in [True, False, False, True, False, False, False, False, False, False, True]:
        sched.epoch_end(improved)
        seen.append(opt.lr)
    # an improvement resets the count; a reduction restarts it
    assert seen == pytest.approx([0.1] * 6 + [0.05] * 3 + [0.025] * 2, rel=1e-15)
    sched.epoch_end(False)
    sched.epoch_end(False)
    other = Schedule(AdamW(make_params(2), lr=0.1), "plateau", total=100, patience=3, factor=0.5)
    other.load_state_dict(sched.state_dict())
    assert other.optimizer.lr == pytest.approx(0.025, rel=1e-15)
    other.epoch_end(False)  # the third stalled epoch: the count travelled with the state
    assert other.optimizer.lr == pytest.approx(0.0125, rel=1e-15)
    for kind in ("cosine", "constant"):  # the other schedules ignore the epoch signal
        s = Schedule(AdamW(make_params(2), lr=0.1), kind, total=10, patience=1)
        s.epoch_end(False)
        assert s.optimizer.lr == 0.1
