"""Quick start: fit, predict and explain on a pandas DataFrame with mixed column types.

``--max-epochs`` (default 30) sets the training epochs; a smaller number runs it faster.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from tabsparse import TabNetClassifier

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--max-epochs", type=int, default=30)
args = parser.parse_args()

rng = np.random.default_rng(0)
n = 2000
X = pd.DataFrame(
    {
        "age": rng.integers(18, 90, n).astype(float),
        "income": rng.lognormal(10, 1, n),
        "city": pd.Categorical(rng.choice(["paris", "lyon", "nice"], n)),
        "member": rng.random(n) > 0.5,
    }
)
X.loc[::10, "income"] = np.nan  # missing values are fine
y = np.where((X["age"] > 50) & (X["city"] == "paris"), "buy", "pass")

clf = TabNetClassifier(max_epochs=args.max_epochs, random_state=0).fit(X, y)
print("classes:", clf.classes_)
print("probabilities of the first rows:\n", clf.predict_proba(X.head(3)))
print("accuracy on the training data:", round(clf.score(X, y), 3))

explanation = clf.explain(X.head(2))
for row in range(2):
    print(f"row {row} top features:", explanation.top_features(row, k=2))
print("global importances:", dict(zip(X.columns, clf.feature_importances_.round(3), strict=True)))
