"""Tests of tabsparse.sparsemax: exactness, gradients, properties, edge cases and modules.

The algorithm's internal paths (search, pruning, fallbacks, scratch chunks) are tested in
test_sparsemax_search.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sparsemax_refs import (
    FUNCS,
    NP_REFS,
    far_from_threshold,
    np_entmax15,
    np_entmax15_bisect,
    patch,
    separated,
)

from tabsparse.sparsemax import Entmax15, Sparsemax, entmax15, sparsemax


@pytest.fixture(autouse=True)
def _search_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small inputs normally use the sort-based algorithm; test the sort-free search on them.

    ``test_small_inputs_use_sort_path`` covers the sort-based path with the default setting.
    """
    patch(monkeypatch, "_SORT_MAX_WORK", 0)


# --------------------------------------------------------------------------------------------
# Exactness against references
# --------------------------------------------------------------------------------------------

SHAPES_DIMS = [
    ((7,), 0),
    ((5, 9), -1),
    ((5, 9), 0),
    ((4, 1, 6), 0),
    ((4, 1, 6), 1),
    ((4, 1, 6), 2),
    ((4, 1, 6), -1),
    ((2, 3, 4, 5), 2),
    ((3, 130), 1),  # pruned path, width not a multiple of the block
    ((6, 200), -1),
    ((2, 1000), 1),
    ((1000, 3), 0),
]


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize(("shape", "dim"), SHAPES_DIMS)
@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_matches_numpy_reference(name: str, shape: tuple[int, ...], dim: int, scale: float) -> None:
    g = torch.Generator().manual_seed(hash((name, shape, dim)) % 2**31)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    expected = NP_REFS[name](x.numpy(), axis=dim)
    y64 = FUNCS[name](x, dim)
    np.testing.assert_allclose(y64.numpy(), expected, rtol=0, atol=1e-12)
    y32 = FUNCS[name](x.float(), dim)
    assert y32.dtype == torch.float32
    expected32 = NP_REFS[name](x.float().double().numpy(), axis=dim)
    np.testing.assert_allclose(y32.double().numpy(), expected32, rtol=0, atol=2e-6)


def test_numpy_entmax_references_agree() -> None:
    x = np.random.default_rng(0).normal(size=(50, 40)) * 3
    np.testing.assert_allclose(np_entmax15(x), np_entmax15_bisect(x), atol=1e-10)


@pytest.mark.parametrize("d", [3, 16, 64, 127, 512, 4096])
@pytest.mark.parametrize(
    "dist", ["randn", "small", "large", "uniform", "ties", "linear", "sparse_inf"]
)
def test_wide_rows_and_distributions(d: int, dist: str) -> None:
    g = torch.Generator().manual_seed(d)
    n = 32
    if dist == "randn":
        x = torch.randn(n, d, generator=g, dtype=torch.float64)
    elif dist == "small":
        x = torch.randn(n, d, generator=g, dtype=torch.float64) * 0.01
    elif dist == "large":
        x = torch.randn(n, d, generator=g, dtype=torch.float64) * 100
    elif dist == "uniform":
        x = torch.rand(n, d, generator=g, dtype=torch.float64)
    elif dist == "ties":
        x = torch.randint(0, 3, (n, d), generator=g).to(torch.float64)
    elif dist == "linear":
        x = -torch.arange(d, dtype=torch.float64).expand(n, d) / d
    else:
        x = torch.randn(n, d, generator=g, dtype=torch.float64)
        x[torch.rand(n, d, generator=g) < 0.5] = float("-inf")
        x[:, 0] = 0.0
    for name, fn in FUNCS.items():
        expected = NP_REFS[name](x.numpy())
        np.testing.assert_allclose(fn(x).numpy(), expected, atol=1e-12, err_msg=name)
        x32 = x.float()  # compare with the reference on the rounded inputs
        expected32 = NP_REFS[name](x32.double().numpy())
        np.testing.assert_allclose(fn(x32).double().numpy(), expected32, atol=2e-6)


