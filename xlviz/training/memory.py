"""How much memory a run's training will need, estimated from its config, and a refusal in
one line before anything is trained when the machine does not have it.

Why: every size setting has a documented range (:mod:`xlviz.limits`), but the ranges multiply:
``{"block_size": 8192}`` alone is within range, yet with the default batch of 128 blocks eager
attention keeps ``batch x heads x block^2`` scores per layer, and step 1 grew to 21.7 GB
resident until the kernel's out-of-memory killer ended it (no error line, ``status.json``
left "running"). Estimating first costs microseconds and names the settings to lower.

The model (one training process, float32 weights and activations, eager attention, AdamW):

- weights, gradients and AdamW's two moments: ``4 x params x 4`` bytes (a BERT of the run's
  size, vocabulary and position count, its MLM head included);
- activations kept for the backward pass, per layer, for the largest micro-batch of any
  stage (masked-LM short blocks, masked-LM long blocks, QA windows):
  ``ACT_PER_TOKEN x tokens x hidden`` + ``FF_PER_TOKEN x tokens x intermediate`` +
  ``ATTN_PER_SCORE x batch x heads x length^2`` floats, plus the vocabulary logits
  (all positions, though the loss reads only the masked ones) and their gradient;
- the process itself: torch, transformers and the data (``BASE_BYTES``).

Calibration (peak RSS from ``/usr/bin/time -v`` of one masked-LM training on the generated
world, 2 steps, float32, one worker; tests/test_faults_budget.py keeps the formula honest
against hand-computed values, not against this machine):

=====================================  ============  ==========
config                                 measured RSS  estimate
=====================================  ============  ==========
tiny, batch 128 x block 24 (default)   0.52 GB       0.79 GB
tiny, batch 64 x block 512             0.98 GB       1.40 GB
small, batch 32 x block 1024           2.6 GB        3.7 GB
=====================================  ============  ==========

So the estimate is conservative by roughly 1.4x (it counts float32 everywhere, logits at
every position and every activation kept); a run refused here would have needed at least
about ``estimate / 1.5`` bytes. bf16 runs need less than estimated; workers running stages at
once each need their own share (counted: ``workers`` processes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from xlviz.errors import XlvizError

FLOAT = 4  # bytes per float32
BASE_BYTES = 600 * 2**20  # the python process with torch and transformers imported, the data, the tokenizers
ACT_PER_TOKEN = 16  # hidden-sized tensors kept per token and layer (q, k, v, context, projections, norms, residuals, grads)
FF_PER_TOKEN = 3  # intermediate-sized tensors per token and layer (the up-projection, GELU's output, its gradient)
ATTN_PER_SCORE = 4  # batch x heads x length^2 tensors per layer (scores, softmax, its gradient, the mask broadcast)
LOGITS_PER_TOKEN = 3  # vocabulary-sized tensors per token (logits, log-softmax, gradient)
HEADROOM = 0.9  # refuse when the estimate exceeds this share of the available memory


@dataclass(frozen=True)
class Batch:
    """One stage kind's largest micro-batch: rows of ``length`` tokens."""

    what: str
    rows: int
    length: int


def bert_params(vocab: int, hidden: int, layers: int, intermediate: int, positions: int) -> int:
    """Parameters of a BERT masked LM (embeddings, layers, the MLM head's transform and bias)."""
    embeddings = (vocab + positions + 2) * hidden + 2 * hidden
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    head = hidden * hidden + 3 * hidden + vocab
    return embeddings + layers * layer + head


def batches_of(cfg) -> list[Batch]:
    """The micro-batches a run's stages train on (``grad_accum`` splits each global batch)."""
    accum = max(1, int(getattr(cfg, "grad_accum", 1) or 1))
    block, mlm = int(cfg.block_size), int(cfg.mlm_batch_size)
    long = max(block, int(cfg.qa_max_length))
    out = [Batch("masked-LM blocks (mlm_batch_size x block_size)", max(1, mlm // accum), block)]
    if float(getattr(cfg, "long_block_share", 0) or 0) > 0 and long > block:
        out.append(Batch("long masked-LM blocks", max(1, round(mlm * block / long) // accum), long))
    out.append(Batch("QA windows (batch_size x qa_max_length)", max(1, int(cfg.batch_size) // accum), int(cfg.qa_max_length)))
    return out


def batch_bytes(b: Batch, hidden: int, layers: int, heads: int, intermediate: int, vocab: int) -> int:
    """Activation bytes one training step of ``b`` keeps for its backward pass."""
    tokens = b.rows * b.length
    per_layer = ACT_PER_TOKEN * tokens * hidden + FF_PER_TOKEN * tokens * intermediate + ATTN_PER_SCORE * b.rows * heads * b.length ** 2
    return FLOAT * (layers * per_layer + LOGITS_PER_TOKEN * tokens * vocab)


def estimate(cfg) -> tuple[int, Batch]:
    """(bytes one training process needs at its peak, the batch that sets it) for a transfer
    config (the run's model size, vocabulary, block and batch sizes)."""
    from xlviz.models.monotrans import MODEL_SIZES

    layers, hidden, heads, intermediate = MODEL_SIZES[cfg.model_size]
    vocab = max(int(cfg.vocab_size), int(getattr(cfg, "joint_vocab_size", 0) or 0))
    positions = max(int(cfg.block_size), int(cfg.qa_max_length), int(getattr(cfg, "eval_max_length", 0) or 0))
    state = 4 * FLOAT * bert_params(vocab, hidden, layers, intermediate, positions)
    worst = max(batches_of(cfg), key=lambda b: batch_bytes(b, hidden, layers, heads, intermediate, vocab))
    return BASE_BYTES + state + batch_bytes(worst, hidden, layers, heads, intermediate, vocab), worst


def available_bytes() -> int | None:
    """Memory the system can give without swapping: ``MemAvailable`` of /proc/meminfo (Linux),
    else psutil's ``available`` if psutil is installed, else None (unknown: nothing refused)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB"


def check_memory(cfg, *, available: int | None = None, processes: int | None = None, path: str | os.PathLike | None = None) -> int:
    """Refuse (one :class:`XlvizError` naming the largest batch's settings) a config whose
    estimated peak (:func:`estimate`, times ``processes`` training at once: the run's
    ``workers``) exceeds :data:`HEADROOM` of ``available`` bytes (default: what the machine has
    now, :func:`available_bytes`; unknown: not checked). Returns the estimate."""
    need, worst = estimate(cfg)
    if processes is None:
        workers = int(getattr(cfg, "workers", 1) or 0)
        processes = workers if workers > 0 else min(4, os.cpu_count() or 1)
    total = need * max(1, processes)
    if available is None:
        available = available_bytes()
    if available is not None and total > HEADROOM * available:
        field = "block_size" if "block" in worst.what else "batch_size"
        who = f"{processes} workers x {_gb(need)}" if processes > 1 else _gb(need)
        raise XlvizError(
            f"this run would need about {who} of memory ({worst.rows} x {worst.length}-token {worst.what}, "
            f"{cfg.model_size} model) but the machine has {_gb(available)} available; lower block_size, "
            f"mlm_batch_size/batch_size or workers, or raise grad_accum",
            path=path, field=field,
        )
    return total
