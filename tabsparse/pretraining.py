"""Self-supervised pretraining (Arik & Pfister, section 3): masked cells, reconstruction loss.

Pure torch. A Bernoulli mask ``S`` with ``P(S_ij = 1) = pretraining_ratio`` is drawn per cell; the
encoder sees the table with the masked cells turned into *missing values* and the decoder has to
reconstruct them.

Why missing values rather than the paper's ``(1 - S) * x``: after standardisation a zero is the
column mean, so multiplying by ``1 - S`` makes a masked cell indistinguishable from a real value at
the mean, and a categorical code has no meaningful zero at all. tabsparse's inputs already have a
learned per-column value for a missing number (:class:`tabsparse.nn.TabularInput`) and an
embedding slot for a missing category, so a masked cell is presented exactly like a missing one:
the encoder can tell "unknown" from "zero", and the representation it learns for unknown cells is
the one fine-tuning and prediction use for real missing values. (The paper also starts the
encoder's prior at ``1 - S``; tabsparse does not, as the input already marks the cell as unknown.)

Targets are the masked cells that are observed: a cell that is NaN (numeric) or missing/unseen
(categorical) in the data is never a target.

Loss, per feature and then averaged (see :class:`ReconstructionLoss`)::

    numeric j:      l_ij = (r_ij - z_ij)^2,    z_ij = clip((x_ij - mean_j) / std_j, +-clip)
    categorical k:  l_ik = CE(logits_ik, x_ik) / log(max(|V_k|, 2))
    L_f = mean of l_if over the target cells of feature f (masked and observed)
    L   = mean of L_f over the features that have at least one target cell

``mean_j`` and ``std_j`` are the fit-time statistics of the input layer (``std_j`` is 1 for a
constant column and floored at 1e-12), never the batch's: with pytorch-tabnet's division by the
batch standard deviation a constant column makes the loss infinite. Both kinds of term are 1 for
the trivial predictor (the column mean; the uniform distribution over the vocabulary), so features
are comparable and ``L < 1`` means better than guessing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tabsparse.nn.inputs import TabularInput
from tabsparse.training import TensorData, batch_bounds

CODE_MISSING = 0  # tabsparse.data.CODE_MISSING (not imported: data.py is the pandas side)
CODE_OFFSET = 2  # tabsparse.data.CODE_OFFSET: the first vocabulary code


def draw_mask(
    n_rows: int, n_columns: int, ratio: float, generator: torch.Generator
) -> torch.Tensor:
    """Bernoulli(``ratio``) cell mask ``(n_rows, n_columns)`` (bool, on the CPU)."""
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"{ratio=} must be in (0, 1)")
    return torch.rand(n_rows, n_columns, generator=generator) < ratio


def mask_cells(
    numeric: torch.Tensor, codes: torch.Tensor, mask: torch.Tensor, inputs: TabularInput
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hide the cells where ``mask`` is true and return what the loss needs.

    Parameters
    ----------
    numeric : (n, n_num) float tensor
        Raw numeric values (NaN = missing).
    codes : (n, n_cat) int64 tensor
        Category codes (0 missing, 1 unseen, 2.. vocabulary).
    mask : (n, n_num + n_cat) bool tensor
        Cells to hide: numeric columns first, then categorical (the encoded layout).
    inputs : TabularInput
        Supplies the standardisation (``mean``, ``inv_std``, ``clip``) of the targets.

    Returns
    -------
    numeric_in, codes_in : tensors
        The encoder's input: masked numbers become NaN, masked codes become 0 (missing).
    target : (n, n_num + n_cat) float tensor
        Standardised value (numeric) or vocabulary index (categorical) of every masked,
        observed cell; NaN for every cell that is not a target.
    """
    n_num = numeric.shape[1]
    if mask.shape != (numeric.shape[0], n_num + codes.shape[1]):
        raise ValueError(
            f"mask has shape {tuple(mask.shape)}, expected "
            f"{(numeric.shape[0], n_num + codes.shape[1])}"
        )
    mask = mask.to(numeric.device)
    m_num, m_cat = mask[:, :n_num], mask[:, n_num:]
    nan = torch.tensor(float("nan"), dtype=torch.float32, device=numeric.device)
    numeric_in = numeric.masked_fill(m_num, float("nan"))
    codes_in = codes.masked_fill(m_cat, CODE_MISSING)
    z = ((numeric.float() - inputs.mean) * inputs.inv_std).clamp(-inputs.clip, inputs.clip)
    t_num = torch.where(m_num & ~torch.isnan(numeric), z, nan)
    t_cat = torch.where(m_cat & (codes >= CODE_OFFSET), (codes - CODE_OFFSET).float(), nan)
    return numeric_in, codes_in, torch.cat([t_num, t_cat], dim=1)


