"""Loading model files for the commands, and selecting the columns a model was fitted on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tabsparse.cli._errors import CliError, _one_line
from tabsparse.cli._tables import _check_input_file, _missing_columns

if TYPE_CHECKING:
    import pandas as pd


def _model_io() -> Any:
    """The package's public model-file API: ``load``, ``save`` and ``ModelFileError`` as
    re-exported by :mod:`tabsparse` (wherever they are defined)."""
    import tabsparse

    try:
        for name in ("load", "save", "ModelFileError"):
            getattr(tabsparse, name)
    except ImportError as exc:
        raise CliError(
            f"model files are not available in this installation of tabsparse ({exc})"
        ) from exc
    return tabsparse


def _load_model(path: str, *, predicts: bool = True) -> Any:
    """A fitted estimator from a model file; ``predicts``: it must have ``predict`` (a
    ``TabNetPretrainer`` has not: it can be explained and inspected only)."""
    _check_input_file(path, "model")
    io = _model_io()
    try:
        model = io.load(path)
    except io.ModelFileError as exc:  # its message names the file and the problem
        raise CliError(_one_line(exc)) from exc
    if not hasattr(model, "encoder_"):
        raise CliError(f"{path} does not hold a fitted tabsparse estimator")
    if predicts and not hasattr(model, "predict"):
        raise CliError(
            f"{path} holds a {type(model).__name__}, which makes no predictions "
            "(use 'tabsparse explain' or 'tabsparse info', or transform in Python)"
        )
    return model


def _model_features(model: Any, frame: pd.DataFrame, path: str) -> Any:
    """The columns of ``frame`` the model was fitted on (others, such as the target, dropped)."""
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        names = [str(n) for n in names]
        _missing_columns(names, frame, path, "column(s) the model needs")
        return frame[names]
    n_features = int(model.n_features_in_)
    if frame.shape[1] != n_features:
        raise CliError(
            f"{path} has {frame.shape[1]} columns, but the model (fitted without column names) "
            f"expects {n_features}"
        )
    return frame.to_numpy()
