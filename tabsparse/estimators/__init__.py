"""scikit-learn estimators over the pure-torch TabNet core.

=========================  ===================================================================
:mod:`.classifier`         :class:`TabNetClassifier` (single, multi-label, multi-task)
:mod:`.regressor`          :class:`TabNetRegressor`
:mod:`.pretrainer`         :class:`TabNetPretrainer` (self-supervised, for ``pretrained=``)
:mod:`._base`              the fit template and the state every estimator shares
:mod:`._supervised`        what the classifier and the regressor share
:mod:`._targets`           each kind of target: encoding, loss, outputs, what is explained
:mod:`._multioutput`       recognising multi-label and multi-task targets
:mod:`._inputs`            the devices and tables the estimators accept, checked
:mod:`._finetune`          ``pretrained=``: starting from a pretrainer's weights
:mod:`._auto`              the "auto" rules of the architecture
:mod:`._tables`            checking and encoding the tables of a fit and after it
:mod:`._scoring`           the validation score of a scikit-learn ``scoring``
:mod:`._explaining`        ``explain``, the importances, the column selector and background
:mod:`._refits`            :func:`tabsparse.refit_importances`
:mod:`._persistence`       estimators <-> model files (``tabsparse.save`` / ``load``)
:mod:`._fitted_checks`     the checks of fitted attributes read from a file
=========================  ===================================================================
"""

# model files: registers these classes as tabsparse.io's default allow-list
from tabsparse.estimators import _persistence  # noqa: F401
from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.pretrainer import TabNetPretrainer
from tabsparse.estimators.regressor import TabNetRegressor

__all__ = ["TabNetClassifier", "TabNetPretrainer", "TabNetRegressor"]
