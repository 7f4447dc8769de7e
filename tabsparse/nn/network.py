"""The whole TabNet network: inputs -> encoder -> linear head, plus column-level explanations.

Pure torch; the sklearn estimators build one of these from a fitted
:class:`tabsparse.data.TableEncoder`, but it can be used inside any PyTorch program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.nn.encoder import TabNetEncoder
from tabsparse.nn.inputs import TabularInput


class NetworkOutput(NamedTuple):
    """``logits (n, n_outputs)``, ``masks (n_steps, n, n_groups)``, scalar ``sparsity_loss``,
    ``step_importance (n_steps, n)``: each step's weight in the importances, the size of its
    effect on the logits through the head (:func:`~tabsparse.nn.functional.step_effects`; with
    ``with_masks=False`` empty).

    A network of ``k > 1`` members (:class:`TabNet` ``n_members``) returns the mean of its
    members' logits, their masks and step importances one member after the other (``k *
    n_steps`` along the first dimension: member ``m``'s step ``b`` at ``m * n_steps + b``), the
    mean of their sparsity losses, and ``member_logits (k, n, n_outputs)``, on which each member
    is trained with its own loss. ``member_logits`` is None for one member."""

    logits: torch.Tensor
    masks: torch.Tensor
    sparsity_loss: torch.Tensor
    step_importance: torch.Tensor
    member_logits: torch.Tensor | None = None


def column_groups(n_features: int, grouped_features: Sequence[Sequence[int]] | None) -> list[int]:
    """Group id of every original column: listed groups first, then one group per other column.

    Raises ``ValueError`` for out-of-range, repeated or overlapping column indices.
    """
    group_of = [-1] * n_features
    n_groups = 0
    for group in grouped_features or ():
        members = list(group)
        if not members:
            raise ValueError("grouped_features contains an empty group")
        for col in members:
            if not 0 <= col < n_features:
                raise ValueError(
                    f"grouped_features refers to column {col}, expected 0 <= index < {n_features}"
                )
            if group_of[col] != -1:
                raise ValueError(f"grouped_features: column {col} appears in more than one group")
            group_of[col] = n_groups
        n_groups += 1
    for col in range(n_features):
        if group_of[col] == -1:
            group_of[col] = n_groups
            n_groups += 1
    return group_of


class TabNetBody(nn.Module):
    """Inputs (standardisation, missing values, embeddings) and the encoder, with the column
    masks and importances that explain it: what :class:`TabNet` (plus a head) and the
    pretraining network (plus a decoder) share, laid out alike so weights copy across.

    Parameters are those of :class:`TabNet` without ``n_outputs``.
    """

    column_group: torch.Tensor
    column_weight: torch.Tensor

    def __init__(
        self,
        *,
        numeric_columns: Sequence[int],
        categorical_columns: Sequence[int],
        numeric_mean: Sequence[float],
        numeric_std: Sequence[float],
        cardinalities: Sequence[int],
        cat_emb_dim: int = 1,
        grouped_features: Sequence[Sequence[int]] | None = None,
        numeric_embedding: str | None = None,
        numeric_embedding_dim: int = 8,
        **encoder_kwargs: object,
    ) -> None:
        super().__init__()
        n_features = len(numeric_columns) + len(categorical_columns)
        if sorted([*numeric_columns, *categorical_columns]) != list(range(n_features)):
            raise ValueError("numeric_columns and categorical_columns must partition the columns")
        self.n_features = n_features
        self.inputs = TabularInput(
            numeric_mean=numeric_mean,
            numeric_std=numeric_std,
            cardinalities=cardinalities,
            cat_emb_dim=cat_emb_dim,
            numeric_embedding=numeric_embedding,
            numeric_embedding_dim=numeric_embedding_dim,
        )
        group_of = column_groups(n_features, grouped_features)
        # a column's channels belong to its group: attention selects them as one unit
        channel_columns = []
        for col in numeric_columns:
            channel_columns.extend([col] * self.inputs.numeric_channels)
        for col in categorical_columns:
            channel_columns.extend([col] * cat_emb_dim)
        self.encoder = TabNetEncoder(
            input_dim=self.inputs.output_dim,
            group_index=[group_of[c] for c in channel_columns],
            **encoder_kwargs,  # type: ignore[arg-type]
        )
        # group sizes counted in Python, so the network also builds on the meta device
        # (model files check a file's tensors against a meta-device build)
        sizes = [0] * (max(group_of) + 1)
        for g in group_of:
            sizes[g] += 1
        self.register_buffer("column_group", torch.as_tensor(group_of, dtype=torch.int64))
        self.register_buffer(
            "column_weight", 1.0 / torch.tensor([sizes[g] for g in group_of], dtype=torch.float32)
        )
        self.identity_groups = group_of == list(range(n_features))

    @property
    def n_members(self) -> int:
        """How many members the network averages (1 but for :class:`TabNet` ``n_members``)."""
        return int(getattr(self, "_n_members", 1))

    def column_masks(self, masks: torch.Tensor) -> torch.Tensor:
        """Per-step column masks ``(n_steps, n, n_features)`` of the network's output masks
        ``(n_members * n_steps, n, n_groups)``: the members' masks of each step averaged, each
        group's mass shared equally among its columns (rows still sum to one)."""
        k = self.n_members
        if k > 1:
            masks = masks.reshape(k, masks.shape[0] // k, *masks.shape[1:]).mean(dim=0)
        return self._spread(masks)

    def _spread(self, masks: torch.Tensor) -> torch.Tensor:
        """Spread group masks ``(..., n_groups)`` over original columns ``(..., n_features)``."""
        if getattr(self, "identity_groups", False):  # one group per column, in order
            return masks
        # a (n_groups, n_features) spreading matrix: far faster than a gather on the last dim
        spread = torch.zeros(
            masks.shape[-1], self.n_features, dtype=masks.dtype, device=masks.device
        )
        cols = torch.arange(self.n_features, device=masks.device)
        spread[self.column_group, cols] = self.column_weight.to(masks.dtype)
        return masks @ spread

    def importances(self, masks: torch.Tensor, step_importance: torch.Tensor) -> torch.Tensor:
        """Per-row importances ``(n, n_features)`` (the paper's aggregate mask), rows sum to one:
        the mean over members of :meth:`member_importances`."""
        per_member = self.member_importances(masks, step_importance)
        return per_member[0] if per_member.shape[0] == 1 else per_member.mean(dim=0)

    def member_importances(
        self, masks: torch.Tensor, step_importance: torch.Tensor
    ) -> torch.Tensor:
        """Each member's per-row importances ``(n_members, n, n_features)``, rows sum to one.

        ``sum_b eta_b M_b`` over the member's steps, normalised per row, with ``eta_b`` the
        ``step_importance`` of :meth:`forward` (:class:`TabNet`: the size of step ``b``'s
        effect on the outputs); a row whose steps all weigh zero falls back to the plain mean
        of its masks. (Computed over groups, then spread over columns: spreading is linear and
        keeps row sums.)
        """
        k = self.n_members
        if k == 1:  # a view: no copy of the importances
            return self._spread(F.importances(masks, step_importance)).unsqueeze(0)
        steps = masks.shape[0] // k
        agg = [
            F.importances(
                masks[m * steps : (m + 1) * steps], step_importance[m * steps : (m + 1) * steps]
            )
            for m in range(k)
        ]
        return self._spread(torch.stack(agg))


class TabNet(TabNetBody):
    """TabNet for tables of numeric and categorical columns.

    Parameters
    ----------
    numeric_columns, categorical_columns : sequence of int
        Positions, in the original table, of the numeric and categorical columns (together a
        permutation of ``range(n_features)``).
    numeric_mean, numeric_std : sequence of float
        Standardisation statistics of the numeric columns.
    cardinalities : sequence of int
        Embedding slots per categorical column (categories + 2).
    n_outputs : int
        Width of the linear head (classes, or regression targets).
    cat_emb_dim : int
    grouped_features : sequence of sequences of int, optional
        Groups of original columns that attention selects together.
    numeric_embedding : {None, "periodic"}
        None: one channel per numeric column (its standardised value). ``"periodic"``:
        ``numeric_embedding_dim`` channels per numeric column
        (:class:`~tabsparse.nn.numeric_embedding.PeriodicEmbedding`), selected as one unit.
    numeric_embedding_dim : int
        Channels per numeric column with a numeric embedding (>= 2).
    output_groups : sequence of sequences of int, optional
        Groups of outputs whose common shift changes no prediction (the logits of one softmax
        or sparsemax; disjoint). The importances weight each step's mask by the size of the
        step's effect on the outputs through the head (:func:`~tabsparse.nn.functional.
        step_effects`), centred within these groups. None: every output counts as it is.
    n_members : int
        Members of the ensemble inside the network (>= 1), in the manner of TabM's "mini"
        ensembles (Gorishniy et al., 2025): every member runs the same encoder on the inputs
        multiplied by its own trainable per-channel scale (:attr:`member_scale`, initialised to
        random signs) and has its own linear head. The members' rows run as one batch of
        ``n_members * n`` rows, so a training step costs far less than ``n_members`` networks.
        The network predicts the mean of the members' logits, and a training step trains each
        member on its own loss (:attr:`NetworkOutput.member_logits`).
    **encoder_kwargs
        Passed to :class:`TabNetEncoder` (``n_d``, ``n_a``, ``n_steps``, ``gamma``, ...).

    Examples
    --------
    >>> net = TabNet(numeric_columns=[0, 2], categorical_columns=[1], numeric_mean=[0, 0],
    ...              numeric_std=[1, 1], cardinalities=[4], n_outputs=3, n_steps=2)
    >>> out = net(torch.randn(8, 2), torch.randint(0, 4, (8, 1)))
    >>> out.logits.shape, net.column_masks(out.masks).shape
    (torch.Size([8, 3]), torch.Size([2, 8, 3]))
    """

    output_centre: torch.Tensor | None

    def __init__(
        self,
        *,
        numeric_columns: Sequence[int],
        categorical_columns: Sequence[int],
        numeric_mean: Sequence[float],
        numeric_std: Sequence[float],
        cardinalities: Sequence[int],
        n_outputs: int,
        cat_emb_dim: int = 1,
        grouped_features: Sequence[Sequence[int]] | None = None,
        numeric_embedding: str | None = None,
        numeric_embedding_dim: int = 8,
        output_groups: Sequence[Sequence[int]] | None = None,
        n_members: int = 1,
        **encoder_kwargs: object,
    ) -> None:
        if n_outputs < 1:
            raise ValueError(f"{n_outputs=} must be >= 1")
        groups = [[int(o) for o in group] for group in output_groups or ()]
        flat = [o for group in groups for o in group]
        if any(not group for group in groups) or len(set(flat)) != len(flat):
            raise ValueError(f"output_groups must be disjoint non-empty groups, got {groups}")
        if any(not 0 <= o < n_outputs for o in flat):
            raise ValueError(f"output_groups {groups} name an output outside 0 .. {n_outputs - 1}")
        if n_members < 1:
            raise ValueError(f"{n_members=} must be >= 1")
        super().__init__(
            numeric_columns=numeric_columns,
            categorical_columns=categorical_columns,
            numeric_mean=numeric_mean,
            numeric_std=numeric_std,
            cardinalities=cardinalities,
            cat_emb_dim=cat_emb_dim,
            grouped_features=grouped_features,
            numeric_embedding=numeric_embedding,
            numeric_embedding_dim=numeric_embedding_dim,
            **encoder_kwargs,
        )
        self.n_outputs = n_outputs
        self.output_groups = groups
        # not in the state dict: model files rebuild it from the target
        self.register_buffer("output_centre", F.centring(groups, n_outputs), persistent=False)
        self._n_members = n_members
        self.head = nn.Linear(self.encoder.n_d, n_members * n_outputs)
        if n_members > 1:
            signs = torch.randint(0, 2, (n_members, 1, self.inputs.output_dim)) * 2.0 - 1.0
            self.member_scale = nn.Parameter(signs)

    def forward(
        self, numeric: torch.Tensor, codes: torch.Tensor, *, with_masks: bool = True
    ) -> NetworkOutput:
        """``with_masks=False``: in eval mode, skip stacking the masks and step importances
        (``masks`` and ``step_importance`` are then empty); prediction needs neither."""
        return self.from_inputs(self.inputs(numeric, codes), with_masks=with_masks)

    def from_inputs(self, x: torch.Tensor, *, with_masks: bool = True) -> NetworkOutput:
        """:meth:`forward` from the inputs' channels ``x = self.inputs(numeric, codes)``
        ``(n, input_dim)``: where a caller works on the channels themselves (the learned column
        selector of :mod:`tabsparse.training.selection` mixes them with drawn ones)."""
        k = self.n_members
        # networks pickled before output_groups existed weight steps by the paper's eta
        effects = with_masks and hasattr(self, "output_groups")
        if k == 1:
            enc = self.encoder(x, with_masks=with_masks, keep_decisions=effects)
            step_importance = self._step_effects(enc.decisions) if effects else enc.step_importance
            return NetworkOutput(
                self.head(enc.output), enc.masks, enc.sparsity_loss, step_importance
            )
        n = x.shape[0]
        enc = self.encoder(
            (x.unsqueeze(0) * self.member_scale).reshape(k * n, -1),
            with_masks=with_masks,
            keep_decisions=effects,
        )
        # member m's rows m * n ... (m + 1) * n - 1 through member m's block of the head
        weight = self.head.weight.view(k, self.n_outputs, -1).transpose(1, 2)
        bias = self.head.bias.view(k, 1, self.n_outputs)
        member_logits = torch.baddbmm(bias, enc.output.view(k, n, -1), weight)
        masks = enc.masks
        step_importance = self._step_effects(enc.decisions) if effects else enc.step_importance
        if with_masks:  # (n_steps, k * n, ...) -> (k * n_steps, n, ...), member by member
            steps = masks.shape[0]
            masks = masks.view(steps, k, n, -1).transpose(0, 1).reshape(k * steps, n, -1)
            step_importance = (
                step_importance.view(steps, k, n).transpose(0, 1).reshape(k * steps, n)
            )
        return NetworkOutput(
            member_logits.mean(dim=0), masks, enc.sparsity_loss, step_importance, member_logits
        )

    def _step_effects(self, decisions: torch.Tensor | None) -> torch.Tensor:
        """Each step's weight in the importances ``(n_steps, k * n)``: the size of its effect
        on the outputs through each member's block of the head (:func:`F.step_effects`)."""
        assert decisions is not None
        steps, rows, n_d = decisions.shape
        k = self.n_members
        weight = self.head.weight.view(k, self.n_outputs, n_d)
        centre = self.output_centre
        effects = F.step_effects(
            decisions.view(steps, k, rows // k, n_d),
            weight.to(decisions.dtype),
            None if centre is None else centre.to(decisions.dtype),
        )
        return effects.reshape(steps, rows)
