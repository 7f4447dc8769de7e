"""Eval-mode forward passes over all rows of a :class:`~tabsparse.training.TensorData`."""

from __future__ import annotations

import torch
from torch import nn

from tabsparse.nn.network import NetworkOutput
from tabsparse.training.batches import TensorData, batch_bounds
from tabsparse.training.threads import inference_threads, intra_op_threads

__all__ = ["predict_outputs"]


@torch.inference_mode()
def predict_outputs(
    network: nn.Module, data: TensorData, *, batch_size: int = 16384, with_masks: bool = False
) -> NetworkOutput:
    """Eval-mode outputs for all rows in batches of ``batch_size``; masks and per-step
    importances only when asked for. The network's training mode is restored afterwards."""
    was_training = network.training
    network.eval()
    logits, masks, importance = [], [], []
    threads = torch.get_num_threads()
    if data.device.type == "cpu":
        threads = inference_threads(min(batch_size, max(1, len(data))), network)
    try:
        with intra_op_threads(threads):
            for start, stop in batch_bounds(len(data), batch_size) or [(0, 0)]:
                chunk = data.take(slice(start, stop))
                out = network(chunk.numeric, chunk.codes, with_masks=with_masks)
                logits.append(out.logits.float())
                if with_masks:
                    masks.append(out.masks.float())
                    importance.append(out.step_importance.float())
    finally:
        network.train(was_training)

    def joined(parts: list[torch.Tensor], dim: int) -> torch.Tensor:
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)  # one batch: no copy

    return NetworkOutput(
        logits=joined(logits, 0),
        masks=joined(masks, 1) if with_masks else torch.empty(0),
        sparsity_loss=torch.zeros(()),
        step_importance=joined(importance, 1) if with_masks else torch.empty(0),
    )
