"""Shared by the sparsemax tests: float64 NumPy references written independently of the library,
test inputs, and a monkeypatch helper for the internals of the ``tabsparse.sparsemax`` package."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from tabsparse.sparsemax import entmax15, sparsemax

FUNCS = {"sparsemax": sparsemax, "entmax15": entmax15}

# The package re-exports the function ``sparsemax`` under the package's name; fetch the module.
_PACKAGE = importlib.import_module("tabsparse.sparsemax")
SUBMODULES: list[ModuleType] = [
    importlib.import_module(f"tabsparse.sparsemax.{info.name}")
    for info in pkgutil.iter_modules(_PACKAGE.__path__)
]


def internal(name: str) -> Any:
    """The private object ``name`` from the submodule of tabsparse.sparsemax that defines it."""
    for module in SUBMODULES:
        if hasattr(module, name):
            value = getattr(module, name)
            if not callable(value) or value.__module__ == module.__name__:
                return value
    raise AttributeError(name)


def patch(monkeypatch: pytest.MonkeyPatch, name: str, value: Any) -> None:
    """Set ``name`` to ``value`` in every submodule of tabsparse.sparsemax that binds it (the
    defining one and those that import it), so that every caller sees the new value."""
    hits = [module for module in SUBMODULES if hasattr(module, name)]
    assert hits, f"no submodule of tabsparse.sparsemax binds {name}"
    for module in hits:
        monkeypatch.setattr(module, name, value)


def np_sparsemax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sort-based sparsemax of Martins & Astudillo (2016), Algorithm 1, in float64."""
    z = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    z = z - z.max(axis=-1, keepdims=True)  # shift invariance; keeps the sums accurate
    zs = -np.sort(-z, axis=-1)
    k = np.arange(1, z.shape[-1] + 1)
    cs = np.cumsum(zs, axis=-1)
    support = 1 + k * zs > cs
    k_z = support.sum(axis=-1, keepdims=True)
    tau = (np.take_along_axis(cs, k_z - 1, axis=-1) - 1) / k_z
    return np.moveaxis(np.maximum(z - tau, 0.0), -1, axis)


def np_entmax15(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Exact sort-based entmax-1.5 (Peters et al., 2019) in float64."""
    z = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    u = (z - z.max(axis=-1, keepdims=True)) / 2.0  # shift invariance; accurate sums
    us = -np.sort(-u, axis=-1)
    k = np.arange(1, u.shape[-1] + 1)
    with np.errstate(invalid="ignore"):  # -inf scores make the tail of the prefix sums NaN
        mean = np.cumsum(us, axis=-1) / k
        mean_sq = np.cumsum(us**2, axis=-1) / k
        ss = k * (mean_sq - mean**2)
        delta = (1.0 - ss) / k
        tau_k = mean - np.sqrt(np.clip(delta, 0.0, None))
        k_z = (tau_k <= us).sum(axis=-1, keepdims=True)
    tau = np.take_along_axis(tau_k, k_z - 1, axis=-1)
    return np.moveaxis(np.maximum(u - tau, 0.0) ** 2, -1, axis)


def np_entmax15_bisect(x: np.ndarray) -> np.ndarray:
    """Entmax-1.5 of the rows of a 2-D array by bisection on the threshold (to 1e-13)."""
    u = np.asarray(x, dtype=np.float64) / 2.0
    hi = u.max(axis=1, keepdims=True)
    lo = hi - 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        f = (np.maximum(u - mid, 0.0) ** 2).sum(axis=1, keepdims=True) - 1.0
        lo = np.where(f >= 0, mid, lo)
        hi = np.where(f >= 0, hi, mid)
    return np.maximum(u - lo, 0.0) ** 2


NP_REFS = {"sparsemax": np_sparsemax, "entmax15": np_entmax15}


def separated(shape: tuple[int, ...], seed: int, spacing: float = 0.05) -> torch.Tensor:
    """float64 scores whose pairwise gaps are multiples of ``spacing`` (no ties)."""
    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape))
    vals = torch.randperm(n, generator=g).to(torch.float64) * spacing
    return (vals - vals.mean()).reshape(shape)


def far_from_threshold(x: torch.Tensor, dim: int, margin: float = 1e-3) -> bool:
    """True if no score lies within ``margin`` of its sparsemax threshold."""
    y = sparsemax(x, dim)
    # tau = x - y on the support; all support entries give the same tau.
    tau = torch.where(y > 0, x - y, torch.full_like(x, float("inf"))).amin(dim, keepdim=True)
    return bool(((x - tau).abs() > margin).all())
