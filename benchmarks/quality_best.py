"""The "Quality against the best tabular models" section of benchmarks/README.md (issue 23).

``bench_quality.py`` calls :func:`render` with its rows (dataset -> model -> the mean over the
stored seeds) whenever reference rows exist; the paired verdicts come from the stored test
predictions (``quality_refs``) through ``bench_paired.pair_stored``, so nothing is refitted.
Binary tables are judged by ROC AUC, multi-class tables by accuracy, regression by RMSE.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np
from _readme import cpu_model
from bench_paired import pair_stored
from quality_refs import load_predictions, prediction_path
from quality_store import find_stored, load_results

SECTION = "## Quality against the best tabular models"
GBDTS = ("hgb", "lightgbm", "xgboost", "catboost")
COLUMNS = ("tabsparse", *GBDTS, "realmlp", "tabm")
LABEL = {
    "tabsparse": "tabsparse",
    "hgb": "HGB",
    "lightgbm": "LightGBM",
    "xgboost": "XGBoost",
    "catboost": "CatBoost",
    "realmlp": "RealMLP-TD",
    "tabm": "TabM-D",
}
TIMEOUTS = Path(__file__).resolve().parent / "results" / "quality_timeouts.jsonl"
ALPHA = 0.05


def metric_of(kind: str) -> str:
    return {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}[kind]


def value(row: dict[str, Any]) -> float:
    return float(row[metric_of(row["kind"])])


def better(kind: str, a: float, b: float) -> bool:
    """Whether ``a`` is strictly better than ``b``."""
    return a < b if kind == "regression" else a > b


def gap(kind: str, ours: float, best: float) -> float:
    """Points behind (classification, as a fraction) or relative RMSE excess (regression)."""
    return ours / best - 1.0 if kind == "regression" else best - ours


def within(kind: str, g: float) -> bool:
    return g <= (0.03 if kind == "regression" else 0.01)


def paired(dataset: str, a: Path, b: Path) -> dict[str, Any] | None:
    """The paired statistics of two stored prediction files (None if either is missing)."""
    if not (a.exists() and b.exists()):
        return None
    stats = pair_stored(load_predictions(a), load_predictions(b))
    return {"dataset": dataset, **stats}


def _verdict_cell(stats: dict[str, Any] | None, kind: str) -> tuple[str, str | None]:
    """A table cell and the verdict (``"better"``, ``"worse"``, ``"same"``; None: not paired)."""
    if stats is None:
        return "—", None
    if kind == "regression":
        diff = f"{100 * (stats['rmse_ratio'] - 1):+.1f}%"
        ours_better = stats["diff"] < 0
    else:
        diff = f"{100 * stats['diff']:+.2f}"
        ours_better = stats["diff"] > 0
    p = f"{stats['p']:.2g}" if stats["p"] > 0 else "<1e-300"
    if stats["p"] >= ALPHA:
        return f"= ({diff}, p {p})", "same"
    if ours_better:
        return f"better ({diff}, p {p})", "better"
    return f"**worse** ({diff}, p {p})", "worse"


def _cell(row: dict[str, Any] | None, timed_out: bool) -> str:
    if row is None:
        return "> limit" if timed_out else "—"
    v = value(row)
    cell = f"{v:.4g}" if row["kind"] == "regression" else f"{v:.4f}"
    if row.get("n_seeds", 1) > 1:
        per = row.get("per_seed_metrics", {}).get(metric_of(row["kind"]), [])
        if per:
            cell += f" (±{max(per) - min(per):.2g}, {row['n_seeds']})"
        else:
            cell += f" ({row['n_seeds']} seeds)"
    return cell


def _timeouts(caps: tuple[int, int]) -> set[tuple[str, str]]:
    if not TIMEOUTS.exists():
        return set()
    out = set()
    for line in TIMEOUTS.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if (r["train_cap"], r["test_cap"]) == caps:
                out.add((r["dataset"], r["model"]))
    return out


def cpu_seconds(row: dict[str, Any]) -> tuple[float, bool]:
    """The fit's CPU seconds, or its wall seconds for rows stored before CPU time was
    (the flag says which)."""
    if "fit_cpu_s" in row:
        return float(row["fit_cpu_s"]), True
    return float(row["fit_s"]), False


def tabsparse_predictions(
    name: str,
    row: dict[str, Any],
    caps: tuple[int, int],
    tag: str,
    stored: list[dict[str, Any]],
) -> Path:
    """tabsparse's seed-0 test predictions on ``name``: the file of today's parameter ``tag``,
    else the file named by the latest of the ``stored`` seed-0 rows of ``row``'s parameter set
    that recorded one (``quality_store.find_stored``). A file carries the tag of the parameters
    of its fit, so a tabsparse parameter added since (which stored rows are matched on at its
    no-op value) changes today's tag but not the file's name."""
    path = prediction_path(name, "tabsparse", 0, tag)
    if path.exists():
        return path
    if row.get("seed0_predictions_file"):  # set by quality_readme for a stored variant
        return path.parent / Path(row["seed0_predictions_file"]).name
    with_file = [r for r in stored if r.get("predictions_file")]
    found = find_stored(with_file, name, "tabsparse", row.get("params", {}), caps, 0)
    return path.parent / Path(found["predictions_file"]).name if found else path


def analyse(
    by_dataset: dict[str, dict[str, dict[str, Any]]],
    ts_tag: dict[str, str],
    caps: tuple[int, int],
) -> list[dict[str, Any]]:
    """Per dataset: the best GBDT among the fitted ones, tabsparse's gap to it, and the paired
    tests of tabsparse (seed 0) against the best GBDT and against RealMLP-TD."""
    stored = load_results()
    out = []
    for name, rows in by_dataset.items():
        ts = rows.get("tabsparse")
        gbdts = [m for m in GBDTS if m in rows]
        if ts is None or not gbdts:
            continue
        kind = ts["kind"]
        best = gbdts[0]
        for m in gbdts[1:]:
            if better(kind, value(rows[m]), value(rows[best])):
                best = m
        ts_file = tabsparse_predictions(name, ts, caps, ts_tag[kind], stored)
        g = gap(kind, value(ts), value(rows[best]))
        out.append(
            {
                "dataset": name,
                "kind": kind,
                "best": best,
                "gap": g,
                "within": within(kind, g),
                "ahead": better(kind, value(ts), value(rows[best])),
                "vs_best": paired(name, ts_file, prediction_path(name, best, 0)),
                "vs_realmlp": paired(name, ts_file, prediction_path(name, "realmlp", 0)),
            }
        )
    return out


def _machine_paragraph(commit: str) -> str:
    """This machine and its versions now, for a section written right after the fits."""
    from importlib.metadata import version

    packages = ("torch", "scikit-learn", "lightgbm", "xgboost-cpu", "catboost", "pytabkit")
    found_versions = []
    for package in packages:
        try:
            found_versions.append(f"{package} {version(package)}")
        except Exception:  # not installed (e.g. the plain xgboost instead of xgboost-cpu)
            continue
    versions = ", ".join([*found_versions, f"Python {platform.python_version()}"])
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    return (
        f"Machine: {cpu_model()}, 2 logical cores shared with other work; one worker process, "
        f"**every model on 1 thread**; {versions}; rendered {when}; tabsparse at commit {commit} "
        "with its defaults. Generated by `python benchmarks/bench_quality.py --reuse "
        "--predictions --workers 1 --small-first --fit-cpu-limit 900 --models tabsparse hgb "
        "lightgbm xgboost catboost realmlp tabm` (rows in `benchmarks/results/quality.jsonl`, "
        "test predictions in `benchmarks/results/predictions/`); `--reuse` rebuilds this table "
        "from the stored rows without refitting."
    )


def render(
    by_dataset: dict[str, dict[str, dict[str, Any]]],
    caps: tuple[int, int],
    ts_tag: dict[str, str],
    commit: str,
    header: str = "",
) -> str:
    """The section's Markdown; ``header`` (the machine and command, e.g. read from the stored
    rows) replaces the first paragraph, which otherwise describes this machine now."""
    found = {a["dataset"]: a for a in analyse(by_dataset, ts_tag, caps)}
    timeouts = _timeouts(caps)
    lines = [
        header or _machine_paragraph(commit),
        "",
        "Same tasks, splits and caps as *Quality against gradient boosting and pytorch-tabnet* "
        f"(training rows capped at {caps[0]:,}, test rows at {caps[1]:,}). Metric: **ROC AUC** "
        "on binary tables, **accuracy** on multi-class tables, **RMSE** on regression tables. "
        "Every reference runs with its library's defaults on one thread: XGBoost "
        '`(n_jobs=1, random_state=0, enable_categorical=True, tree_method="hist")` on the '
        "pandas categories; CatBoost `(thread_count=1, random_seed=0, verbose=0)` with the "
        "categorical columns as `cat_features` (NaN its own level); pytabkit's RealMLP-TD and "
        'TabM-D `(device="cpu", n_threads=1, random_state=0)` with the pandas categories '
        "(numeric NaN set to the training mean), each fitted once. tabsparse: the mean over its "
        "stored seeds (in brackets: the range and the number of seeds). `best GBDT` = the best "
        "of HGB, LightGBM, XGBoost and CatBoost on that table; `gap` = points behind it (AUC or "
        "accuracy), or % RMSE above it. The paired columns test tabsparse's seed-0 predictions "
        "against the other model's on the same test rows (`bench_paired.pair_stored`): DeLong's "
        "test of two correlated AUCs (binary), McNemar's exact test (multi-class), the paired "
        "test of the squared errors (regression); `=` = no significant difference (p ≥ 0.05), "
        "with the difference of tabsparse minus the other (points, or % RMSE). `> limit` = the "
        "fit ran past its 900 CPU-second limit and was dropped; `—` = not fitted.",
        "",
        "| dataset | task | metric | "
        + " | ".join(LABEL[m] for m in COLUMNS)
        + " | best GBDT | gap | tabsparse vs best GBDT | tabsparse vs RealMLP-TD |",
        "|---|---|---|" + "---:|" * len(COLUMNS) + "---|---:|---|---|",
    ]
    for name, rows in by_dataset.items():
        any_row = next(iter(rows.values()))
        kind = any_row["kind"]
        cells = [_cell(rows.get(m), (name, m) in timeouts) for m in COLUMNS]
        a = found.get(name)
        if a is None:
            tail = ["—", "—", "—", "—"]
        else:
            g = f"{100 * a['gap']:+.1f}%" if kind == "regression" else f"{100 * a['gap']:+.2f}"
            tail = [
                LABEL[a["best"]],
                g,
                _verdict_cell(a["vs_best"], kind)[0],
                _verdict_cell(a["vs_realmlp"], kind)[0],
            ]
        lines.append(f"| {name} | {kind} | {metric_of(kind)} | " + " | ".join(cells + tail) + " |")

    n = len(found)
    within_n = sum(a["within"] for a in found.values())
    verdict_best = {k: _verdict_cell(a["vs_best"], a["kind"])[1] for k, a in found.items()}
    verdict_rmlp = {k: _verdict_cell(a["vs_realmlp"], a["kind"])[1] for k, a in found.items()}
    within_or_same = sum(
        a["within"] or verdict_best[k] in ("same", "better") for k, a in found.items()
    )
    paired_rmlp = [v for v in verdict_rmlp.values() if v is not None]
    ahead = sum(a["ahead"] for a in found.values())
    ahead_sig = sum(v == "better" for v in verdict_best.values())
    lines += [
        "",
        "**Goals of issue 23** (tabsparse defaults as they are here):",
        f"- within 1 point (AUC / accuracy) or 3% RMSE of the best GBDT: **{within_n} of {n}** "
        f"by the means ({within_or_same} of {n} counting a paired test that finds no "
        "significant difference as within; goal: 13 of 17);",
        f"- at least as good as RealMLP-TD (not significantly worse in the paired test): "
        f"**{sum(v in ('same', 'better') for v in paired_rmlp)} of {len(paired_rmlp)}** tables "
        "where RealMLP-TD was fitted (goal: 9 of 17);",
        f"- ahead of the best GBDT: **{ahead}** by the means, **{ahead_sig}** significantly "
        "(goal: 4).",
    ]
    lines += ["", *_cost_table(by_dataset)]
    return "\n".join(lines) + "\n"


def _cost_table(by_dataset: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Fit CPU seconds per model summed over its tables, beside its relative quality; the same
    on the tables every model was fitted on."""
    rel: dict[str, dict[str, float]] = {m: {} for m in COLUMNS}
    secs: dict[str, dict[str, float]] = {m: {} for m in COLUMNS}
    wall_only: dict[str, int] = dict.fromkeys(COLUMNS, 0)
    for name, rows in by_dataset.items():
        present = [m for m in COLUMNS if m in rows]
        if not present:
            continue
        kind = rows[present[0]]["kind"]
        vals = {m: value(rows[m]) for m in present}
        best = min(vals.values()) if kind == "regression" else max(vals.values())
        for m in present:
            v = vals[m]
            rel[m][name] = best / v if kind == "regression" and v > 0 else v / best
            secs[m][name], is_cpu = cpu_seconds(rows[m])
            wall_only[m] += not is_cpu
    fitted = [m for m in COLUMNS if rel[m]]
    common = sorted(set.intersection(*(set(rel[m]) for m in fitted))) if fitted else []
    lines = [
        "Cost beside quality, per model: fit seconds summed over the tables it was fitted on "
        "(CPU seconds of the worker process; `*` = rows stored before CPU time was recorded "
        "count their wall seconds) and its **relative quality** = the mean over those tables "
        "of its metric as a percentage of the best model's on the table (RMSE: best / its); "
        f"then the same on the {len(common)} tables every model here was fitted on.",
        "",
        "| model | tables | fit s (sum) | fit s per table | relative quality | "
        f"fit s, {len(common)} common tables | relative quality, common tables |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m in fitted:
        k = len(rel[m])
        total = sum(secs[m].values())
        q = 100 * float(np.mean(list(rel[m].values())))
        star = "*" if wall_only[m] else ""
        c_secs = sum(secs[m][n] for n in common)
        c_q = 100 * float(np.mean([rel[m][n] for n in common])) if common else math.nan
        lines.append(
            f"| {LABEL[m]} | {k} | {total:.0f}{star} | {total / k:.1f} | {q:.2f}% | "
            f"{c_secs:.0f} | {c_q:.2f}% |"
        )
    lines += [
        "",
        "The references need the `bench` extra, which `make test` does not install: "
        '`pip install "torch==2.13.0" -e ".[bench]"` (torch named first, pinned to the '
        "installed CPU build, so that pip never swaps in a CUDA torch; XGBoost comes as "
        "`xgboost-cpu`, without NVIDIA's NCCL). Pair any two stored models with "
        "`python benchmarks/bench_paired.py --a tabsparse --b catboost`.",
    ]
    return lines
