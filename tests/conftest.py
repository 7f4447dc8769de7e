"""Shared fixtures: the real datasets of ../shared/datasets (skipped cleanly when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import torch

torch.set_num_threads(1)

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
