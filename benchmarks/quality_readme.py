"""The two quality sections of benchmarks/README.md rebuilt from the stored rows alone (no fits,
no datasets): ``results/quality.jsonl`` holds every fit, and the table shows the latest stored
tabsparse variant that ran on every dataset with the current defaults (``variants``), beside the
latest stored row of every reference model at the same caps.
"""

from __future__ import annotations

from typing import Any

import quality_best
from quality_refs import variant as variant_tag
from quality_report import render, summary, variants
from quality_store import (
    find_stored,
    load_results,
    mean_over_seeds,
    resolved_tabsparse_params,
    stored_seeds,
)
from quality_tasks import ALL_MODELS, NEURAL, SEED, TASKS, TEST_CAP, TRAIN_CAP

CAPS = (TRAIN_CAP, TEST_CAP)
COMMAND = "python benchmarks/bench_quality.py --seeds 3 --reuse"
BEST_COMMAND = (
    "python benchmarks/bench_quality.py --reuse --predictions --workers 1 --small-first "
    "--fit-cpu-limit 900 --models tabsparse hgb lightgbm xgboost catboost realmlp tabm"
)


def _names() -> list[str]:
    return [t.dataset for t in TASKS if not t.skip]


def current_variant(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest stored tabsparse variant at the default caps on every dataset whose parameters
    are the current defaults (else the latest on every dataset)."""
    names = _names()
    full = [v for v in variants(rows, names) if v["caps"] == CAPS and v["n"] == len(names)]

    def last(v: dict[str, Any]) -> str:
        return max(r["tabsparse"].get("time", "") for r in v["by_dataset"].values())

    current = [v for v in full if v["params"] == "current defaults"] or full
    return max(current, key=last)


def _seed0_file(rows: list[dict[str, Any]], name: str, label: str, commit: str) -> str | None:
    """The prediction file of the variant's seed-0 row on ``name`` (matched by label and
    commit), if one was stored."""
    for r in reversed(rows):
        if (r["dataset"], r["model"], r.get("seed", SEED)) != (name, "tabsparse", SEED):
            continue
        if r.get("label", "") == label and r.get("commit") == commit:
            return r.get("predictions_file")
    return None


def stored_table(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(by_dataset, variant)``: the current variant's rows beside every reference model's."""
    v = current_variant(rows)
    by_dataset: dict[str, dict[str, dict[str, Any]]] = {}
    for name in _names():
        ts = dict(v["by_dataset"][name]["tabsparse"])
        ts["seed0_predictions_file"] = _seed0_file(rows, name, v["label"], ts.get("commit", ""))
        out = {"tabsparse": ts}
        for m in ALL_MODELS:
            if m == "tabsparse":
                continue
            if m in NEURAL:
                found = stored_seeds(rows, name, m, {}, CAPS)
            else:
                one = find_stored(rows, name, m, {}, CAPS)
                found = [one] if one is not None else []
            if found:
                out[m] = mean_over_seeds(found)
        by_dataset[name] = out
    return by_dataset, v


def _when(by_dataset: dict[str, Any], models: tuple[str, ...]) -> str:
    times = sorted(
        r["time"][:10]
        for rows in by_dataset.values()
        for m, r in rows.items()
        if m in models and r.get("time")
    )
    return f"{times[0]} to {times[-1]}" if times and times[0] != times[-1] else "".join(times[:1])


def _machines(by_dataset: dict[str, Any]) -> str:
    found = sorted({r["cpu"] for rows in by_dataset.values() for r in rows.values() if "cpu" in r})
    return "; ".join(found) if found else "not recorded in `results/quality.jsonl`"


def header(by_dataset: dict[str, Any], v: dict[str, Any], command: str) -> str:
    ts = [rows["tabsparse"] for rows in by_dataset.values()]
    commits = sorted({r.get("commit", "?") for r in ts})
    seeds = sorted({r.get("n_seeds", 1) for r in ts})
    refs = tuple(m for m in ALL_MODELS if m != "tabsparse")
    return (
        f"`{command}` (rows in `benchmarks/results/quality.jsonl`; `--reuse` rebuilds the "
        f"table from them without refitting). Machine: {_machines(by_dataset)}; every model "
        f"fitted on 1 thread (fit times are single-thread seconds). tabsparse: the stored run "
        f"of the {v['params']} ({'–'.join(map(str, seeds))} seeds, fitted "
        f"{_when(by_dataset, ('tabsparse',))}, commit {', '.join(commits)}); the reference rows "
        f"fitted {_when(by_dataset, refs)}."
    )


def readme_section() -> str:
    """*Quality against gradient boosting and pytorch-tabnet* from the stored rows."""
    by_dataset, v = stored_table(load_results())
    seeds = max(r["tabsparse"].get("n_seeds", 1) for r in by_dataset.values())
    keep = ("tabsparse", "hgb", "lightgbm", "pytorch-tabnet")
    table = {n: {m: r for m, r in rows.items() if m in keep} for n, rows in by_dataset.items()}
    return render(
        table, CAPS, 1, {}, "", seeds=seeds, header=header(table, v, COMMAND), fit_table=False
    )


def best_readme_section() -> str:
    """*Quality against the best tabular models* from the stored rows and predictions."""
    by_dataset, v = stored_table(load_results())
    ts_tag = {
        k: variant_tag(resolved_tabsparse_params(k, {}))
        for k in ("binary", "multiclass", "regression")
    }
    commits = ", ".join(sorted({r["tabsparse"].get("commit", "?") for r in by_dataset.values()}))
    head = header(by_dataset, v, BEST_COMMAND)
    return quality_best.render(by_dataset, CAPS, ts_tag, commits, header=head)


__all__ = ["best_readme_section", "current_variant", "readme_section", "stored_table", "summary"]