class ReconstructionLoss:
    """Per-feature-normalised reconstruction loss, returned as a per-row decomposition.

    ``loss(reconstruction, target)`` returns ``(n,)`` values whose mean is the batch loss ``L`` of
    the module docstring (row ``i`` carries ``n / F * sum_f l_if / m_f`` over its target cells,
    with ``m_f`` the target cells of feature ``f`` and ``F`` the features that have any), which
    is what :class:`tabsparse.training.Trainer` expects of a loss function. A batch without any
    target cell has loss 0.

    Parameters
    ----------
    n_numeric : int
        Numeric columns (the first ``n_numeric`` reconstruction values and targets).
    vocab_sizes : sequence of int
        Vocabulary size of each categorical column (its number of logits; may be 0).

    Examples
    --------
    >>> loss = ReconstructionLoss(n_numeric=1, vocab_sizes=[3])
    >>> recon = torch.tensor([[0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    >>> target = torch.tensor([[1.5, 2.0], [float("nan"), float("nan")]])
    >>> loss(recon, target).mean()  # ((0.5 - 1.5)^2 + log(3) / log(3)) / 2
    tensor(1.)
    """

    def __init__(self, *, n_numeric: int, vocab_sizes: Sequence[int]) -> None:
        self.n_numeric = int(n_numeric)
        self.vocab_sizes = [int(v) for v in vocab_sizes]
        if self.n_numeric < 0 or any(v < 0 for v in self.vocab_sizes):
            raise ValueError(f"{n_numeric=} and {vocab_sizes=} must be >= 0")
        self.output_dim = self.n_numeric + sum(self.vocab_sizes)

    def cell_losses(self, reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Normalised loss of every cell ``(n, n_features)``; 0 where the cell is no target."""
        n_num = self.n_numeric
        if reconstruction.shape[1] != self.output_dim:
            raise ValueError(
                f"reconstruction has {reconstruction.shape[1]} columns, expected {self.output_dim}"
            )
        if target.shape[1] != n_num + len(self.vocab_sizes):
            raise ValueError(
                f"target has {target.shape[1]} columns, expected {n_num + len(self.vocab_sizes)}"
            )
        observed = ~torch.isnan(target)
        safe = target.nan_to_num(0.0)
        parts = [(reconstruction[:, :n_num] - safe[:, :n_num]) ** 2]
        start = n_num
        for k, size in enumerate(self.vocab_sizes):
            col = safe[:, n_num + k]
            if size == 0:  # an empty vocabulary: never a target
                parts.append(torch.zeros_like(col).unsqueeze(1))
                continue
            logits = reconstruction[:, start : start + size]
            labels = col.long().clamp(0, size - 1)
            ce = F.cross_entropy(logits, labels, reduction="none")
            parts.append((ce / math.log(max(size, 2))).unsqueeze(1))
            start += size
        cells = torch.cat(parts, dim=1)
        return torch.where(observed, cells, torch.zeros((), dtype=cells.dtype))

    def __call__(self, reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        observed = ~torch.isnan(target)
        cells = self.cell_losses(reconstruction, target)
        count = observed.sum(dim=0)  # target cells per feature
        n_active = (count > 0).sum().clamp_min(1)
        weights = observed / count.clamp_min(1)
        return (cells * weights).sum(dim=1) * (target.shape[0] / n_active)


@dataclass
class CellMasker:
    """``Trainer.transform_batch`` for pretraining: a fresh mask for every training batch.

    The mask is drawn from the trainer's generator, so a seeded fit is reproducible and a
    resumed one continues with the same masks.
    """

    ratio: float
    inputs: TabularInput

    def __call__(self, batch: TensorData, generator: torch.Generator) -> TensorData:
        n_columns = batch.numeric.shape[1] + batch.codes.shape[1]
        mask = draw_mask(len(batch), n_columns, self.ratio, generator)
        numeric, codes, target = mask_cells(batch.numeric, batch.codes, mask, self.inputs)
        return TensorData(numeric, codes, target, batch.weight)


@torch.inference_mode()
def encode_rows(network: nn.Module, data: TensorData, *, batch_size: int = 16384) -> torch.Tensor:
    """Eval-mode ``network.encode`` over all rows in large batches: ``(n, n_d)`` float32."""
    was_training = network.training
    network.eval()
    parts = []
    try:
        for start, stop in batch_bounds(len(data), batch_size):
            chunk = data.take(slice(start, stop))
            out = network.encode(chunk.numeric, chunk.codes)  # type: ignore[operator]
            parts.append(out.float())
    finally:
        network.train(was_training)
    return torch.cat(parts)
