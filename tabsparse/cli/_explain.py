"""``tabsparse explain``: per-row feature importances, the columns each row needs, or signed
attributions of a saved model, and a plot of its masks."""

from __future__ import annotations

import argparse
from typing import Any

from tabsparse.cli._errors import EXIT_OK, CliError
from tabsparse.cli._models import _load_model, _model_features
from tabsparse.cli._output import _check_output_file, _write_csv
from tabsparse.cli._tables import read_table


def run(args: argparse.Namespace) -> int:
    """Run ``tabsparse explain``; returns the exit status."""
    _check_output_file(args.output, "importances")
    for flag in ("selected", "attributions"):
        if getattr(args, flag) and args.plot is not None:
            raise CliError(f"--plot draws the attention masks; it cannot be combined with --{flag}")
    chosen = [f"--{f}" for f in ("selected", "attributions") if getattr(args, f)]
    if len(chosen) > 1:
        raise CliError(f"{' and '.join(chosen)} write different tables: choose one")
    if args.permutations is not None and not args.attributions:
        raise CliError("--permutations sets how attributions are sampled: add --attributions")
    if args.permutations is not None and args.permutations % 2:
        raise CliError(f"--permutations {args.permutations}: give an even number (pairs of orders)")
    if args.plot is not None:
        from tabsparse.plotting import _require_matplotlib

        _require_matplotlib()
        _check_output_file(args.plot, "plot")
        if args.plot == "-":
            raise CliError("the plot cannot be written to stdout; give a file name to --plot")
    model = _load_model(args.model, predicts=args.selected or args.attributions)
    X = _model_features(model, read_table(args.data, args.sep), args.data)
    if len(X) == 0:  # a header-only file: one column per feature, no rows
        if args.plot is not None:
            raise CliError(f"{args.data} has no rows: there are no masks to plot")
        import pandas as pd

        _write_csv(pd.DataFrame(columns=list(model.encoder_.input_names)), args.output)
        return EXIT_OK
    if args.attributions:
        _write_csv(_attribution_table(model, X, args.permutations), args.output)
        return EXIT_OK
    explanation = model.explain(X)
    if args.selected:
        import pandas as pd

        chosen_p = explanation.selection_probabilities
        values = explanation.selected.astype(float) if chosen_p is None else chosen_p
        _write_csv(pd.DataFrame(values, columns=explanation.feature_names), args.output)
        return EXIT_OK
    _write_csv(explanation.to_frame(), args.output)
    if args.plot is not None:
        from matplotlib.figure import Figure

        from tabsparse.plotting import _masks_figsize, plot_masks

        rows = list(range(min(args.rows, len(explanation))))
        n_steps, _, n_features = explanation.masks.shape
        fig = Figure(figsize=_masks_figsize(n_steps, len(rows), n_features), layout="constrained")
        plot_masks(explanation, rows, fig=fig)
        fig.savefig(args.plot, dpi=100)
    return EXIT_OK


def _attribution_table(model: Any, X: Any, permutations: int | None) -> Any:
    """The attributions of the rows of ``X`` and their base value, one column per input column
    (``"<column>@<output>"`` for each of several outputs)."""
    import numpy as np
    import pandas as pd

    e = model.explain(X, attributions=True, n_permutations=permutations or "auto")
    if e.attributions.ndim == 2:
        return pd.DataFrame(e.attributions, columns=e.feature_names).assign(
            base_value=e.base_values
        )
    outputs = e.output_names
    columns = [f"{c}@{o}" for o in outputs for c in e.feature_names]
    values = np.concatenate([e.attributions[:, :, k] for k in range(len(outputs))], axis=1)
    table = pd.DataFrame(values, columns=columns)
    for k, o in enumerate(outputs):
        table[f"base_value@{o}"] = e.base_values[:, k]
    return table
