"""``xlviz transfer-corpus`` (deprecated): the former command of MONOTRANS on real monolingual
corpora, kept as a thin alias of ``xlviz transfer --source files --systems monotrans,floor``
with its former flags and config files (``batch_size`` here is the masked-LM batch,
``qa_batch_size`` the QA one, ``mask_prob`` the masking rate).

    xlviz transfer-corpus --l1 en --l2 de \\
        --l1-corpus 'shared:multi30k/task2/train.*.en.gz' --l2-corpus 'shared:multi30k/task2/train.*.de.gz' \\
        --parallel shared:multi30k/task1/val.en.gz shared:multi30k/task1/val.de.gz
    xlviz transfer-corpus --config configs/multi30k-en-de.json
    xlviz transfer-corpus --init-model path/to/english-bert --l2-corpus 'de/*.txt.gz' --parallel a.en b.de
    accelerate launch --multi_gpu --num_processes 2 -m xlviz transfer-corpus --config ...   # scale out

Runs under ``accelerate launch`` unchanged (the MLM batch is global; see xlviz/transfer/runner.py).
"""

from __future__ import annotations

import argparse

# The former flags, by their former flat names (--pretrain-steps -> pretrain_steps); each
# overrides the config file's value and has the type of the setting it becomes
# (xlviz.transfer.config.LEGACY_CORPUS_RENAMED: batch_size is the masked-LM batch, qa_batch_size
# the QA one, mask_prob the masking rate). MONOTRANS's own options (--dropout, --embedding-init,
# --mlm-head-* ...) come from its options dataclass.
LEGACY_FLAGS = ("name", "seed", "l1", "l2", "parallel_max", "init_model", "model_size", "vocab_size", "l2_vocab_size", "tokenizer",
                "tokenizer_lines", "max_lines", "block_size", "shuffle_buffer", "mask_prob", "batch_size", "pretrain_steps",
                "pretrain_lr", "transfer_steps", "transfer_lr", "eval_pooling", "eval_max_length", "qa_train", "qa_train_paragraphs",
                "finetune_steps", "finetune_lr", "qa_batch_size", "qa_max_length", "doc_stride", "qa_train_articles",
                "mixed_precision", "grad_accum", "log_every")
# The corpus source's options given as lists or switched off, with their flags as transfer's.
SOURCE_FLAGS = ("l1_corpus", "l2_corpus", "parallel", "qa_eval", "lowercase")


def build_config(args: argparse.Namespace, base: dict | None = None):
    """The former flags and config file, read as they were, as a run of ``monotrans,floor`` on
    the ``files`` source (:func:`xlviz.transfer.config.legacy_corpus_dict`)."""
    from xlviz.commands.transfer import method_settings
    from xlviz.fields import given
    from xlviz.transfer.config import TransferConfig, legacy_corpus_dict
    from xlviz.transfer.settings import named_settings

    d = dict(base or {})
    for key in LEGACY_FLAGS:
        value = getattr(args, key, None)
        if value is not None:
            d[key] = value
    for s, value in given(args, named_settings(SOURCE_FLAGS)):
        d[s.name] = value
    method_settings(args, d)
    if "source" not in d:
        d = legacy_corpus_dict(d)
    return TransferConfig.from_dict(d, path=getattr(args, "config", None))


def run(args: argparse.Namespace) -> int:
    import sys

    from xlviz.commands.transfer import open_pipeline, print_corpus_rows
    from xlviz.transfer.pipeline import Pipeline

    print("xlviz transfer-corpus is deprecated: it runs `xlviz transfer --source files --systems monotrans,floor` "
          "(Multi30k: `xlviz transfer --source multi30k`)", file=sys.stderr, flush=True)
    pipeline = open_pipeline(Pipeline, args, build_config, "transfer-corpus config")
    pipeline.stop_after = args.stop_after
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
    if pipeline.main:
        print_corpus_rows(rows, pipeline.data.l1)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "transfer-corpus", help="(deprecated: xlviz transfer --source files) MONOTRANS on real monolingual corpora into a run folder",
        description="Learn vocabularies on two monolingual corpora, pre-train on L1 (or take --init-model as step 1), "
                    "learn L2 embeddings on the L2 corpus, measure sentence retrieval per layer on a parallel set "
                    "against the floor (untrained L2 embeddings); optionally fine-tune QA on L1 and evaluate zero-shot.",
    )
    p.add_argument("--config", help="JSON file with the former flat transfer-corpus settings, or a transfer config (e.g. configs/multi30k-en-de.json)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last completed stage")
    p.add_argument("--run-dir", dest="run_dir", help="exact run folder (default: <out>/<name>-<timestamp>)")
    p.add_argument("--out", help="checkpoints root (default: $XLVIZ_CHECKPOINTS or ./checkpoints)")
    p.add_argument("--stop-after", dest="stop_after", metavar="STAGE", help="stop after this stage (e.g. s1_pretrain); --resume continues")
    from xlviz.fields import add_flags
    from xlviz.limits import SIZE_LIMITS
    from xlviz.transfer.config import LEGACY_CORPUS_RENAMED
    from xlviz.transfer.settings import named_settings

    add_flags(p, named_settings(SOURCE_FLAGS))
    kinds = {key: s.type for key, s in zip(LEGACY_FLAGS, named_settings([LEGACY_CORPUS_RENAMED.get(k, k) for k in LEGACY_FLAGS]))}
    for key in LEGACY_FLAGS:
        rng = SIZE_LIMITS.get(key)
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=kinds[key] if kinds[key] in (int, float) else None,
                       help=f"{rng[0]:,} to {rng[1]:,}" if rng else None)
    from xlviz.commands.transfer import add_method_options

    add_method_options(p, only=("monotrans",))
    p.set_defaults(handler=run)
