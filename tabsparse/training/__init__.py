"""Training: the loop, its callbacks, batches, checkpoints and thread settings (pure torch).

=====================  ==========================================================
:mod:`.loop`           :class:`Trainer`, :class:`TrainConfig`: the epochs
:mod:`.callbacks`      the training events; early stopping, schedule, averaging,
                       the compile trial, logging and checkpointing as callbacks
:mod:`.batches`        :class:`TensorData`, :class:`BatchSource`, batch sizes
:mod:`.checkpoints`    writing / reading checkpoints, weight snapshots
:mod:`.predict`        eval-mode forward passes over all rows
:mod:`.threads`        intra-op thread counts for training and inference
:mod:`.shapley`        Shapley values of a network's outputs over column groups
:mod:`.selection`      the learned per-row column selector
:mod:`.places`         where a table's column is in a network's inputs
=====================  ==========================================================
"""

from tabsparse.training.batches import (
    AUTO_BATCH_MAX,
    AUTO_BATCH_MIN,
    AUTO_STEPS_PER_EPOCH,
    BatchSource,
    TensorData,
    auto_batch_size,
    batch_bounds,
    batch_multiple,
    inference_batch_size,
    iter_batches,
)
from tabsparse.training.callbacks import (
    Callback,
    Checkpointing,
    ColumnRevival,
    CompileTrial,
    EarlyStopping,
    EpochLog,
    LRSchedule,
    WeightAveraging,
)
from tabsparse.training.checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    CHECKPOINT_PREFIX,
    data_fingerprint,
    load_checkpoint,
    save_checkpoint,
    snapshot,
)
from tabsparse.training.loop import (
    LR_SCHEDULES,
    LossFn,
    ScoreFn,
    TrainConfig,
    Trainer,
    TrainingError,
    default_callbacks,
)
from tabsparse.training.predict import predict_outputs
from tabsparse.training.threads import (
    INFERENCE_GRAIN,
    THREAD_GRAIN,
    inference_threads,
    intra_op_threads,
    training_threads,
)

__all__ = [
    "AUTO_BATCH_MAX",
    "AUTO_BATCH_MIN",
    "AUTO_STEPS_PER_EPOCH",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "CHECKPOINT_PREFIX",
    "INFERENCE_GRAIN",
    "LR_SCHEDULES",
    "THREAD_GRAIN",
    "BatchSource",
    "Callback",
    "Checkpointing",
    "ColumnRevival",
    "CompileTrial",
    "EarlyStopping",
    "EpochLog",
    "LRSchedule",
    "LossFn",
    "ScoreFn",
    "TensorData",
    "TrainConfig",
    "Trainer",
    "TrainingError",
    "WeightAveraging",
    "auto_batch_size",
    "batch_bounds",
    "batch_multiple",
    "data_fingerprint",
    "default_callbacks",
    "inference_batch_size",
    "inference_threads",
    "intra_op_threads",
    "iter_batches",
    "load_checkpoint",
    "predict_outputs",
    "save_checkpoint",
    "snapshot",
    "training_threads",
]
