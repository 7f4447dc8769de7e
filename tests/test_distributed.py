"""Distributed training under torchrun (gloo on CPU, 2 ranks, one thread each)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from ddp_worker import RowLog, core_data, core_trainer, estimator, table

WORKER = Path(__file__).parent / "ddp_worker.py"

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)


def torchrun(mode: str, out: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(WORKER),
        mode,
        str(out),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_ranks_split_the_batches(out: Path, single: RowLog, n_rows: int, epochs: int) -> None:
    """The two ranks' logged rows (``rows_rank*.npz`` in ``out``) are disjoint halves of every
    batch of the one-process fit ``single``, which trained on each of ``n_rows`` rows once an
    epoch: two ranks each training alone on all rows would agree with each other, not this."""
    ranks = [np.load(out / f"rows_rank{rank}.npz") for rank in (0, 1)]
    one = single.arrays()
    assert len(ranks[0]["rows"]) + len(ranks[1]["rows"]) == len(one["rows"]) == epochs * n_rows
    for epoch in range(epochs):
        assert len({row.tobytes() for row in one["rows"][one["epoch"] == epoch]}) == n_rows
    for epoch, batch in sorted(set(zip(one["epoch"], one["batch"], strict=True))):
        parts = [r["rows"][(r["epoch"] == epoch) & (r["batch"] == batch)] for r in ranks]
        whole = one["rows"][(one["epoch"] == epoch) & (one["batch"] == batch)]
        assert len(parts[0]) > 0 and len(parts[1]) > 0, (epoch, batch)
        seen = [{row.tobytes() for row in part} for part in parts]
        assert not seen[0] & seen[1], f"ranks shared rows in epoch {epoch}, batch {batch}"
        assert seen[0] | seen[1] == {row.tobytes() for row in whole}, (epoch, batch)
        assert len(parts[0]) + len(parts[1]) == len(whole) == len(seen[0] | seen[1])


def test_two_ranks_end_with_identical_models_that_pickle(tmp_path: Path) -> None:
    run = torchrun("estimator", tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    r0, r1 = np.load(tmp_path / "rank0.npz"), np.load(tmp_path / "rank1.npz")
    assert set(r0.files) == set(r1.files)
    for key in r0.files:
        np.testing.assert_array_equal(r0[key], r1[key], err_msg=key)
    clf = pickle.loads((tmp_path / "model.pkl").read_bytes())
    X_val, y_val = table(300, 1)
    np.testing.assert_allclose(clf.predict_proba(X_val), r0["proba"], atol=1e-6)
    history = pickle.loads((tmp_path / "history.pkl").read_bytes())
    assert len(history) == 4 and "val_score" in history[0]

    # each rank trained on its own half of every global batch, and the halves make up the
    # batches of one process (two ranks each training alone on all rows would agree too)
    X, y = table(1500, 0)
    log = RowLog()
    single = estimator([log]).fit(X, y, X_val=X_val, y_val=y_val)
    assert_ranks_split_the_batches(tmp_path, log, 1500, 4)
    # and the same first epoch as one process, up to float32 rounding (the ranks sum gradients
    # in another order; later epochs amplify it as masks change support: the float64
    # trainer-level test below compares whole fits at 1e-9)
    first, alone = history[0], single.history_[0]
    np.testing.assert_allclose(first["train_loss"], alone["train_loss"], rtol=1e-6)
    np.testing.assert_allclose(first["val_loss"], alone["val_loss"], rtol=1e-5)


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One launch of the ``core-compiled`` mode: the compiled fit, then the ``compile="auto"``
    trial (``ddp_worker.auto_trial_follows_rank_zero``)."""
    out = tmp_path_factory.mktemp("core-compiled")
    run = torchrun("core-compiled", out)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.mark.parametrize(
    ("mode", "rtol", "atol"), [("core", 1e-9, 1e-11), ("core-compiled", 1e-7, 1e-9)]
)
def test_two_ranks_match_one_process_on_the_same_global_batches(
    request: pytest.FixtureRequest, tmp_path: Path, mode: str, rtol: float, atol: float
) -> None:
    """Also with ``compile=True`` under DDP: the compiled ranks (sort-based sparsemax, running
    statistics updated in the graph) match the eager single process up to float64 rounding."""
    if mode == "core-compiled":
        tmp_path = request.getfixturevalue("compiled_run")
    else:
        run = torchrun(mode, tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
    log = RowLog()
    single = core_trainer(None, callbacks=[log]).fit(core_data(1024, 0), core_data(256, 1))
    assert_ranks_split_the_batches(tmp_path, log, 1024, 3)
    expected = single.network.state_dict()
    for rank in (0, 1):
        got = np.load(tmp_path / f"core_rank{rank}.npz")
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value.numpy(), rtol=rtol, atol=atol, err_msg=key)


def test_compile_auto_ranks_follow_rank_zero(compiled_run: Path) -> None:
    """compile="auto" decides on rank 0's timing: a rank whose own timing disagrees still
    keeps the compiled step (``ddp_worker.auto_trial_follows_rank_zero``)."""
    import json

    for rank in (0, 1):
        result = json.loads((compiled_run / f"auto_rank{rank}.json").read_text())
        assert result == {"compiled": True, "epochs": 6}, (rank, result)


def test_a_failure_on_one_rank_ends_both(tmp_path: Path) -> None:
    tic = time.perf_counter()
    run = torchrun("fail", tmp_path, timeout=200)
    assert run.returncode != 0
    assert "injected failure on rank 1" in run.stderr + run.stdout
    assert time.perf_counter() - tic < 200
    assert not (tmp_path / "rank0.npz").exists()
