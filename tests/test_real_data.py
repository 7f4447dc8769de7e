"""Learning on real data from ../shared/datasets, against pytorch-tabnet's default accuracy.

pytorch-tabnet 4.1 with its defaults reaches about 0.855 on adult (official split) and about 0.81
on covtype_50k_sample (80/20 split, seed 0); tabsparse with its defaults must do at least as well.
"""

from __future__ import annotations

import numpy as np
from conftest import load_dataset
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

from tabsparse import TabNetClassifier


def test_adult_reaches_pytorch_tabnet_accuracy() -> None:
    df = load_dataset("adult")
    train, test = df[df["split"] == "train"], df[df["split"] == "test"]
    features = [c for c in df.columns if c not in ("income", "split")]
    clf = TabNetClassifier(random_state=0, device="cpu")
    clf.fit(train[features], train["income"])
    acc = accuracy_score(test["income"], clf.predict(test[features]))
    assert acc >= 0.85, acc


def test_covtype_reaches_pytorch_tabnet_accuracy() -> None:
    df = load_dataset("covtype_50k_sample")
    X, y = df.drop(columns=["Cover_Type"]), df["Cover_Type"]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    clf = TabNetClassifier(random_state=0, device="cpu")
    clf.fit(X_train, y_train)
    acc = accuracy_score(y_test, clf.predict(X_test))
    assert acc >= 0.81, acc
    assert np.isclose(clf.feature_importances_.sum(), 1.0)
