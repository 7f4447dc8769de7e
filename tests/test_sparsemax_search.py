"""Tests of the internal paths of tabsparse.sparsemax: candidate pruning, the iterative
search and its pass caps, the sort-based fallback, the narrow search, scratch chunks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from sparsemax_refs import (
    FUNCS,
    NP_REFS,
    far_from_threshold,
    internal,
    np_sparsemax,
    patch,
    separated,
)

from tabsparse.sparsemax import sparsemax


@pytest.fixture(autouse=True)
def _search_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small inputs normally use the sort-based algorithm; test the sort-free search on them.

    ``test_small_inputs_use_sort_path`` covers the sort-based path with the default setting.
    """
    patch(monkeypatch, "_SORT_MAX_WORK", 0)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize(("split_rows", "direct"), [(0, 0), (32, 0), (32, 1 << 18)])
def test_mixed_sparse_and_dense_rows(
    monkeypatch: pytest.MonkeyPatch, name: str, split_rows: int, direct: int
) -> None:
    # Candidate pruning keeps a few blocks per row; dense rows need many and are searched
    # separately at full width (forced with split_rows=0). direct=0 forces the gathering of
    # candidates even for the few rows whose block-maxima threshold is not exact.
    patch(monkeypatch, "_SPLIT_ROWS", split_rows)
    patch(monkeypatch, "_DIRECT_SEARCH_ELEMENTS", direct)
    calls = [0]
    original = internal("_search")

    def spy(*args: object) -> torch.Tensor:
        calls[0] += 1
        return original(*args)

    patch(monkeypatch, "_search", spy)
    g = torch.Generator().manual_seed(7)
    sparse = torch.randn(300, 1030, generator=g, dtype=torch.float64) * 5
    dense = torch.rand(6, 1030, generator=g, dtype=torch.float64) * 0.01
    x = torch.cat([sparse[:100], dense[:3], sparse[100:], dense[3:]])
    x[0, :1024] = float("-inf")  # the maximum of row 0 sits in the tail columns
    y = FUNCS[name](x)
    np.testing.assert_allclose(y.numpy(), NP_REFS[name](x.numpy()), atol=1e-12)
    if split_rows == 0 and direct == 0:
        assert calls[0] >= 2  # the wide rows had their own search


def adversarial_rows(d: int) -> torch.Tensor:
    """Rows on which the Michelot iteration drops a single score per pass (d passes)."""
    z, e, c = [0.0, 0.0], 1e-13, -0.5
    for k in range(3, d + 1):
        e *= 1.5 * k
        z.append(c - e)
        c = (sum(z) - 1) / k
    row = torch.tensor(z, dtype=torch.float64)
    return torch.stack([row, row.flip(0), row * 0.5 + 3.0])


