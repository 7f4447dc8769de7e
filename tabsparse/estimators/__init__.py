"""scikit-learn estimators over the pure-torch TabNet core."""

from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.regressor import TabNetRegressor

__all__ = ["TabNetClassifier", "TabNetRegressor"]
