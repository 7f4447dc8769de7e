"""Regression objectives: a count target with ``loss="poisson"``, a positive skewed target with
``loss="gamma"``, and 90% prediction intervals with ``loss="quantile"``.

Data: scikit-learn's diabetes table (442 rows, shipped with scikit-learn, no download). Its target
(disease progression a year later) is positive; the count target is drawn from a Poisson
distribution whose rate depends on three of its columns, so the true mean is known.

Run: ``python examples/regression_objectives.py`` (about 15 seconds on one CPU core);
``--max-epochs 2`` for a smoke test.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.metrics import mean_gamma_deviance, mean_poisson_deviance, r2_score
from sklearn.model_selection import train_test_split

from tabsparse import TabNetRegressor


def main(max_epochs: int) -> None:
    X, disease = load_diabetes(return_X_y=True, as_frame=True)
    rng = np.random.default_rng(0)
    rate = np.exp(0.3 + 8.0 * X["bmi"] + 6.0 * X["s5"] - 4.0 * X["s3"])  # 0.2 .. 8 per year
    counts = rng.poisson(rate)
    idx_train, idx_test = train_test_split(np.arange(len(X)), test_size=0.3, random_state=0)
    X_train, X_test = X.iloc[idx_train], X.iloc[idx_test]
    # 309 training rows: a small network and few epochs (more overfit, see the user guide)
    common = dict(max_epochs=max_epochs, n_d=8, n_a=8, random_state=0, device="cpu")

    print("1. count target (Poisson draws; true mean known)")
    for loss in ("squared_error", "poisson"):
        reg = TabNetRegressor(loss=loss, **common).fit(X_train, counts[idx_train])
        pred = reg.predict(X_test)
        negative = int((pred <= 0).sum())
        deviance = mean_poisson_deviance(counts[idx_test], np.maximum(pred, 1e-3))
        error = np.abs(pred - rate.to_numpy()[idx_test]).mean()
        print(
            f"   {loss:>13}: min prediction {pred.min():6.2f}, {negative} <= 0 of {len(pred)}; "
            f"Poisson deviance {deviance:.3f} (predictions clipped at 1e-3); "
            f"mean error to the true rate {error:.3f}"
        )

    print("2. positive, right-skewed target (disease progression)")
    for loss in ("squared_error", "gamma"):
        reg = TabNetRegressor(loss=loss, **common).fit(X_train, disease.iloc[idx_train])
        pred = reg.predict(X_test)
        y_test = disease.iloc[idx_test]
        gamma = mean_gamma_deviance(y_test, np.maximum(pred, 1.0))
        print(
            f"   {loss:>13}: R2 {r2_score(y_test, pred):.3f}, gamma deviance {gamma:.4f}, "
            f"min prediction {pred.min():.1f}"
        )

    print("3. 90% prediction intervals: quantile=[0.05, 0.5, 0.95]")
    reg = TabNetRegressor(loss="quantile", quantile=[0.05, 0.5, 0.95], **common)
    reg.fit(X_train, disease.iloc[idx_train])
    low, median, high = reg.predict(X_test).T  # columns in the order of quantile=
    y_test = disease.iloc[idx_test].to_numpy()
    inside = np.mean((low <= y_test) & (y_test <= high))
    print(
        f"   coverage on the test rows {inside:.1%} (aimed at 90%), mean width "
        f"{np.mean(high - low):.1f}, below the median {np.mean(y_test < median):.1%}; "
        f"score (mean D2 pinball) {reg.score(X_test, y_test):.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-epochs", type=int, default=20)
    main(parser.parse_args().max_epochs)
