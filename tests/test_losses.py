"""Tests of tabsparse.losses: the sparsemax loss of Martins & Astudillo (2016) and the
label-smoothed cross-entropy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tabsparse.losses import SparsemaxLoss, smoothed_cross_entropy, sparsemax_loss
from tabsparse.sparsemax import sparsemax


def np_threshold(z: np.ndarray) -> np.ndarray:
    """Sort-based sparsemax threshold of each row, float64."""
    zs = -np.sort(-z, axis=1)
    k = np.arange(1, z.shape[1] + 1)
    cs = np.cumsum(zs, axis=1)
    k_z = (1 + k * zs > cs).sum(axis=1)
    return (cs[np.arange(z.shape[0]), k_z - 1] - 1) / k_z


def np_loss(z: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Paper's closed form: -q.z + 1/2 sum_{j in S(z)} (z_j^2 - tau^2) + 1/2 |q|^2."""
    z = np.asarray(z, dtype=np.float64)
    tau = np_threshold(z)[:, None]
    support = z > tau
    quad = np.where(support, z**2 - tau**2, 0.0).sum(axis=1)
    return -(q * z).sum(axis=1) + 0.5 * quad + 0.5 * (q**2).sum(axis=1)


def one_hot(y: np.ndarray, k: int) -> np.ndarray:
    q = np.zeros((y.shape[0], k))
    q[np.arange(y.shape[0]), y] = 1.0
    return q


@pytest.mark.parametrize(("n", "k", "scale"), [(50, 2, 1.0), (40, 7, 0.3), (30, 20, 3.0)])
def test_multiclass_matches_closed_form(n: int, k: int, scale: float) -> None:
    rng = np.random.default_rng(k)
    z = rng.normal(size=(n, k)) * scale
    y = rng.integers(0, k, size=n)
    got = sparsemax_loss(torch.from_numpy(z), torch.from_numpy(y), reduction="none")
    np.testing.assert_allclose(got.numpy(), np_loss(z, one_hot(y, k)), atol=1e-12)


