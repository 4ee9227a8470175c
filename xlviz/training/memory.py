"""How much memory a run's training will need, estimated from its config, and a refusal in
one line before anything is trained when the machine does not have it.

Why: every size setting has a documented range (:mod:`xlviz.limits`), but the ranges multiply:
``{"block_size": 8192}`` alone is within range, yet the default batch of 128 blocks is a
million tokens a step, whose activations and vocabulary logits outgrow any workstation (with
eager attention, ``batch x heads x block^2`` scores per layer on top): step 1 grew to 21.7 GB
resident until the kernel's out-of-memory killer ended it (no error line, ``status.json``
left "running"). Estimating first costs microseconds and names the settings to lower.

The model (one training process, float32 weights and activations, AdamW):

- weights, gradients and AdamW's two moments: ``4 x params x 4`` bytes (a BERT of the run's
  size, vocabulary and position count, its MLM head included);
- activations kept for the backward pass, per layer, for the largest micro-batch of any
  stage (masked-LM short blocks, masked-LM long blocks, QA windows):
  ``ACT_PER_TOKEN x tokens x hidden + FF_PER_TOKEN x tokens x intermediate`` floats, plus,
  where attention is eager (bf16 on a CPU: :class:`xlviz.training.loop.Bf16Weights`),
  ``ATTN_PER_SCORE x rows x heads x length^2`` (float32 and GPU runs use SDPA kernels, which
  keep no score matrix), plus the vocabulary logits at every position (the loss reads only
  the masked ones) and their gradient;
- the process itself: torch, transformers, the data and tokenizers (``BASE_BYTES``).

Calibration: peak RSS (``/usr/bin/time -v``, maximum resident set size) of ``xlviz transfer
--methods monotrans --pretrain-steps 2 --workers 1 --mixed-precision no --stop-after
s1_pretrain`` on the generated world, against :func:`estimate` (GiB):

=====================================  ============  ==========
config                                 measured RSS  estimate
=====================================  ============  ==========
tiny, batch 128 x block 24 (default)   0.49          0.64
tiny, batch 64 x block 512             0.75          1.17
small, batch 32 x block 512            1.03          1.55
=====================================  ============  ==========

So the estimate is conservative: 1.3-1.6x the measured peak in total, 2-3x on the part above
the process's base (it counts every activation as kept and logits at every position). A run
refused here would have needed at least about ``estimate / 1.6``. The eager-attention term
could not be measured on a CPU without native bf16 and is an upper bound from the tensor
shapes. bf16 runs keep activations in half the bytes counted here; workers running stages
at once each need their own share (counted: ``workers`` processes).
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
# Runs estimated below this are never refused: the process with a tiny model (what tests and
# the demo run) needs about this much anyway, and a momentary dip in available memory on a
# busy machine must not stop them; the check is for configs that would take gigabytes.
FLOOR_BYTES = 2 * 2**30


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


def batch_bytes(b: Batch, hidden: int, layers: int, heads: int, intermediate: int, vocab: int, *, eager: bool = True) -> int:
    """Activation bytes one training step of ``b`` keeps for its backward pass (``eager``:
    attention materialises its ``rows x heads x length^2`` scores; SDPA's kernels do not)."""
    tokens = b.rows * b.length
    per_layer = ACT_PER_TOKEN * tokens * hidden + FF_PER_TOKEN * tokens * intermediate
    if eager:
        per_layer += ATTN_PER_SCORE * b.rows * heads * b.length ** 2
    return FLOAT * (layers * per_layer + LOGITS_PER_TOKEN * tokens * vocab)


def eager_attention(cfg) -> bool:
    """Whether the run trains with eager attention: bf16 on a CPU (:class:`xlviz.training.loop.Bf16Weights`
    switches models to it); float32 and GPU runs use PyTorch's SDPA kernels."""
    from xlviz.training.loop import resolve_mixed_precision

    import torch

    return resolve_mixed_precision(cfg.mixed_precision) == "bf16" and not torch.cuda.is_available()


def estimate(cfg, *, eager: bool | None = None) -> tuple[int, Batch]:
    """(bytes one training process needs at its peak, the batch that sets it) for a transfer
    config (the run's model size, vocabulary, block and batch sizes); ``eager``: whether
    attention is eager (default: as the run will train, :func:`eager_attention`)."""
    from xlviz.models.monotrans import MODEL_SIZES

    if eager is None:
        eager = eager_attention(cfg)

    layers, hidden, heads, intermediate = MODEL_SIZES[cfg.model_size]
    vocab = max(int(cfg.vocab_size), int(getattr(cfg, "joint_vocab_size", 0) or 0))
    positions = max(int(cfg.block_size), int(cfg.qa_max_length), int(getattr(cfg, "eval_max_length", 0) or 0))
    state = 4 * FLOAT * bert_params(vocab, hidden, layers, intermediate, positions)
    worst = max(batches_of(cfg), key=lambda b: batch_bytes(b, hidden, layers, heads, intermediate, vocab, eager=eager))
    return BASE_BYTES + state + batch_bytes(worst, hidden, layers, heads, intermediate, vocab, eager=eager), worst


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


def check_memory(cfg, *, available: int | None = None, processes: int | None = None, eager: bool | None = None,
                 path: str | os.PathLike | None = None) -> int:
    """Refuse (one :class:`XlvizError` naming the largest batch's settings) a config whose
    estimated peak (:func:`estimate`, times ``processes`` training at once: the run's
    ``workers``) exceeds :data:`HEADROOM` of ``available`` bytes (default: what the machine has
    now, :func:`available_bytes`; unknown: not checked); an estimate below :data:`FLOOR_BYTES`
    is never refused. Returns the estimate."""
    need, worst = estimate(cfg, eager=eager)
    if processes is None:
        workers = int(getattr(cfg, "workers", 1) or 0)
        processes = workers if workers > 0 else min(4, os.cpu_count() or 1)
    total = need * max(1, processes)
    if available is None:
        available = available_bytes()
    if available is not None and total > max(FLOOR_BYTES, HEADROOM * available):
        field = "block_size" if "block" in worst.what else "batch_size"
        who = f"{processes} workers x {_gb(need)}" if processes > 1 else _gb(need)
        raise XlvizError(
            f"this run would need about {who} of memory ({worst.rows} x {worst.length}-token {worst.what}, "
            f"{cfg.model_size} model) but the machine has {_gb(available)} available; lower block_size, "
            f"mlm_batch_size/batch_size or workers, or raise grad_accum",
            path=path, field=field,
        )
    return total
