"""A training script run under torchrun by tests/test_distributed.py (not a test module).

Usage: torchrun --standalone --nproc_per_node=2 tests/ddp_worker.py MODE OUT_DIR
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

torch.set_num_threads(1)

from tabsparse import TabNetClassifier  # noqa: E402
from tabsparse.distributed import detect  # noqa: E402
from tabsparse.nn import TabNet  # noqa: E402
from tabsparse.training import Callback, TensorData, TrainConfig, Trainer  # noqa: E402


def table(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
        }
    )
    y = np.where(X["a"] + (X["c"] == "x") > 0.2, "pos", "neg")
    return X, y


def core_data(n: int, seed: int) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    y = (x[:, 0] - x[:, 1] > 0).long()
    return TensorData(x, torch.zeros(n, 0, dtype=torch.int64), y)


def core_trainer(
    dist: object, compile: bool | str = False, callbacks: list[Callback] | None = None
) -> Trainer:
    """The float64 network and settings shared by the distributed and single-process runs."""
    torch.manual_seed(0)
    net = TabNet(
        numeric_columns=list(range(5)),
        categorical_columns=[],
        numeric_mean=[0.0] * 5,
        numeric_std=[1.0] * 5,
        cardinalities=[],
        n_outputs=2,
        n_steps=2,
        virtual_batch_size=64,
    ).double()

    def ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, reduction="none")

    cfg = TrainConfig(max_epochs=3, batch_size=256, seed=0, n_iter_no_change=None, compile=compile)
    return Trainer(net, ce, cfg, callbacks=callbacks or [], dist=dist)  # type: ignore[arg-type]


class RowLog(Callback):
    """Records the encoded rows of every training batch this process trains on, as
    ``(epoch, batch, numeric and codes)`` (through ``Trainer.transform_batch``, which sees each
    batch just before its step; the forward passes without gradients that recompute the
    batch-norm statistics of a weight average see it too and are not recorded); see
    :meth:`arrays`."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, np.ndarray]] = []

    def on_fit_begin(self, trainer: Trainer) -> None:
        inner, self.batches = trainer.transform_batch, []

        def record(batch: TensorData, generator: torch.Generator) -> TensorData:
            if not torch.is_grad_enabled():  # not a training step
                return batch if inner is None else inner(batch, generator)
            previous = [b for e, b, _ in self.batches if e == trainer.epoch]
            rows = torch.cat([batch.numeric.double(), batch.codes.double()], dim=1)
            self.batches.append((trainer.epoch, len(previous), rows.cpu().numpy()))
            return batch if inner is None else inner(batch, generator)

        trainer.transform_batch = record

    def arrays(self) -> dict[str, np.ndarray]:
        """``rows`` (all batches' rows, one after the other) and, for each row, its ``epoch``
        and ``batch`` (index within the epoch)."""
        sizes = [len(rows) for _, _, rows in self.batches]
        return {
            "rows": np.concatenate([rows for _, _, rows in self.batches]),
            "epoch": np.repeat([e for e, _, _ in self.batches], sizes),
            "batch": np.repeat([b for _, b, _ in self.batches], sizes),
        }


def estimator(callbacks: list[Callback] | None = None) -> TabNetClassifier:
    """The classifier the estimator-level runs fit (distributed, and in one process)."""
    return TabNetClassifier(
        max_epochs=4, batch_size=512, random_state=0, device="cpu", callbacks=callbacks
    )


class FailOnRankOne(Callback):
    def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
        if trainer.dist is not None and trainer.dist.rank == 1 and record["epoch"] >= 1:
            raise ValueError("injected failure on rank 1")


def auto_trial_follows_rank_zero(out: Path) -> None:
    """Run ``compile="auto"``'s trial under DDP with rank 0 measuring the compiled epoch as
    faster and rank 1 as slower; every rank must keep rank 0's decision (compiled)."""
    import json

    import tabsparse.compiling
    import tabsparse.training.loop
    from tabsparse.compiling import StepCompiler

    ctx = detect("auto")
    assert ctx is not None and ctx.world_size == 2
    factor = 0.5 if ctx.rank == 0 else 2.0

    class AsIfOnCuda(StepCompiler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.state, self.decision = "measuring", None

        def epoch_end(self, seconds: float, epochs_left: int) -> str:
            if self.state == "trial-steady":
                seconds = self.eager_seconds * factor
            return super().epoch_end(seconds, epochs_left)

    tabsparse.compiling.BACKEND = "aot_eager"
    tabsparse.compiling.AUTO_MIN_SECONDS = 0.0
    tabsparse.training.loop.StepCompiler = AsIfOnCuda  # type: ignore[misc]
    trainer = core_trainer(ctx, compile="auto")  # type: ignore[arg-type]
    trainer.config.max_epochs = 6
    trainer.fit(core_data(1024, 0))
    result = {"compiled": trainer.compiled, "epochs": len(trainer.history)}
    (out / f"auto_rank{ctx.rank}.json").write_text(json.dumps(result))


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    if mode in ("core", "core-compiled"):
        ctx = detect("auto")
        assert ctx is not None and ctx.world_size == 2
        compiled = mode == "core-compiled"
        if compiled:  # graph capture and AOT autograd without code generation (fast)
            import tabsparse.compiling

            tabsparse.compiling.BACKEND = "aot_eager"
        row_log = RowLog()
        trainer = core_trainer(ctx, compiled, [row_log])
        trainer.fit(core_data(1024, 0), core_data(256, 1))
        assert trainer.compiled == compiled
        params = {k: v.numpy() for k, v in trainer.network.state_dict().items()}
        np.savez(out / f"core_rank{ctx.rank}.npz", **params)
        np.savez(out / f"rows_rank{ctx.rank}.npz", **row_log.arrays())
        if compiled:  # and compile="auto" as if on CUDA: the ranks disagree, rank 0 wins (in
            # the same processes: one launch, and the compiler already imported)
            auto_trial_follows_rank_zero(out)
        return
    X, y = table(1500, 0)
    X_val, y_val = table(300, 1)
    row_log = RowLog()
    clf = estimator([FailOnRankOne()] if mode == "fail" else [row_log])
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    rank = torch.distributed.get_rank()
    params = {k: v.numpy() for k, v in clf.network_.state_dict().items()}
    np.savez(out / f"rank{rank}.npz", proba=clf.predict_proba(X_val), **params)
    np.savez(out / f"rows_rank{rank}.npz", **row_log.arrays())
    if rank == 0:  # without the row log, whose class lives in this script (__main__)
        (out / "model.pkl").write_bytes(pickle.dumps(clf.set_params(callbacks=None)))
        (out / "history.pkl").write_bytes(pickle.dumps(clf.history_))


if __name__ == "__main__":
    main()
