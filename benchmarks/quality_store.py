"""The quality benchmark's stored rows (``results/quality.jsonl``) and how a run matches them.

A tabsparse row is matched on all of its resolved parameters (:func:`resolved_tabsparse_params`,
hashed by :func:`params_hash`), with the parameters added since it was stored filled in at
their no-op values (:func:`_completed`) and the "auto" values resolved as a fit resolves them
(:func:`with_auto_resolved`); :func:`find_stored` gives the latest matching row and
:func:`mean_over_seeds` one row from several seeds.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from quality_tasks import NEURAL, ROOT, SEED, TASK_BY_NAME

RESULTS = Path(__file__).resolve().parent / "results" / "quality.jsonl"


# ---- results store -------------------------------------------------------------------------
def git_commit(root: Path = ROOT) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tabsparse"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def params_hash(record_params: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(record_params, sort_keys=True).encode()).hexdigest()[:10]


def load_results() -> list[dict[str, Any]]:
    if not RESULTS.exists():
        return []
    return [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]


# tabsparse parameters added after rows were stored, with the value that matches what those rows
# did (their behaviour before the parameter existed); ``compile="auto"`` never compiles on the
# CPU this benchmark fits on, so rows from before it match the eager step it keeps; no table
# here has a datetime column, so ``datetime_features="error"`` changes nothing on them
ADDED_PARAMS = {
    "ema_decay": "None",
    "compile": "'auto'",
    "datetime_features": "'error'",
    "beta_2": "0.999",
    "numeric_embedding": "None",
    "numeric_embedding_dim": "8",
    "n_members": "1",
    "first_mask": "'per_row'",
    "column_revival": "0",
    "column_pruning": "False",
}
#: the classifier's later parameters
ADDED_CLASSIFIER_PARAMS = {"label_smoothing": "0.0"}


# the regressor's later parameters (its loss was the squared error before ``loss`` existed)
ADDED_REGRESSOR_PARAMS = {
    "loss": "'squared_error'",
    "huber_delta": "1.0",
    "power": "1.5",
    "quantile": "None",
}


def _completed(record_params: dict[str, str]) -> dict[str, str]:
    """A stored row's tabsparse parameters with the later-added ones filled in (a row without
    ``class_weight`` is a regressor's)."""
    if "class_weight" in record_params:
        return {**ADDED_PARAMS, **ADDED_CLASSIFIER_PARAMS, **record_params}
    return {**ADDED_PARAMS, **ADDED_REGRESSOR_PARAMS, **record_params}


def with_auto_resolved(
    record_params: dict[str, str],
    n_rows: int | None,
    fitted: int | None = None,
    kind: str | None = None,
) -> dict[str, str]:
    """``record_params`` with the architecture's "auto" values replaced by what a fit resolves
    them to (``tabsparse.estimators._auto``), so that a row fitted with the value written out
    matches one fitted with "auto", and rows from before a parameter existed match "auto" where
    it resolves to the old behaviour. ``n_members``: ``fitted`` (the ``n_members_`` a stored row
    recorded) when given, else what a fit on ``n_rows`` rows resolves it to today. With the
    task's ``kind``, also ``numeric_embedding`` (periodic for binary and regression targets)
    and then ``first_mask`` and ``cat_emb_dim`` (the benchmarks never start from a pretrainer;
    without a shared sparsemax first mask ``column_revival`` and ``column_pruning`` do nothing
    and read as 0 and False), and with ``n_rows`` ``learning_rate`` (from the training batch
    and whether the fit validates)."""
    from tabsparse.estimators import _auto

    out = dict(record_params)
    if out.get("n_members") == repr("auto"):
        if fitted is None and n_rows is not None:
            fitted = _auto.auto_members(n_rows)  # the benchmarks' targets are one column each
        if fitted is not None:
            out["n_members"] = repr(fitted)
    if kind is None:
        return out
    if out.get("numeric_embedding") == repr("auto"):
        suits = kind in ("binary", "regression")  # the estimators' ``_periodic_suits``
        out["numeric_embedding"] = repr(_auto.auto_numeric_embedding(suits))
    members = out.get("n_members", "1")
    embedding = None if out.get("numeric_embedding") == "None" else "periodic"
    if out.get("first_mask") == repr("auto") and members.isdigit():
        out["first_mask"] = repr(_auto.auto_first_mask(int(members), embedding))
    if out.get("first_mask") == repr("per_row") or out.get("mask_type") == repr("entmax"):
        # no shared sparsemax first mask: the column edits do nothing (nn/shared_mask.py)
        out.update(column_revival="0", column_pruning="False")
    if out.get("cat_emb_dim") == repr("auto"):
        numeric_dim = int(out.get("numeric_embedding_dim", "8"))
        wide = kind == "regression"  # the estimators' ``_wide_categories_suit``
        out["cat_emb_dim"] = repr(_auto.auto_cat_emb_dim(wide, embedding, numeric_dim))
    if out.get("learning_rate") == repr("auto") and n_rows is not None:
        out["learning_rate"] = repr(_auto_learning_rate(out, n_rows, kind))
    return out


