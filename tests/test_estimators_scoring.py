"""Small edges of the estimators (issue 25 item 9): a ``scoring`` that no validation uses is
reported, and the tags say strings are accepted."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor

TINY: dict[str, Any] = {"n_d": 4, "n_a": 4, "n_steps": 2, "max_epochs": 2, "random_state": 0}


def data(n: int = 120) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.choice(["u", "v"], size=n)})
    return X, (X["a"] > 0).to_numpy().astype(int)


def scoring_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "is not used" in str(w.message)]


def test_scoring_without_validation_rows_warns_with_the_reason() -> None:
    X, y = data(120)
    with pytest.warns(UserWarning, match="scoring='roc_auc' is not used") as caught:
        TabNetClassifier(**TINY, scoring="roc_auc").fit(X, y)
    (message,) = scoring_warnings(list(caught))
    assert [w.filename for w in caught if "is not used" in str(w.message)] == [__file__]
    # a binary target validates from 100 held-out rows (1,000 rows at the default 10%)
    assert "early_stopping='auto' holds out a validation split only from 1000 rows" in message
    assert "(validation_fraction=0.1 of them >= 100)" in message
    assert "X has 120" in message
    assert "Pass X_val and y_val, or set early_stopping=True" in message
    with pytest.warns(UserWarning, match="scoring='r2' is not used") as caught:
        TabNetRegressor(**TINY, scoring="r2", early_stopping=False).fit(X, y.astype(float))
    (message,) = scoring_warnings(list(caught))
    assert "early_stopping=False and no X_val was given" in message
    assert [w.filename for w in caught if "is not used" in str(w.message)] == [__file__]


def test_the_threshold_in_the_message_follows_validation_fraction() -> None:
    X, y = data(120)
    with pytest.warns(UserWarning, match=re.escape("only from 500 rows")):
        TabNetClassifier(**TINY, scoring="accuracy", validation_fraction=0.2).fit(X, y)
    with pytest.warns(UserWarning, match=re.escape("only from 2500 rows")):
        TabNetRegressor(**TINY, scoring="r2", validation_fraction=0.2).fit(X, y.astype(float))
    three = np.where(X["a"] > 0.5, 2, y)  # other targets keep the 500-row minimum
    with pytest.warns(UserWarning, match=re.escape("only from 5000 rows")):
        TabNetClassifier(**TINY, scoring="accuracy").fit(X, three)


def test_no_warning_when_scoring_is_used_or_left_at_loss() -> None:
    X, y = data(120)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TabNetClassifier(**TINY).fit(X, y)  # scoring="loss": nothing to report
        TabNetClassifier(**TINY, scoring="roc_auc").fit(X[:90], y[:90], X_val=X[90:], y_val=y[90:])
        TabNetClassifier(**TINY, scoring="roc_auc", early_stopping=True).fit(X, y)
    assert scoring_warnings(list(caught)) == []


def test_tags_say_strings_and_sparse_matrices_are_accepted() -> None:
    for est in (TabNetClassifier(), TabNetRegressor(), TabNetPretrainer()):
        tags = est.__sklearn_tags__()
        assert tags.input_tags.string is True
        assert tags.input_tags.sparse is True
        assert tags.input_tags.allow_nan is True
    X = np.array([["a", 1.0], ["b", 2.0], ["a", 3.0], ["b", 4.0]] * 10, dtype=object)
    y = np.array([0, 1, 0, 1] * 10)
    clf = TabNetClassifier(**TINY).fit(X, y)
    assert clf.encoder_.kinds == ["categorical", "numeric"]
