"""The TabNet decoder (Arik & Pfister, section 3) and the network used for self-supervised
pretraining: inputs -> encoder -> decoder.

The decoder reads the encoder's per-step decision outputs ``d_1 .. d_N`` (each ``(n, n_d)``,
ReLU'd). Step ``i`` passes ``d_i`` through its own feature transformer (GLU layers; the first
``n_shared`` Linear weights are shared by all steps, as in the encoder) and then through a
linear layer to the reconstruction width; the steps' results are summed. The per-step linear
layers are stored as one ``Linear(n_steps * n_d, output_dim)`` over the concatenated transformer
outputs: ``sum_i W_i f_i(d_i) + b = [W_1 .. W_N] [f_1(d_1); ..; f_N(d_N)] + b``, one matrix
multiply instead of N.

Pure torch; :class:`tabsparse.TabNetPretrainer` builds a :class:`PretrainingNetwork` from a
fitted :class:`tabsparse.data.TableEncoder`, but both modules can be used in any PyTorch program.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tabsparse.nn.network import NetworkOutput, TabNetBody
from tabsparse.nn.transformers import FeatureTransformer, make_linears


class TabNetDecoder(nn.Module):
    """``decisions (n_steps, n, n_d) -> reconstruction (n, output_dim)``.

    Parameters
    ----------
    n_d : int
        Width of the encoder's decision outputs.
    n_steps : int
        Decision steps of the encoder (one feature transformer per step).
    output_dim : int
        Width of the reconstruction.
    n_shared, n_independent : int
        Shared and step-specific GLU layers per feature transformer (together >= 1).
    virtual_batch_size : int
    momentum : float
        Batch-norm momentum (PyTorch convention).

    Examples
    --------
    >>> dec = TabNetDecoder(n_d=4, n_steps=3, output_dim=7)
    >>> dec(torch.rand(3, 16, 4)).shape
    torch.Size([16, 7])
    """

    def __init__(
        self,
        *,
        n_d: int,
        n_steps: int,
        output_dim: int,
        n_shared: int = 1,
        n_independent: int = 1,
        virtual_batch_size: int = 128,
        momentum: float = 0.02,
    ) -> None:
        super().__init__()
        for name, value, low in (
            ("n_d", n_d, 1),
            ("n_steps", n_steps, 1),
            ("output_dim", output_dim, 1),
            ("n_shared", n_shared, 0),
            ("n_independent", n_independent, 0),
        ):
            if value < low:
                raise ValueError(f"{name}={value!r} must be >= {low}")
        if n_shared + n_independent < 1:
            raise ValueError(f"{n_shared=} + {n_independent=} must be >= 1")
        self.n_d = n_d
        self.n_steps = n_steps
        self.output_dim = output_dim
        shared = make_linears(n_d, n_d, n_shared)
        self.shared = nn.ModuleList(shared)
        self.steps = nn.ModuleList(
            FeatureTransformer(
                shared=shared,
                n_in=n_d,
                n_out=n_d,
                n_independent=n_independent,
                virtual_batch_size=virtual_batch_size,
                momentum=momentum,
            )
            for _ in range(n_steps)
        )
        self.reconstruction = nn.Linear(n_steps * n_d, output_dim)

    def forward(self, decisions: torch.Tensor) -> torch.Tensor:
        if decisions.shape[0] != self.n_steps or decisions.shape[-1] != self.n_d:
            raise ValueError(
                f"decisions must have shape (n_steps={self.n_steps}, n, n_d={self.n_d}), "
                f"got {tuple(decisions.shape)}"
            )
        parts = [step(d) for step, d in zip(self.steps, decisions, strict=True)]
        return self.reconstruction(torch.cat(parts, dim=1))


class PretrainingNetwork(TabNetBody):
    """TabNet inputs and encoder with a decoder instead of a head, for masked-cell reconstruction.

    ``(numeric (n, n_num), codes (n, n_cat)) -> NetworkOutput`` whose ``logits`` is the
    reconstruction ``(n, n_num + sum(vocab_sizes))``: one value per numeric column (its
    standardised value), then for each categorical column one logit per vocabulary entry.
    ``inputs``, ``encoder``, ``column_group`` and ``column_weight`` are laid out exactly as in
    :class:`tabsparse.nn.TabNet` built with the same arguments, so their weights can be copied
    into one for fine-tuning.

    Parameters
    ----------
    numeric_columns, categorical_columns, numeric_mean, numeric_std, cardinalities, \
cat_emb_dim, grouped_features
        As for :class:`tabsparse.nn.TabNet`.
    n_shared_decoder, n_indep_decoder : int
        Shared and step-specific GLU layers of the decoder's feature transformers.
    **encoder_kwargs
        Passed to :class:`TabNetEncoder` (``n_d``, ``n_a``, ``n_steps``, ``gamma``, ...).

    Examples
    --------
    >>> net = PretrainingNetwork(numeric_columns=[0, 2], categorical_columns=[1],
    ...                          numeric_mean=[0, 0], numeric_std=[1, 1], cardinalities=[5],
    ...                          n_d=4, n_a=4, n_steps=2)
    >>> out = net(torch.randn(8, 2), torch.randint(0, 5, (8, 1)))
    >>> out.logits.shape, net.encode(torch.randn(8, 2), torch.randint(0, 5, (8, 1))).shape
    (torch.Size([8, 5]), torch.Size([8, 4]))
    """

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
        n_shared_decoder: int = 1,
        n_indep_decoder: int = 1,
        **encoder_kwargs: object,
    ) -> None:
        super().__init__(
            numeric_columns=numeric_columns,
            categorical_columns=categorical_columns,
            numeric_mean=numeric_mean,
            numeric_std=numeric_std,
            cardinalities=cardinalities,
            cat_emb_dim=cat_emb_dim,
            grouped_features=grouped_features,
            **encoder_kwargs,  # type: ignore[arg-type]
        )
        self.n_numeric = len(numeric_columns)
        self.vocab_sizes = [int(c) - 2 for c in cardinalities]  # without missing / unseen slots
        output_dim = self.n_numeric + sum(self.vocab_sizes)
        if output_dim < 1:
            raise ValueError(
                "nothing to reconstruct: every column is categorical with an empty vocabulary"
            )
        self.decoder = TabNetDecoder(
            n_d=self.encoder.n_d,
            n_steps=self.encoder.n_steps,
            output_dim=output_dim,
            n_shared=n_shared_decoder,
            n_independent=n_indep_decoder,
            virtual_batch_size=int(encoder_kwargs.get("virtual_batch_size", 128)),  # type: ignore[call-overload]
            momentum=float(encoder_kwargs.get("momentum", 0.02)),  # type: ignore[arg-type]
        )

    def forward(
        self, numeric: torch.Tensor, codes: torch.Tensor, *, with_masks: bool = True
    ) -> NetworkOutput:
        """Reconstruction; ``with_masks`` as in :meth:`TabNet.forward` (the decoder reads every
        step's decision, so only the masks can be skipped)."""
        x = self.inputs(numeric, codes)
        enc = self.encoder(x, keep_decisions=True, with_masks=with_masks)
        assert enc.decisions is not None
        return NetworkOutput(
            self.decoder(enc.decisions), enc.masks, enc.sparsity_loss, enc.step_importance
        )

    def encode(self, numeric: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """The encoder's representation ``(n, n_d)``: the sum over steps of the ReLU'd decision
        outputs (what :class:`tabsparse.nn.TabNet` feeds its head)."""
        return self.encoder(self.inputs(numeric, codes)).output
