"""The fixed choices: settings of the model and its training that are not parameters.

Each was a constructor parameter that no user has a documented reason to change and that the
quality benchmark did not show to matter on real tables at another value; each is now one fixed
value per estimator (supervised estimators / :class:`~tabsparse.TabNetPretrainer`):

- batch-norm momentum: 0.1 per virtual batch / 0.02;
- attention masks: sparsemax / sparsemax;
- the first mask: the "auto" rule (:mod:`tabsparse.estimators._auto`) / per row (the paper's);
- the categorical embedding's width: the "auto" rule / 1;
- channels per numeric column of the numeric embedding: 8 / (no numeric embedding);
- column revival: the shared first mask's columns that fell out in the first 3 epochs are put
  back for a trial, with no pruning after / (no shared first mask);
- AdamW: betas (0.9, 0.999), no weight decay, a cosine learning-rate schedule / the same;
- predictions from an average of the weights (EMA, decay 0.99) / none;
- early-stopping tolerance: 1e-7 / 1e-4;
- a checkpoint (with ``checkpoint_dir``) after every epoch / the same;
- ``torch.compile``: only on CUDA and only where the epochs left are long enough for it to
  shorten the whole fit, eager when the compiler fails (:mod:`tabsparse.compiling`); PyTorch's
  environment variable ``TORCHDYNAMO_DISABLE=1`` keeps every fit eager / the same;
- torchrun: a fit in a process launched by torchrun (or in an initialised process group) trains
  across its ranks / one process.

Model files keep the network's settings in ``architecture_``, so a file written while these were
parameters loads with the values it was fitted with.
"""

from __future__ import annotations

import dataclasses

__all__ = ["PRETRAINER", "REMOVED_PARAMS", "SUPERVISED", "FixedChoices"]


@dataclasses.dataclass(frozen=True)
class FixedChoices:
    """One estimator's fixed choices (the module docstring's table)."""

    momentum: float
    mask_type: str
    first_mask: str  # "auto": :func:`tabsparse.estimators._auto.resolve_architecture`
    cat_emb_dim: int | str
    numeric_embedding_dim: int
    column_revival: int
    column_pruning: bool
    beta_2: float
    weight_decay: float
    lr_schedule: str
    ema_decay: float | None
    tol: float
    checkpoint_every: int
    compile: bool | str
    distributed: bool | str
    huber_delta: float


SUPERVISED = FixedChoices(
    momentum=0.1,
    mask_type="sparsemax",
    first_mask="auto",
    cat_emb_dim="auto",
    numeric_embedding_dim=8,
    column_revival=3,
    column_pruning=False,
    beta_2=0.999,
    weight_decay=0.0,
    lr_schedule="cosine",
    ema_decay=0.99,
    tol=1e-7,
    checkpoint_every=1,
    compile="auto",
    distributed="auto",
    huber_delta=1.0,
)

PRETRAINER = dataclasses.replace(
    SUPERVISED,
    momentum=0.02,
    first_mask="per_row",
    cat_emb_dim=1,
    column_revival=0,
    ema_decay=None,
    tol=1e-4,
    distributed=False,
)

#: The former parameters (model files written while they were parameters may name them).
REMOVED_PARAMS = frozenset(f.name for f in dataclasses.fields(FixedChoices))
