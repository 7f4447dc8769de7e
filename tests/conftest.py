"""Shared fixtures: the real datasets of ../shared/datasets (skipped cleanly when absent), and a
small synthetic table, network and loss for the training-loop tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from tabsparse.nn.network import TabNet
from tabsparse.training import TensorData

torch.set_num_threads(1)

TINY_FIT: dict[str, Any] = {
    "n_d": 4,
    "n_a": 4,
    "n_steps": 2,
    "max_epochs": 3,
    "batch_size": 128,
    "random_state": 0,
}
"""Estimator settings for a fit of well under a second on a few hundred rows (the estimator
tests add their own, e.g. ``device``)."""

#: the modules whose tests take longest, longest first (fits of real tables, whole sklearn check
#: suites, process launches, compiling, exports): collected first, so that the workers (each
#: taking whole modules) start them at once and end on short ones
LONG_FIRST = (
    "test_real_data.py",
    "test_estimators.py",
    "test_distributed.py",
    "test_compiling.py",
    "test_docs.py",
    "test_export.py",
    "test_objectives.py",
    "test_io_fuzz.py",
    "test_sparse_fit.py",
    "test_streaming.py",
    "test_multioutput.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of :data:`LONG_FIRST` (in that order) before all others; the order within a
    module is kept."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))


DATASETS = Path(
    os.environ.get(
        "TABSPARSE_DATASETS", Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    )
)


def load_dataset(name: str) -> pd.DataFrame:
    """Read ``<DATASETS>/<name>/<name>.csv.gz`` or skip the test when it is not there."""
    path = DATASETS / name / f"{name}.csv.gz"
    if not path.exists():
        pytest.skip(f"dataset {name!r} not found at {path} (set TABSPARSE_DATASETS)")
    return pd.read_csv(path)


def make_data(n: int = 200, seed: int = 0) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return TensorData(x, torch.zeros(n, 0, dtype=torch.int64), y)


def numeric_tabnet(n_numeric: int, n_outputs: int, **kwargs: Any) -> TabNet:
    """A TabNet over ``n_numeric`` numeric columns already standardised (mean 0, std 1) and no
    categorical ones; ``kwargs`` are further TabNet settings. Draws its initial weights from
    torch's global generator."""
    return TabNet(
        numeric_columns=list(range(n_numeric)),
        categorical_columns=[],
        numeric_mean=[0.0] * n_numeric,
        numeric_std=[1.0] * n_numeric,
        cardinalities=[],
        n_outputs=n_outputs,
        **kwargs,
    )


def make_net(seed: int = 0) -> TabNet:
    torch.manual_seed(seed)
    return numeric_tabnet(4, 2, n_steps=2, virtual_batch_size=32)


def ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target, reduction="none")
