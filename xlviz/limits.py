"""The documented range of every size setting, and a type check that follows each setting's
default, for any run config (transfer, transfer-corpus, finetune-qa, the world).

Why: a typo must stop a run at once with one line naming the field, not hours later or as a
traceback: ``"batch_size": "32"``, ``corpus_documents: true`` (``True`` is an ``int`` in
Python), a seed of ``1e20`` (torch cannot seed with it), ``--block-size 1`` (no room for
``[CLS]`` and ``[SEP]``), or a size that would exhaust memory. The ranges below are the
maximum documented for each setting (CLI ``--help``, configs, the app's Runs form).
"""

from __future__ import annotations

import dataclasses
import os

from xlviz.errors import XlvizError

SEED_MAX = 2**32 - 1
# setting -> (minimum, maximum), inclusive
SIZE_LIMITS: dict[str, tuple[int, int]] = {
    "seed": (0, SEED_MAX),
    "vocab_size": (50, 1_000_000),
    "joint_vocab_size": (0, 1_000_000),
    "l2_vocab_size": (50, 1_000_000),
    "block_size": (8, 8192),
    "qa_max_length": (16, 8192),
    "eval_max_length": (8, 8192),
    "doc_stride": (1, 8192),
    "max_answer_length": (1, 512),
    "max_question_length": (1, 1024),
    "batch_size": (1, 8192),
    "mlm_batch_size": (1, 8192),
    "qa_batch_size": (1, 8192),
    "grad_accum": (1, 1024),
    "pretrain_steps": (1, 10_000_000),
    "transfer_steps": (1, 10_000_000),
    "finetune_steps": (1, 10_000_000),
    "adapter_size": (1, 8192),
    "log_every": (1, 1_000_000),
    "corpus_documents": (1, 10_000_000),
    "qa_train_paragraphs": (1, 1_000_000),
    "qa_dev_paragraphs": (1, 1_000_000),
    "qa_test_paragraphs": (1, 1_000_000),
    "parallel_pairs": (1, 1_000_000),
    "agreement_pairs": (1, 1_000_000),
    "sense_pairs": (1, 1_000_000),
    "parallel_max": (1, 10_000_000),
    "tokenizer_lines": (1, 100_000_000),
    "max_lines": (1, 1_000_000_000),
    "shuffle_buffer": (1, 10_000_000),
}
# Any other integer setting.
DEFAULT_MAX = 1_000_000_000


def _fields_of(cfg) -> list[tuple[str, object, object]]:
    """(name, value, default) for a dataclass instance's fields with a plain default."""
    out = []
    for f in dataclasses.fields(cfg):
        default = f.default if f.default is not dataclasses.MISSING else None
        out.append((f.name, getattr(cfg, f.name), default))
    return out


def check_limits(cfg, *, path: str | os.PathLike | None = None, prefix: str = "") -> None:
    """Every setting of the dataclass ``cfg`` (and its ``world``) has its default's type (an
    integer for an integer, a number for a float, never a boolean for either) and lies in its
    documented range; else an XlvizError naming the field."""
    for name, value, default in _fields_of(cfg):
        field = f"{prefix}{name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_limits(value, path=path, prefix=f"{field}.")
            continue
        if value is None or isinstance(default, bool) or default is None and name not in SIZE_LIMITS:
            continue
        if isinstance(default, int) or (default is None and name in SIZE_LIMITS):
            if isinstance(value, bool) or not isinstance(value, int):
                raise XlvizError(f"must be an integer, got {value!r:.60}", path=path, field=field)
            lo, hi = SIZE_LIMITS.get(name, (None, DEFAULT_MAX))
            if lo is not None and value < lo or value > hi:
                raise XlvizError(f"must be between {lo if lo is not None else '-'} and {hi}, got {value}", path=path, field=field)
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
                raise XlvizError(f"must be a number, got {value!r:.60}", path=path, field=field)
        elif isinstance(default, str) and not isinstance(value, str):
            raise XlvizError(f"must be a string, got {value!r:.60}", path=path, field=field)


def limits_help() -> str:
    """The ranges as one line for ``--help`` texts and docs."""
    return ", ".join(f"{k} {lo}-{hi}" for k, (lo, hi) in SIZE_LIMITS.items())


__all__ = ["SIZE_LIMITS", "SEED_MAX", "DEFAULT_MAX", "check_limits", "limits_help"]


# --- reads of run folders ---------------------------------------------------------------------
# The most bytes read from one file of a run folder (xlviz.confined). A run folder may come
# from elsewhere (copied, downloaded, another user's): a file linked to /dev/zero or grown
# without bound must end in a clear error, not exhaust the app's memory.
RUN_JSON_MAX_BYTES = 4 * 1024 * 1024  # config.json, status.json
RESULTS_MAX_BYTES = 16 * 1024 * 1024  # results.json
METRICS_MAX_BYTES = 64 * 1024 * 1024  # metrics.jsonl (read whole for the loss curves)
RECORD_MAX_BYTES = 64 * 1024  # job.json, .writer.lock
LOG_TAIL_MAX_BYTES = 256 * 1024  # log.txt, job-output.txt: only their last bytes are read
READ_LIMITS: dict[str, int] = {
    "config.json, status.json": RUN_JSON_MAX_BYTES,
    "results.json": RESULTS_MAX_BYTES,
    "metrics.jsonl": METRICS_MAX_BYTES,
    "job.json, .writer.lock": RECORD_MAX_BYTES,
    "log.txt, job-output.txt (tail)": LOG_TAIL_MAX_BYTES,
}
__all__ += ["RUN_JSON_MAX_BYTES", "RESULTS_MAX_BYTES", "METRICS_MAX_BYTES", "RECORD_MAX_BYTES", "LOG_TAIL_MAX_BYTES",
            "READ_LIMITS"]
