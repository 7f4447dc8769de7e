"""Every boundary of the export spec's code rules, against the estimator's own predictions.

Codes are ``0`` missing, ``1`` unseen, ``k + 2`` for vocabulary entry ``k`` (the last valid code is
``cardinality - 1``); anything outside ``[0, cardinality)`` is served as unseen. Each code is fed
to the serving graph for the first, a middle and the last categorical column, and the output must
equal ``predict_proba`` / ``predict`` on a row holding the value that code stands for. Every
categorical column has missing values at fit, so its missing slot is trained and differs from the
unseen one (an off-by-one at ``cardinality`` would read the next column's missing slot, or past
the table for the last column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.export import export_model, export_spec, serving_module

SMALL: dict[str, Any] = dict(
    max_epochs=4, n_d=8, n_a=8, n_steps=2, n_independent=1, n_shared=1, random_state=0, device="cpu"
)
CATEGORICAL = ["color", "size", "shape"]


def _frame(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def with_missing(values: list[Any]) -> np.ndarray:
        return rng.choice(np.array([*values, None], dtype=object), n)

    return pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "color": with_missing(["red", "green", "blue", "black"]),
            "size": with_missing([1, 2, 3]),
            "z": rng.normal(size=n),
            "shape": with_missing(["round", "square"]),
        }
    )


def _target(X: pd.DataFrame) -> np.ndarray:
    score = X["x"].to_numpy() + (X["color"] == "red") - (X["size"] == 3) + (X["shape"].isna())
    return np.asarray(score, dtype=float)


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def models(train: pd.DataFrame) -> dict[str, Any]:
    score = _target(train)
    return {
        "classifier": TabNetClassifier(**SMALL).fit(train, (score > np.median(score)).astype(int)),
        "regressor": TabNetRegressor(**SMALL).fit(train, 10.0 * score),
    }


def _served(module: Any, numeric: np.ndarray, codes: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out = module(torch.from_numpy(numeric), torch.from_numpy(codes))
    return np.asarray(out.reshape(len(numeric), -1).to(torch.float64))


def _own(est: Any, X: pd.DataFrame) -> np.ndarray:
    if isinstance(est, TabNetClassifier):
        return np.asarray(est.predict_proba(X), dtype=np.float64)
    return np.asarray(est.predict(X), dtype=np.float64).reshape(len(X), -1)


def _cases(spec: dict[str, Any], j: int) -> list[tuple[int, Any]]:
    """``(code, value it stands for)`` at every boundary of column ``j``'s code rules."""
    column = spec["categorical"]["columns"][j]
    vocabulary, cardinality = column["vocabulary"], column["cardinality"]
    assert cardinality == len(vocabulary) + 2
    unseen = "never seen" if isinstance(vocabulary[0], str) else 99
    return [
        (0, None),  # missing
        (1, unseen),  # unseen
        (2, vocabulary[0]),  # first entry
        (cardinality - 1, vocabulary[-1]),  # last valid code
        (cardinality, unseen),  # one past the end
        (cardinality + 1, unseen),
        (-1, unseen),
        (-cardinality, unseen),
        (2**62, unseen),
        (-(2**62), unseen),
    ]


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
@pytest.mark.parametrize("j", [0, 1, 2])
def test_every_code_boundary_serves_what_the_estimator_predicts(
    models: dict[str, Any], train: pd.DataFrame, kind: str, j: int
) -> None:
    est = models[kind]
    spec = export_spec(est)
    assert [c["name"] for c in spec["categorical"]["columns"]] == CATEGORICAL
    name = CATEGORICAL[j]
    module = serving_module(est)
    base = train.head(5).reset_index(drop=True)
    enc = est.encoder_.transform(base)
    scale = 1.0 if kind == "classifier" else float(np.max(est.target_scale_))
    for code, value in _cases(spec, j):
        codes = enc.codes.copy()
        codes[:, j] = code
        rows = base.copy()
        rows[name] = pd.Series([value] * len(rows), dtype=object)
        want = _own(est, rows)
        got = _served(module, enc.numeric, codes)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=f"{code=}")


def test_codes_past_the_end_are_unseen_in_the_exported_program(
    models: dict[str, Any], train: pd.DataFrame, tmp_path: Path
) -> None:
    est = models["classifier"]
    program = torch.export.load(str(export_model(est, tmp_path / "m.pt2", "torch"))).module()
    spec = export_spec(est, format="torch")
    enc = est.encoder_.transform(train.head(4))
    for j in range(3):
        cardinality = spec["categorical"]["columns"][j]["cardinality"]
        rows = train.head(4).reset_index(drop=True)
        rows[CATEGORICAL[j]] = pd.Series(["never seen" if j != 1 else 99] * 4, dtype=object)
        want = _own(est, rows)
        for code in (cardinality, -1):
            codes = enc.codes.copy()
            codes[:, j] = code
            np.testing.assert_allclose(_served(program, enc.numeric, codes), want, atol=1e-5)
        codes = enc.codes.copy()
        codes[:, j] = cardinality - 1
        rows[CATEGORICAL[j]] = pd.Series(
            [spec["categorical"]["columns"][j]["vocabulary"][-1]] * 4, dtype=object
        )
        np.testing.assert_allclose(_served(program, enc.numeric, codes), _own(est, rows), atol=1e-5)