def test_multilabel_matches_closed_form() -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(60, 9)) * 2
    multi_hot = (rng.random((60, 9)) < 0.3).astype(np.float64)
    multi_hot[:, 0] = 1.0  # at least one label per row
    q = multi_hot / multi_hot.sum(axis=1, keepdims=True)
    for target in (torch.from_numpy(multi_hot), torch.from_numpy(multi_hot).bool()):
        got = sparsemax_loss(torch.from_numpy(z), target, reduction="none")
        np.testing.assert_allclose(got.numpy(), np_loss(z, q), atol=1e-12)
    # A probability matrix is used as is (it already sums to one).
    got = sparsemax_loss(torch.from_numpy(z), torch.from_numpy(q), reduction="none")
    np.testing.assert_allclose(got.numpy(), np_loss(z, q), atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("multilabel", [False, True])
def test_gradient_is_sparsemax_minus_q(reduction: str, multilabel: bool) -> None:
    g = torch.Generator().manual_seed(1)
    n, k = 25, 8
    z = (torch.randn(n, k, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    if multilabel:
        target = (torch.rand(n, k, generator=g) < 0.4).double()
        target[:, 3] = 1.0
        q = target / target.sum(1, keepdim=True)
    else:
        target = torch.randint(0, k, (n,), generator=g)
        q = torch.nn.functional.one_hot(target, k).double()
    loss = sparsemax_loss(z, target, reduction=reduction)
    if reduction == "none":
        assert loss.shape == (n,)
        loss = loss.sum()
    loss.backward()
    expected = sparsemax(z.detach()) - q
    if reduction == "mean":
        expected = expected / n
    assert z.grad is not None
    torch.testing.assert_close(z.grad, expected, atol=1e-14, rtol=0)


def test_gradcheck() -> None:
    g = torch.Generator().manual_seed(2)
    # Spread, tie-free logits keep every score away from the threshold.
    z = (torch.randperm(30, generator=g).double().reshape(5, 6) * 0.13).requires_grad_(True)
    y = torch.tensor([0, 5, 2, 2, 1])
    assert torch.autograd.gradcheck(lambda t: sparsemax_loss(t, y, "sum"), (z,))
    multi = torch.zeros(5, 6, dtype=torch.float64)
    multi[:, ::2] = 1.0
    assert torch.autograd.gradcheck(lambda t: sparsemax_loss(t, multi, "none"), (z,))


@settings(max_examples=60, deadline=None)
@given(
    z=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
        elements=st.floats(-30, 30, allow_nan=False),
    ),
    seed=st.integers(0, 2**16),
)
def test_non_negative_and_closed_form(z: np.ndarray, seed: int) -> None:
    n, k = z.shape
    y = np.random.default_rng(seed).integers(0, k, size=n)
    loss = sparsemax_loss(torch.from_numpy(z), torch.from_numpy(y), reduction="none").numpy()
    assert (loss >= 0).all()
    np.testing.assert_allclose(loss, np_loss(z, one_hot(y, k)), atol=1e-9, rtol=1e-12)


def test_zero_when_target_is_one_hot_sparsemax() -> None:
    g = torch.Generator().manual_seed(3)
    z = torch.randn(20, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 6, (20,), generator=g)
    rows = torch.arange(20)
    others = z.clone()
    others[rows, y] = float("-inf")
    z[rows, y] = others.max(1).values + 1.5  # leads by more than 1: one-hot sparsemax
    loss = sparsemax_loss(z, y, reduction="none")
    assert torch.equal(loss, torch.zeros(20, dtype=torch.float64))
    # Not zero as soon as the margin is below one.
    z[rows, y] -= 1.0  # leads by 0.5
    assert (sparsemax_loss(z, y, reduction="none") > 0).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_two_class_huber_form(dtype: torch.dtype) -> None:
    t = torch.linspace(-3, 3, 121, dtype=torch.float64)
    other = torch.randn(121, dtype=torch.float64)
    z = torch.stack([other + t, other], dim=1).to(dtype)  # class 0 is the true class
    loss = sparsemax_loss(z, torch.zeros(121, dtype=torch.long), reduction="none")
    t = (z[:, 0] - z[:, 1]).double()
    expected = torch.where(t >= 1, 0.0, torch.where(t <= -1, -t, (t - 1) ** 2 / 4))
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    torch.testing.assert_close(loss.double(), expected, atol=tol, rtol=0)


def test_reductions_and_weights() -> None:
    g = torch.Generator().manual_seed(4)
    z = torch.randn(10, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (10,), generator=g)
    per = sparsemax_loss(z, y, reduction="none")
    torch.testing.assert_close(sparsemax_loss(z, y), per.mean())
    torch.testing.assert_close(sparsemax_loss(z, y, reduction="sum"), per.sum())
    w = torch.rand(10, generator=g, dtype=torch.float64)
    torch.testing.assert_close(sparsemax_loss(z, y, "none", weight=w), per * w)
    torch.testing.assert_close(sparsemax_loss(z, y, "sum", weight=w), (per * w).sum())
    torch.testing.assert_close(sparsemax_loss(z, y, "mean", weight=w), (per * w).sum() / w.sum())
    module = SparsemaxLoss(reduction="sum")
    assert repr(module) == "SparsemaxLoss(reduction='sum', dim=-1)"
    torch.testing.assert_close(module(z, y), per.sum())
    torch.testing.assert_close(SparsemaxLoss()(z, y, w), (per * w).sum() / w.sum())


def test_bad_reduction_is_named() -> None:
    z, y = torch.zeros(3, 2), torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match="'average'"):
        sparsemax_loss(z, y, reduction="average")
    with pytest.raises(ValueError, match="'max'"):
        SparsemaxLoss(reduction="max")


def test_shape_validation() -> None:
    z = torch.zeros(4, 3)
    with pytest.raises(ValueError, match=r"target has shape \(5,\), expected \(4,\)"):
        sparsemax_loss(z, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"target has shape \(4, 2\), expected \(4, 3\)"):
        sparsemax_loss(z, torch.zeros(4, 2))
    with pytest.raises(ValueError, match="logits must be 2-D"):
        sparsemax_loss(torch.zeros(4, 3, 2), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"target class indices must lie in \[0, 3\)"):
        sparsemax_loss(z, torch.tensor([0, 1, 3, 0]))
    with pytest.raises(ValueError, match="integer class indices"):
        sparsemax_loss(z, torch.zeros(4))
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        sparsemax_loss(z, torch.zeros(4, dtype=torch.long), weight=torch.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        sparsemax_loss(z, -torch.ones(4, 3))


def test_all_zero_target_row_raises() -> None:
    target = torch.ones(4, 3)
    target[2] = 0.0
    with pytest.raises(ValueError, match=r"target rows \[2\] are all zero"):
        sparsemax_loss(torch.zeros(4, 3), target)


def test_neg_inf_logits() -> None:
    inf = float("inf")
    z = torch.tensor(
        [[1.0, -inf, 0.5, -inf], [0.0, 2.0, -inf, 1.0], [-inf, 0.3, 0.2, 0.1]],
        dtype=torch.float64,
        requires_grad=True,
    )
    y = torch.tensor([0, 1, 0])  # the last sample's target has a -inf logit
    loss = sparsemax_loss(z, y, reduction="none")
    assert torch.isfinite(loss[:2]).all()
    assert loss[2] == inf  # documented: infinite, never NaN
    finite = z.detach()[:2, [0, 2]], z.detach()[1:2, [0, 1, 3]]
    torch.testing.assert_close(loss[0], sparsemax_loss(finite[0][:1], torch.tensor([0]), "sum"))
    torch.testing.assert_close(loss[1], sparsemax_loss(finite[1], torch.tensor([1]), "sum"))
    loss[:2].sum().backward()
    assert z.grad is not None
    assert torch.isfinite(z.grad).all()
    assert z.grad[0, 1] == 0 and z.grad[0, 3] == 0 and z.grad[1, 2] == 0


def test_multilabel_with_neg_inf_on_non_targets() -> None:
    z = torch.tensor([[1.0, float("-inf"), 0.0]], dtype=torch.float64)
    multi = torch.tensor([[1.0, 0.0, 1.0]])
    loss = sparsemax_loss(z, multi, reduction="none")
    expected = np_loss(np.array([[1.0, -50.0, 0.0]]), np.array([[0.5, 0.0, 0.5]]))
    np.testing.assert_allclose(loss.numpy(), expected, atol=1e-12)


def test_half_precision_and_dim() -> None:
    g = torch.Generator().manual_seed(5)
    z = torch.randn(16, 5, generator=g)
    y = torch.randint(0, 5, (16,), generator=g)
    ref = sparsemax_loss(z.double(), y, reduction="none")
    for dtype in (torch.float16, torch.bfloat16):
        zh = z.to(dtype).requires_grad_(True)
        loss = sparsemax_loss(zh, y, reduction="none")
        assert loss.dtype == dtype
        torch.testing.assert_close(loss.double(), ref, atol=3e-2, rtol=3e-2)
        loss.sum().backward()
        assert zh.grad is not None and zh.grad.dtype == dtype
    # Classes along dim 0.
    torch.testing.assert_close(sparsemax_loss(z.t(), y, "none", dim=0), ref.float())
    multi = (torch.rand(16, 5, generator=g) < 0.5).float()
    multi[:, 0] = 1
    torch.testing.assert_close(
        sparsemax_loss(z.t(), multi.t(), "none", dim=0), sparsemax_loss(z, multi, "none")
    )


def test_empty_batch() -> None:
    z = torch.zeros(0, 4, requires_grad=True)
    y = torch.zeros(0, dtype=torch.long)
    assert sparsemax_loss(z, y, reduction="sum").item() == 0.0
    assert sparsemax_loss(z, y, reduction="none").shape == (0,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
def test_cuda() -> None:
    g = torch.Generator().manual_seed(6)
    z = torch.randn(32, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 6, (32,), generator=g)
    zc = z.cuda().requires_grad_(True)
    loss = sparsemax_loss(zc, y.cuda())
    torch.testing.assert_close(loss.cpu(), sparsemax_loss(z, y))
    loss.backward()
    assert zc.grad is not None
    expected = (sparsemax(z) - torch.nn.functional.one_hot(y, 6).double()) / 32
    torch.testing.assert_close(zc.grad.cpu(), expected)


def test_smoothed_cross_entropy_by_hand() -> None:
    # two classes, logits (0, ln 3): p = (1/4, 3/4); eps = 0.2 puts 0.9 on the true class, 0.1
    # on the other
    z = torch.tensor([[0.0, float(np.log(3.0))], [0.0, float(np.log(3.0))]], dtype=torch.float64)
    y = torch.tensor([1, 0])
    got = smoothed_cross_entropy(z, y, 0.2)
    expected = torch.tensor(
        [
            -(0.9 * np.log(0.75) + 0.1 * np.log(0.25)),
            -(0.9 * np.log(0.25) + 0.1 * np.log(0.75)),
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(got, expected)
    # eps = 0: the plain cross-entropy, -log p_y
    plain = torch.tensor([-np.log(0.75), -np.log(0.25)], dtype=torch.float64)
    torch.testing.assert_close(smoothed_cross_entropy(z, y), plain)
    # its gradient is softmax(z) - smoothed one-hot target
    z.requires_grad_(True)
    smoothed_cross_entropy(z, y, 0.2).sum().backward()
    target = torch.tensor([[0.1, 0.9], [0.9, 0.1]], dtype=torch.float64)
    torch.testing.assert_close(z.grad, torch.softmax(z.detach(), 1) - target)


@pytest.mark.parametrize("eps", [-0.1, 1.0])
def test_smoothed_cross_entropy_refuses_smoothing_outside_0_1(eps: float) -> None:
    with pytest.raises(ValueError, match=rf"label_smoothing must be in \[0, 1\), got {eps}"):
        smoothed_cross_entropy(torch.zeros(1, 2), torch.tensor([0]), eps)