def test_against_entmax_package() -> None:
    entmax = pytest.importorskip("entmax")
    g = torch.Generator().manual_seed(1)
    for shape, dim in [((64, 10), -1), ((8, 300), 1), ((5, 7, 3), 1), ((2, 2048), -1)]:
        x = torch.randn(shape, generator=g, dtype=torch.float64) * 2
        torch.testing.assert_close(sparsemax(x, dim), entmax.sparsemax(x, dim), atol=1e-12, rtol=0)
        torch.testing.assert_close(entmax15(x, dim), entmax.entmax15(x, dim), atol=1e-12, rtol=0)


# --------------------------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------------------------

GRAD_SHAPES_DIMS = [
    ((6,), 0),
    ((3, 5), 0),
    ((3, 5), 1),
    ((4, 1, 6), 0),
    ((4, 1, 6), 1),
    ((4, 1, 6), 2),
    ((4, 1, 6), -1),
    ((4, 1, 6), -3),
    ((2, 3, 4), 1),
    ((2, 150), 1),  # pruned path
]


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize(("shape", "dim"), GRAD_SHAPES_DIMS)
def test_gradcheck(name: str, shape: tuple[int, ...], dim: int) -> None:
    fn = FUNCS[name]
    for seed in range(20):
        x = separated(shape, seed, spacing=0.3 / max(shape))
        if far_from_threshold(x, dim):
            break
    else:  # pragma: no cover - would be a bug of the test itself
        pytest.fail("could not build an input away from the threshold")
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: fn(t, dim), (x,), eps=1e-6, atol=1e-7)


def test_backward_closed_forms() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(20, 30, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(20, 30, generator=g, dtype=torch.float64)
    y = sparsemax(x)
    (gx,) = torch.autograd.grad(y, x, v)
    s = (y > 0).double()
    expected = s * (v - (s * v).sum(1, keepdim=True) / s.sum(1, keepdim=True))
    torch.testing.assert_close(gx, expected)
    y = entmax15(x)
    (gx,) = torch.autograd.grad(y, x, v)
    gs = y.sqrt()
    expected = gs * v - gs * (gs * v).sum(1, keepdim=True) / gs.sum(1, keepdim=True)
    torch.testing.assert_close(gx, expected)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_gradient_of_sum_is_zero_and_matches_autograd_reference(name: str) -> None:
    # d/dx sum(f(x)) = 0 because the output always sums to one.
    x = torch.randn(10, 12, dtype=torch.float64, requires_grad=True)
    FUNCS[name](x).sum().backward()
    assert x.grad is not None
    assert x.grad.abs().max() < 1e-12

    # values and vector-Jacobian products equal autograd through the sort-based algorithm
    def reference(x: torch.Tensor) -> torch.Tensor:
        z = x / 2 if name == "entmax15" else x
        zs = z.sort(dim=-1, descending=True).values
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        mean = zs.cumsum(-1) / k
        if name == "sparsemax":
            tau = mean - 1 / k
        else:
            var = (zs**2).cumsum(-1) / k - mean**2
            tau = mean - ((1 - k * var) / k).clamp_min(0).sqrt()
        support = (tau <= zs).sum(-1, keepdim=True)
        t = tau.gather(-1, support - 1)
        return (z - t).clamp_min(0) ** (2 if name == "entmax15" else 1)

    g = torch.Generator().manual_seed(5)
    x = (3 * torch.randn(10, 12, generator=g, dtype=torch.float64)).requires_grad_()
    v = torch.randn(10, 12, generator=g, dtype=torch.float64)
    y, want = FUNCS[name](x), reference(x)
    assert 0 < int((want == 0).sum()) < want.numel()  # sparse: the support matters
    torch.testing.assert_close(y, want, rtol=1e-10, atol=1e-12)
    got = torch.autograd.grad(y, x, v)[0]
    torch.testing.assert_close(got, torch.autograd.grad(want, x, v)[0], rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Properties (hypothesis)
# --------------------------------------------------------------------------------------------

rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
    elements=st.floats(-50, 50, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=60, deadline=None)
@given(x=rows, shift=st.floats(-1e3, 1e3))
def test_properties(x: np.ndarray, shift: float) -> None:
    t = torch.from_numpy(x)
    for name, fn in FUNCS.items():
        y = fn(t)
        assert (y >= 0).all(), name
        torch.testing.assert_close(y.sum(-1), torch.ones(t.shape[0], dtype=t.dtype))
        torch.testing.assert_close(fn(t + shift), y, atol=1e-9, rtol=0)
        np.testing.assert_allclose(y.numpy(), NP_REFS[name](x), atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    p=hnp.arrays(
        np.float64,
        st.integers(1, 30),
        elements=st.floats(0, 1, allow_nan=False, allow_infinity=False),
    )
)
def test_sparsemax_fixes_simplex_points(p: np.ndarray) -> None:
    if p.sum() <= 1e-6:
        p = p + 1.0
    p = p / p.sum()
    t = torch.from_numpy(p)
    torch.testing.assert_close(sparsemax(t), t, atol=1e-12, rtol=0)


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float64, st.integers(2, 30), elements=st.floats(-20, 20, allow_nan=False)),
    lead=st.floats(1.0 + 1e-6, 50.0),
    where=st.integers(0, 1000),
)
def test_one_hot_when_one_logit_leads(x: np.ndarray, lead: float, where: int) -> None:
    i = where % x.shape[0]
    x = x.copy()
    others = np.delete(x, i)
    x[i] = others.max() + lead
    expected = np.zeros_like(x)
    expected[i] = 1.0
    t = torch.from_numpy(x)
    torch.testing.assert_close(sparsemax(t), torch.from_numpy(expected), atol=0, rtol=0)
    # Entmax-1.5 is one-hot when the lead is at least 2 (``x / 2`` leads by 1).
    x[i] = others.max() + 2 * lead
    torch.testing.assert_close(entmax15(t.new_tensor(x)), torch.from_numpy(expected))


