"""tabsparse: TabNet on sparsemax, as fast, exact scikit-learn estimators.

The pure-torch core (:mod:`tabsparse.sparsemax`, :mod:`tabsparse.losses`, :mod:`tabsparse.nn`,
:mod:`tabsparse.training`, :mod:`tabsparse.data`) never imports scikit-learn; the estimators in
:mod:`tabsparse.estimators` are the thin scikit-learn layer on top.

The package imports lazily (PEP 562): ``import tabsparse`` loads neither torch nor
scikit-learn, and each name below is imported from its module the first time it is used, so
``import tabsparse.sparsemax`` and ``tabsparse --version`` stay cheap. Submodules are also
reachable as attributes (``tabsparse.io``) without importing them first.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tabsparse.estimators import TabNetClassifier, TabNetPretrainer, TabNetRegressor
    from tabsparse.estimators._persistence import load, save
    from tabsparse.estimators._refits import RefitImportances, refit_importances
    from tabsparse.explain import Explanation
    from tabsparse.io import ModelFileError
    from tabsparse.losses import SparsemaxLoss, sparsemax_loss
    from tabsparse.sparsemax import Entmax15, Sparsemax, entmax15, sparsemax

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "Entmax15": "tabsparse.sparsemax",
    "Explanation": "tabsparse.explain",
    "ModelFileError": "tabsparse.io",
    "RefitImportances": "tabsparse.estimators._refits",
    "Sparsemax": "tabsparse.sparsemax",
    "SparsemaxLoss": "tabsparse.losses",
    "TabNetClassifier": "tabsparse.estimators",
    "TabNetPretrainer": "tabsparse.estimators",
    "TabNetRegressor": "tabsparse.estimators",
    "entmax15": "tabsparse.sparsemax",
    "load": "tabsparse.estimators._persistence",
    "refit_importances": "tabsparse.estimators._refits",
    "save": "tabsparse.estimators._persistence",
    "sparsemax": "tabsparse.sparsemax",
    "sparsemax_loss": "tabsparse.losses",
}

__all__ = [
    "Entmax15",
    "Explanation",
    "ModelFileError",
    "RefitImportances",
    "Sparsemax",
    "SparsemaxLoss",
    "TabNetClassifier",
    "TabNetPretrainer",
    "TabNetRegressor",
    "__version__",
    "entmax15",
    "load",
    "refit_importances",
    "save",
    "sparsemax",
    "sparsemax_loss",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a submodule) on first use and keep it in the namespace."""
    module_name = _EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Package(types.ModuleType):
    """The type of this package: ``tabsparse.sparsemax`` stays the function :func:`sparsemax`.

    The function shares its name with the submodule that defines it. Importing a submodule makes
    the import system bind it as an attribute of its package; this binding is skipped for the
    function's name, so ``from tabsparse import sparsemax`` gives the function whatever was
    imported before (the submodule itself stays in ``sys.modules``).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            name in _EXPORTS
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{__name__}.{name}"
        ):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
