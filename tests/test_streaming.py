"""Training from an array on disk that is never loaded whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.data import TableEncoder
from tabsparse.distributed import DistContext
from tabsparse.streaming import DiskRows, StreamingSource, scan


def on_disk(
    tmp_path: Path, n: int = 5000, d: int = 6, seed: int = 0
) -> tuple[np.memmap, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, d)).astype(np.float32)
    data[:, 1] = rng.integers(0, 4, n)  # an integer-coded categorical column
    data[::13, 2] = np.nan
    path = tmp_path / "table.f32"
    data.tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    y = ((data[:, 0] > 0) ^ (data[:, 1] == 2)).astype(int)
    return mm, y


def test_disk_rows_read_exact_ranges(tmp_path: Path) -> None:
    mm, _ = on_disk(tmp_path)
    rows = DiskRows(mm)
    np.testing.assert_array_equal(rows.read(10, 2000), np.asarray(mm[10:2000]))
    assert rows.blocks(2048) == [(0, 2048), (2048, 4096), (4096, 5000)]
    with pytest.raises(ValueError, match="2-D"):
        DiskRows(np.zeros(3))


def test_scan_gathers_the_same_statistics_as_a_full_fit(tmp_path: Path) -> None:
    mm, _ = on_disk(tmp_path)
    streamed = scan(
        DiskRows(mm),
        TableEncoder(categorical_features=[1]),
        n_val=300,
        n_sample=200,
        rng=np.random.default_rng(0),
        block_rows=1000,
    )
    full = TableEncoder(categorical_features=[1]).fit(np.asarray(mm))
    np.testing.assert_allclose(streamed.encoder.numeric_mean, full.numeric_mean, rtol=1e-9)
    np.testing.assert_allclose(streamed.encoder.numeric_std, full.numeric_std, rtol=1e-9)
    assert streamed.encoder.categories == full.categories
    assert len(streamed.val_rows) == 300 and len(streamed.sample_rows) == 200
    assert not set(streamed.val_rows) & set(streamed.sample_rows)
    expected = full.transform(np.asarray(mm)[streamed.val_rows])
    assert streamed.val_table is not None
    np.testing.assert_array_equal(streamed.val_table.codes, expected.codes)


@pytest.mark.parametrize("world", [1, 2])
def test_every_kept_row_once_per_epoch_and_a_fixed_batch_count(tmp_path: Path, world: int) -> None:
    mm, _ = on_disk(tmp_path)
    enc = TableEncoder(categorical_features=[1]).fit(np.asarray(mm))
    exclude = np.arange(0, 5000, 7)
    source = StreamingSource(
        DiskRows(mm),
        enc,
        lambda ids: torch.from_numpy(ids),  # the target is the row id, to track rows
        weight=None,
        exclude=exclude,
        device=torch.device("cpu"),
        block_rows=700,
        blocks_per_buffer=3,
    )
    assert len(source) == 5000 - len(exclude)
    for epoch_seed in (0, 1):
        seen: list[np.ndarray] = []
        n_global = 0
        for rank in range(world):
            ctx = None if world == 1 else DistContext(rank, world, rank, "gloo")
            gen = torch.Generator().manual_seed(epoch_seed)
            batches = list(source.iter_batches(256, gen, ctx))
            n_global = len(batches)
            for batch, global_rows in batches:
                assert batch.target is not None
                seen.append(batch.target.numpy())
                assert global_rows <= 256
        ids = np.sort(np.concatenate(seen))
        np.testing.assert_array_equal(ids, np.setdiff1d(np.arange(5000), exclude))
        assert n_global == source.n_batches(256)


def test_fit_from_a_memmap_with_early_stopping(tmp_path: Path) -> None:
    mm, y = on_disk(tmp_path)
    clf = TabNetClassifier(
        max_epochs=8,
        early_stopping=True,
        categorical_features=[1],
        random_state=0,
        device="cpu",
    )
    clf.fit(mm, y)
    assert clf.n_features_in_ == 6
    assert "val_score" in clf.history_[0]
    assert clf.encoder_.kinds[1] == "categorical"
    head = np.asarray(mm[:1000])
    assert clf.score(head, y[:1000]) > 0.8
    np.testing.assert_allclose(clf.feature_importances_.sum(), 1.0, rtol=1e-6)


def test_memmap_regressor_learns_and_rejects_non_numeric_arrays(tmp_path: Path) -> None:
    mm, _ = on_disk(tmp_path)
    target = np.nan_to_num(np.asarray(mm[:, 0])) * 3.0 + 1.0
    disk = TabNetRegressor(max_epochs=4, random_state=0, device="cpu").fit(mm, target)
    assert disk.score(np.asarray(mm), target) > 0.8
    with pytest.raises(TypeError, match="numeric"):
        path = tmp_path / "text.bin"
        np.zeros((4, 2), dtype="S3").tofile(path)
        text = np.memmap(path, dtype="S3", mode="r", shape=(4, 2))
        TabNetRegressor(max_epochs=1).fit(text, np.zeros(4))


def test_fit_from_a_folder_of_parquet_files(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = []
    for i in range(3):
        n = 1500
        df = pd.DataFrame(
            {
                "x": rng.normal(size=n),
                "colour": pd.Categorical(
                    rng.choice(np.array(["red", "blue", None], dtype=object), n)
                ),
                "noise": rng.normal(size=n),
            }
        )
        df["label"] = np.where(df["x"] + (df["colour"] == "red") > 0.3, "yes", "no")
        df.to_parquet(tmp_path / f"part{i}.parquet", row_group_size=500)
        frames.append(df)
    clf = TabNetClassifier(max_epochs=6, early_stopping=True, random_state=0, device="cpu")
    clf.fit(tmp_path, "label")
    assert list(clf.feature_names_in_) == ["x", "colour", "noise"]
    assert clf.encoder_.kinds == ["numeric", "categorical", "numeric"]
    whole = pd.concat(frames, ignore_index=True)
    assert clf.score(whole.drop(columns="label"), whole["label"]) > 0.8
    files = sorted(tmp_path.glob("*.parquet"))
    again = TabNetClassifier(max_epochs=1, random_state=0, device="cpu")
    again.fit(
        files,
        whole["label"].to_numpy()[:4500],
    )
    assert "label" in again.feature_names_in_  # y given as an array: every column is a feature


def test_resume_from_disk_is_refused_when_the_file_changed(tmp_path: Path) -> None:
    from tabsparse.training import Callback

    class StopAfterTwo(Callback):
        def on_epoch_end(self, trainer: Any, record: dict[str, float]) -> None:
            trainer.stop = len(trainer.history) == 2

    mm, y = on_disk(tmp_path, n=3000)
    folder = tmp_path / "checkpoints"
    settings: dict[str, Any] = {"max_epochs": 4, "random_state": 0, "device": "cpu"}
    TabNetClassifier(**settings, checkpoint_dir=folder, callbacks=[StopAfterTwo()]).fit(mm, y)
    changed = np.array(mm)
    changed[2500, 4] += 1.0  # one value of a training row (same shape, same labels)
    path = tmp_path / "changed.f32"
    changed.tofile(path)
    other = np.memmap(path, dtype=np.float32, mode="r", shape=changed.shape)
    with pytest.raises(ValueError, match="written by a fit on other data"):
        TabNetClassifier(**settings).fit(other, y, resume_from=folder)
    resumed = TabNetClassifier(**settings).fit(mm, y, resume_from=folder)
    assert resumed.n_iter_ == 4


def test_fingerprint_of_streamed_rows_follows_values_targets_and_held_out_rows(
    tmp_path: Path,
) -> None:
    mm, y = on_disk(tmp_path, n=1000)
    encoder = TableEncoder(categorical_features=[1]).fit(np.asarray(mm))

    def source(array: np.ndarray, target: np.ndarray, exclude: list[int]) -> StreamingSource:
        return StreamingSource(
            DiskRows(array),
            encoder,
            lambda ids: torch.from_numpy(target[ids]),
            weight=None,
            exclude=np.array(exclude, dtype=np.int64),
            device=torch.device("cpu"),
            block_rows=300,
        )

    base = source(mm, y, [1, 2]).fingerprint()
    assert source(np.asarray(mm).copy(), y, [1, 2]).fingerprint() == base
    changed = np.asarray(mm).copy()
    changed[999, 0] += 1.0  # in the short last block
    assert source(changed, y, [1, 2]).fingerprint() != base
    assert source(mm, 1 - y, [1, 2]).fingerprint() != base
    assert source(mm, y, [1, 3]).fingerprint() != base
