"""Process-count-invariant batches for staged runs on real data (real corpora, QA fine-tuning
of any encoder); the staged run itself is :class:`xlviz.training.staged.StagedRun`.

Scale-out contract (``accelerate launch --multi_gpu --num_processes N -m xlviz ...``, on GPUs or
on CPU processes with gloo): ``batch_size`` in a config is the *global* batch per optimizer
step. Every process reads the same shuffled stream, takes its own slice of each global batch
(``batch_size / (processes x grad_accum)`` rows per forward pass), masks with a generator
seeded by the step (not by the process), and scales its loss by the global number of targets,
so N processes compute the same updates as one process up to floating-point rounding. Only
the main process writes files; losses and evaluation predictions are gathered.
"""

from __future__ import annotations

from xlviz.training.qa import feature_batches, trim_right_padding  # noqa: F401 (re-exported)
from xlviz.training.streamed import mask_for_mlm, masked_lm_batches  # noqa: F401 (re-exported)
from xlviz.training.staged import ConfigMixin, StagedRun, check_positive, make_global_batch_accelerator  # noqa: F401 (re-exported)


__all__ = ["ConfigMixin", "StagedRun", "make_global_batch_accelerator", "check_positive", "masked_lm_batches", "mask_for_mlm", "feature_batches"]