# --------------------------------------------------------------------------------------------
# Edge cases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_input_not_modified(name: str, dtype: torch.dtype) -> None:
    x = torch.randn(6, 300).to(dtype)
    x[0, :5] = float("-inf")
    for dim in (0, 1):
        before = x.clone()
        FUNCS[name](x, dim)
        FUNCS[name](x.t(), dim)  # non-contiguous
        assert torch.equal(x, before)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize(("dtype", "atol"), [(torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
def test_half_precision(name: str, dtype: torch.dtype, atol: float) -> None:
    x = (torch.randn(64, 40) * 2).to(dtype)
    y = FUNCS[name](x)
    assert y.dtype == dtype
    expected = NP_REFS[name](x.double().numpy())
    np.testing.assert_allclose(y.double().numpy(), expected, atol=atol)
    xg = x.clone().requires_grad_(True)
    FUNCS[name](xg).pow(2).sum().backward()
    assert xg.grad is not None and xg.grad.dtype == dtype
    assert torch.isfinite(xg.grad).all()


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_non_finite_rows(name: str) -> None:
    inf, nan = float("inf"), float("nan")
    x = torch.tensor(
        [
            [1.0, nan, 0.0, 2.0],  # NaN -> NaN row
            [-inf, -inf, -inf, -inf],  # all -inf -> NaN row
            [inf, 0.0, 1.0, -inf],  # +inf -> NaN row
            [-inf, 0.5, -inf, 0.0],  # -inf entries -> exact zeros
            [0.3, 0.1, 0.2, 0.0],  # ordinary row, unaffected by the others
        ],
        dtype=torch.float64,
        requires_grad=True,
    )
    y = FUNCS[name](x)
    assert torch.isnan(y[:3]).all()
    assert y[3, 0] == 0 and y[3, 2] == 0
    torch.testing.assert_close(y[3].sum(), torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(y[4:], FUNCS[name](x[4:].detach()))
    v = torch.randn(5, 4, dtype=torch.float64)
    (g,) = torch.autograd.grad(y, x, v)
    assert g[3, 0] == 0 and g[3, 2] == 0
    assert torch.isfinite(g[3:]).all()


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_all_neg_inf_wide_rows_do_not_crash(name: str) -> None:
    x = torch.full((3, 300), float("-inf"))
    x[1, 7] = 2.0
    y = FUNCS[name](x)
    assert torch.isnan(y[0]).all() and torch.isnan(y[2]).all()
    assert y[1, 7] == 1 and y[1].sum() == 1


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_size_one_dim(name: str) -> None:
    x = torch.randn(4, 1, 6, requires_grad=True)
    y = FUNCS[name](x, 1)
    assert torch.equal(y.detach(), torch.ones(4, 1, 6))
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(g, torch.zeros(4, 1, 6))
    for dim in range(-3, 3):
        torch.testing.assert_close(
            FUNCS[name](x, dim).sum(dim), torch.ones(()).expand_as(x.sum(dim))
        )


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("offset", [1e6, -1e6, 1e8])
def test_large_offsets(name: str, offset: float) -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(16, 50, generator=g) * 3
    x32 = (base + offset).float()
    # The reference works on the (rounded) float32 inputs, in float64.
    expected = NP_REFS[name](x32.double().numpy())
    np.testing.assert_allclose(FUNCS[name](x32).double().numpy(), expected, atol=1e-5)
    x64 = base.double() + offset
    np.testing.assert_allclose(FUNCS[name](x64).numpy(), NP_REFS[name](x64.numpy()), atol=1e-9)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,), (2, 0, 3)])
def test_empty(name: str, shape: tuple[int, ...]) -> None:
    x = torch.zeros(shape, requires_grad=True)
    y = FUNCS[name](x)
    assert y.shape == x.shape
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_bad_arguments() -> None:
    with pytest.raises(IndexError, match="dim 2"):
        sparsemax(torch.zeros(3, 4), dim=2)
    with pytest.raises(TypeError, match="floating point"):
        sparsemax(torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="0-d"):
        entmax15(torch.tensor(1.0))


# --------------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_output_is_contiguous(name: str) -> None:
    x = torch.randn(3, 4, 5)
    for dim in range(-3, 3):
        y = FUNCS[name](x, dim)
        assert y.is_contiguous() and y.shape == x.shape


def test_modules() -> None:
    x = torch.randn(3, 4, 5)
    assert repr(Sparsemax(dim=1)) == "Sparsemax(dim=1)"
    assert repr(Entmax15()) == "Entmax15(dim=-1)"
    torch.testing.assert_close(Sparsemax(dim=1)(x), sparsemax(x, 1))
    torch.testing.assert_close(Entmax15(dim=0)(x), entmax15(x, 0))
    assert isinstance(Sparsemax(), torch.nn.Module)


def test_docstring_examples() -> None:
    torch.testing.assert_close(
        sparsemax(torch.tensor([1.0, 0.5, -1.0])), torch.tensor([0.75, 0.25, 0.0])
    )
    torch.testing.assert_close(
        entmax15(torch.tensor([2.0, 0.5, -1.0])),
        torch.tensor([0.9496, 0.0504, 0.0]),
        atol=1e-4,
        rtol=0,
    )


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@cuda
@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_cuda_matches_cpu(name: str, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    for shape, dim in [((64, 10), -1), ((4, 1, 6), 0), ((32, 3000), 1), ((8, 16), 0)]:
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)
        x.view(-1)[0] = float("-inf")
        y = FUNCS[name](x.cuda(), dim)
        assert y.device.type == "cuda" and y.dtype == dtype
        torch.testing.assert_close(y.cpu(), FUNCS[name](x, dim), atol=1e-3, rtol=0)


@cuda
@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_cuda_edge_cases_and_grad(name: str) -> None:
    x = torch.randn(5, 300, device="cuda", dtype=torch.float64)
    x[0] = float("-inf")
    x[1, 3] = float("nan")
    x[2, :100] = float("-inf")
    x.requires_grad_(True)
    y = FUNCS[name](x)
    assert torch.isnan(y[:2]).all()
    assert (y[2, :100] == 0).all()
    (g,) = torch.autograd.grad(y[2:].sum(), x)
    assert (g[2, :100] == 0).all()
    xs = separated((3, 7), 0).cuda().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: FUNCS[name](t, 1), (xs,))