def _auto_learning_rate(params: dict[str, str], n_rows: int, kind: str) -> float:
    """What ``learning_rate="auto"`` resolves to for a fit with the (repr'd) ``params`` on
    ``n_rows`` rows of a ``kind`` target, as the estimators resolve it (``_auto``): whether the
    fit validates (``early_stopping``, ``validation_fraction``; a binary target from 100
    held-out rows, the others from 500), and its training batch."""
    from tabsparse.estimators import _auto
    from tabsparse.estimators._base import AUTO_EARLY_STOPPING_ROWS
    from tabsparse.estimators.classifier import AUTO_EARLY_STOPPING_ROWS_BINARY
    from tabsparse.training import auto_batch_size

    stopping = params.get("early_stopping", repr("auto"))
    fraction = float(params.get("validation_fraction", "0.1"))
    if stopping == repr("auto"):
        fewest = AUTO_EARLY_STOPPING_ROWS_BINARY if kind == "binary" else AUTO_EARLY_STOPPING_ROWS
        validating = n_rows * fraction >= fewest
    else:
        validating = stopping == "True"
    n_train = n_rows - max(1, round(n_rows * fraction)) if validating else n_rows
    vbs = int(params.get("virtual_batch_size", "128"))
    batch = params.get("batch_size", repr("auto"))
    size = auto_batch_size(n_train, vbs) if batch == repr("auto") else int(batch)
    return _auto.auto_learning_rate(size, validating)


#: the estimators' fixed choices that were constructor parameters (tabsparse.estimators._fixed)
FORMER_PARAMS = frozenset(
    {
        "momentum",
        "mask_type",
        "first_mask",
        "column_revival",
        "column_pruning",
        "beta_2",
        "weight_decay",
        "lr_schedule",
        "ema_decay",
        "tol",
        "cat_emb_dim",
        "numeric_embedding_dim",
        "checkpoint_every",
        "compile",
        "distributed",
        "huber_delta",
    }
)


def resolved_tabsparse_params(
    kind: str, params: dict[str, Any], seed: int = SEED
) -> dict[str, str]:
    """The full parameter set a tabsparse row is matched on (defaults resolved now)."""
    from tabsparse import TabNetClassifier, TabNetRegressor

    est = (TabNetRegressor if kind == "regression" else TabNetClassifier)(
        random_state=seed, device="cpu", **params
    )
    full = {k: v for k, v in est.get_params().items() if k not in ("verbose", "callbacks")}
    # the fixed choices that were parameters when most rows were stored, at their values: a
    # row stored with them matches (and keeps its prediction file's tag) when they agree
    former = FORMER_PARAMS if kind == "regression" else FORMER_PARAMS - {"huber_delta"}
    full.update({k: getattr(est._fixed, k) for k in former})
    return {k: repr(v) for k, v in sorted(full.items())}


def _stored_predictions(row: dict[str, Any], path: Path) -> bool:
    """Whether the prediction file recorded on ``row`` exists beside ``path`` (a row matched
    through a parameter added after its fit carries the older tag in its file name)."""
    recorded = row.get("predictions_file")
    return bool(recorded) and (path.parent / Path(recorded).name).exists()


def _uncapped(row: dict[str, Any], caps: tuple[int, int]) -> bool:
    """Whether neither the row's caps nor ``caps`` cut its data (the same fit either way)."""
    return (
        row["n_train"] == row["n_train_full"] <= caps[0]
        and row["n_test"] < row["test_cap"]
        and row["n_test"] <= caps[1]
    )


def find_stored(
    rows: list[dict[str, Any]],
    name: str,
    model: str,
    params: dict[str, Any],
    caps: tuple[int, int],
    seed: int = SEED,
) -> dict[str, Any] | None:
    """The latest stored row for this dataset, model, variant, caps and seed (rows written
    before ``--seeds`` existed are seed 0)."""
    kind = TASK_BY_NAME[name].kind
    want = resolved_tabsparse_params(kind, params, seed) if model == "tabsparse" else None
    for row in reversed(rows):
        if (row["dataset"], row["model"]) != (name, model):
            continue
        if model in NEURAL and row.get("seed", SEED) != seed:
            continue
        if (row.get("train_cap"), row.get("test_cap")) != caps and not _uncapped(row, caps):
            continue
        if model == "tabsparse":
            n = row.get("n_train")
            stored = with_auto_resolved(
                _completed(row.get("tabsparse_params", {})), n, row.get("n_members_"), kind
            )
            if stored != with_auto_resolved(want, n, kind=kind):
                continue
        elif row.get("params", {}) != params:
            continue
        return row
    return None


def stored_seeds(
    rows: list[dict[str, Any]], name: str, model: str, params: dict[str, Any], caps: tuple[int, int]
) -> list[dict[str, Any]]:
    """The latest stored row of every seed of this dataset, model, variant and caps."""
    seeds = sorted(
        {r.get("seed", SEED) for r in rows if (r["dataset"], r["model"]) == (name, model)}
    )
    found = (find_stored(rows, name, model, params, caps, seed) for seed in seeds)
    return [r for r in found if r is not None]


METRICS = ("accuracy", "auc", "rmse", "r2", "fit_s", "fit_cpu_s", "predict_s", "epochs")


def primary(row: dict[str, Any]) -> float:
    return row["rmse"] if row["kind"] == "regression" else row["accuracy"]


def mean_over_seeds(seed_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row whose metrics (and fit seconds, epochs) are the means over ``seed_rows``; with
    ``n_seeds`` and ``spread`` (max - min of the primary metric) added."""
    if len(seed_rows) == 1:
        return {**seed_rows[0], "n_seeds": 1, "spread": 0.0}
    out = dict(seed_rows[-1])
    for key in METRICS:
        values = [r[key] for r in seed_rows if key in r]
        if values:
            out[key] = float(np.mean(values))
    firsts = [primary(r) for r in seed_rows]
    out.update(
        n_seeds=len(seed_rows),
        spread=float(max(firsts) - min(firsts)),
        seeds=[r.get("seed", SEED) for r in seed_rows],
        per_seed=firsts,
        per_seed_metrics={
            k: [r[k] for r in seed_rows] for k in ("accuracy", "auc", "rmse") if k in out
        },
    )
    return out