def count_passes(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count calls of the step function of ``name``."""
    calls = [0]
    attrs = ["_sparsemax_step", "_michelot_pass"] if name == "sparsemax" else ["_entmax15_step"]
    for attr in attrs:
        original = internal(attr)

        def counting(*args: object, original: Any = original) -> object:
            calls[0] += 1
            return original(*args)

        patch(monkeypatch, attr, counting)
    return calls


def test_adversarial_rows_need_many_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    x = adversarial_rows(12)
    calls = count_passes(monkeypatch, "sparsemax")
    y = sparsemax(x)
    assert calls[0] >= 11  # the construction works: about one pass per score
    np.testing.assert_allclose(y.numpy(), np_sparsemax(x.numpy()), atol=1e-12)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("cap", [1, 2, 3])
@pytest.mark.parametrize("adaptive", [True, False])
def test_pass_cap_falls_back_exactly(
    monkeypatch: pytest.MonkeyPatch, name: str, cap: int, adaptive: bool
) -> None:
    patch(monkeypatch, "_MAX_PASSES_ADAPTIVE", cap)
    patch(monkeypatch, "_MAX_PASSES_FIXED", cap)
    patch(monkeypatch, "_is_adaptive", lambda device: adaptive)
    calls = count_passes(monkeypatch, name)
    g = torch.Generator().manual_seed(cap)
    x = torch.cat(
        [
            torch.nn.functional.pad(adversarial_rows(12), (0, 188), value=-5.0),
            torch.randn(40, 200, generator=g, dtype=torch.float64) * 0.1,
            torch.rand(40, 200, generator=g, dtype=torch.float64),
        ]
    )
    x[3, :] = float("nan")
    for dim, xx in ((1, x), (0, x.t().contiguous())):
        y = FUNCS[name](xx, dim)
        expected = NP_REFS[name](xx.numpy(), axis=dim)
        ok = ~np.isnan(expected)  # the NaN row is NaN in the reference too
        np.testing.assert_allclose(y.numpy()[ok], expected[ok], atol=1e-12)
        nan_row = y[3] if dim == 1 else y[:, 3]
        assert torch.isnan(nan_row).all()
    assert calls[0] > 0


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_fixed_pass_path_matches(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # The synchronisation-free path used on accelerators, exercised on CPU.
    patch(monkeypatch, "_is_adaptive", lambda device: False)
    g = torch.Generator().manual_seed(5)
    for d in (5, 64, 700):
        x = torch.randn(50, d, generator=g, dtype=torch.float64) * 2
        x[0, 1] = float("-inf")
        np.testing.assert_allclose(FUNCS[name](x).numpy(), NP_REFS[name](x.numpy()), atol=1e-12)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_small_inputs_use_sort_path(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    patch(monkeypatch, "_SORT_MAX_WORK", 1 << 17)  # the library default
    calls = count_passes(monkeypatch, name)
    inf, nan = float("inf"), float("nan")
    x = torch.randn(50, 12, dtype=torch.float64) * 2
    x[0, 3] = nan
    x[1] = -inf
    x[2, 0] = inf
    x[3, :6] = -inf
    y = FUNCS[name](x)
    assert calls[0] == 0  # no iterative search
    assert torch.isnan(y[:3]).all()
    np.testing.assert_allclose(y[3:].numpy(), NP_REFS[name](x[3:].numpy()), atol=1e-12)
    assert (y[3, :6] == 0).all()
    for shape, dim in [((4, 1, 6), 0), ((4, 1, 6), 1), ((4, 1, 6), 2), ((3, 5), 0)]:
        xs = separated(shape, 1, spacing=0.3 / max(shape)).requires_grad_(True)
        expected = NP_REFS[name](xs.detach().numpy(), axis=dim)
        np.testing.assert_allclose(FUNCS[name](xs, dim).detach().numpy(), expected, atol=1e-12)
        if far_from_threshold(xs.detach(), dim):
            assert torch.autograd.gradcheck(lambda t, dim=dim: FUNCS[name](t, dim), (xs,))
    h = FUNCS[name](x[3:].half())
    assert h.dtype == torch.float16
    np.testing.assert_allclose(
        h.double().numpy(), NP_REFS[name](x[3:].half().double().numpy()), atol=2e-3
    )


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_chunked_scratch_paths(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # Large inputs count supports and run the backward in row chunks; force tiny chunks.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(37, 300, generator=g, dtype=torch.float64) * 3
    v = torch.randn(37, 300, generator=g, dtype=torch.float64)
    xg = x.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad(FUNCS[name](xg), xg, v)
    patch(monkeypatch, "_SCRATCH_ELEMENTS", 1000)
    xg = x.clone().requires_grad_(True)
    y = FUNCS[name](xg)
    np.testing.assert_allclose(y.detach().numpy(), NP_REFS[name](x.numpy()), atol=1e-12)
    (got,) = torch.autograd.grad(y, xg, v)
    torch.testing.assert_close(got, expected)
    (got_t,) = torch.autograd.grad(FUNCS[name](xg.t(), 0), xg, v.t())  # not the last dim
    torch.testing.assert_close(got_t, expected)


def test_narrow_search_drops_converged_rows_and_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # many easy rows and a few slow ones: the search narrows to the slow rows, twice
    calls = count_passes(monkeypatch, "sparsemax")
    g = torch.Generator().manual_seed(7)
    easy = torch.randn(4000, 40, generator=g, dtype=torch.float64) * 3.0
    slow = torch.nn.functional.pad(adversarial_rows(12), (0, 28), value=-9.0)
    x = torch.cat([easy[:1500], slow, easy[1500:], slow * 0.5])
    y = sparsemax(x)
    assert calls[0] >= 11  # the adversarial rows needed about one pass per score
    np.testing.assert_allclose(y.numpy(), np_sparsemax(x.numpy()), atol=1e-12)


def test_narrow_search_is_exact_from_above_and_below_its_start() -> None:
    """The narrow search starts from a guess, ``max - 0.7``: rows whose threshold lies above it
    (two or three tied maxima), below it (a diffuse row, a lone maximum with scores just under
    the guess) and exactly on it all get the exact sparsemax."""
    _NARROW_START = internal("_NARROW_START")

    g = torch.Generator().manual_seed(11)
    w = 40
    rows = torch.randn(3000, w, generator=g, dtype=torch.float64) * 0.5
    rows[0::6, :2] = 5.0  # two tied maxima: threshold max - 1/2
    rows[1::6, :3] = 5.0  # three: max - 1/3
    rows[2::6] = torch.linspace(0, -0.05, w, dtype=torch.float64)  # diffuse: far below
    rows[3::6, 0], rows[3::6, 1:] = 0.0, -_NARROW_START - 1e-9  # all in the support
    rows[4::6, 0], rows[4::6, 1] = 0.0, -2 * (1 - _NARROW_START)  # threshold exactly the start
    rows[4::6, 2:] = -3.0
    y = sparsemax(rows)
    np.testing.assert_allclose(y.numpy(), np_sparsemax(rows.numpy()), atol=1e-12)
    torch.testing.assert_close(y[0::6, :2], torch.full((500, 2), 0.5, dtype=torch.float64))
    # the lone maximum and its 39 neighbours just under the guess share the mass
    torch.testing.assert_close(y[3::6].sum(1), torch.ones(500, dtype=torch.float64))
    assert bool((y[3::6] > 0).all())
