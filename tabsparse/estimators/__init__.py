"""scikit-learn estimators over the pure-torch TabNet core."""

from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.pretrainer import TabNetPretrainer
from tabsparse.estimators.regressor import TabNetRegressor

__all__ = ["TabNetClassifier", "TabNetPretrainer", "TabNetRegressor"]
