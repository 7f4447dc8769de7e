"""TabNet building blocks (pure PyTorch): ghost batch norm, GLU blocks, attention, encoder.

Its modules:

=========================  ==============================================================
:mod:`.functional`         TabNet's forward math, once, as functions of tensors
:mod:`.ghost_bn`           ghost batch normalisation: parameters and running statistics
:mod:`.glu`                the gated linear unit
:mod:`.transformers`       feature and attentive transformers (the per-step blocks)
:mod:`.inputs`             encoded tables to the dense feature vector (embeddings)
:mod:`.numeric_embedding`  numeric embeddings: each numeric column as channels
:mod:`.encoder`            the TabNet encoder over feature groups
:mod:`.encoder_step`       the encoder's training step as one node, hand-written backward
:mod:`.shared_mask`        reviving and pruning the columns of a shared first mask
:mod:`.network`            the whole network: inputs, encoder, head, column explanations
:mod:`.decoder`            the decoder and the self-supervised pretraining network
=========================  ==============================================================
"""

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
