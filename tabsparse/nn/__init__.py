"""TabNet building blocks (pure PyTorch): ghost batch norm, GLU blocks, attention, encoder."""

from tabsparse.nn.encoder import EncoderOutput, TabNetEncoder
from tabsparse.nn.ghost_bn import GhostBatchNorm
from tabsparse.nn.inputs import TabularInput
from tabsparse.nn.network import NetworkOutput, TabNet, column_groups
from tabsparse.nn.transformers import (
    AttentiveTransformer,
    FeatureTransformer,
    GLUBlock,
    GLULayer,
)

__all__ = [
    "AttentiveTransformer",
    "EncoderOutput",
    "FeatureTransformer",
    "GLUBlock",
    "GLULayer",
    "GhostBatchNorm",
    "NetworkOutput",
    "TabNet",
    "TabNetEncoder",
    "TabularInput",
    "column_groups",
]
