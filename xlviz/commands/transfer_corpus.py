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

# flag -> (config field, type); each overrides the config file's value (MONOTRANS's own
# options, --dropout, --embedding-init, --mlm-head-* ..., come from its options dataclass)
OPTIONS = {
    "--name": ("name", str), "--seed": ("seed", int), "--l1": ("l1", str), "--l2": ("l2", str),
    "--parallel-max": ("parallel_max", int), "--init-model": ("init_model", str), "--model-size": ("model_size", str),
    "--vocab-size": ("vocab_size", int), "--l2-vocab-size": ("l2_vocab_size", int),
    "--tokenizer": ("tokenizer", str), "--tokenizer-lines": ("tokenizer_lines", int), "--max-lines": ("max_lines", int),
    "--block-size": ("block_size", int), "--shuffle-buffer": ("shuffle_buffer", int), "--mask-prob": ("mask_prob", float), "--batch-size": ("batch_size", int),
    "--pretrain-steps": ("pretrain_steps", int), "--pretrain-lr": ("pretrain_lr", float),
    "--transfer-steps": ("transfer_steps", int), "--transfer-lr": ("transfer_lr", float),
    "--eval-pooling": ("eval_pooling", str),
    "--eval-max-length": ("eval_max_length", int), "--qa-train": ("qa_train", str),
    "--qa-train-paragraphs": ("qa_train_paragraphs", int), "--finetune-steps": ("finetune_steps", int),
    "--finetune-lr": ("finetune_lr", float), "--qa-batch-size": ("qa_batch_size", int),
    "--qa-max-length": ("qa_max_length", int), "--doc-stride": ("doc_stride", int),
    "--qa-train-articles": ("qa_train_articles", int),
    "--mixed-precision": ("mixed_precision", str), "--grad-accum": ("grad_accum", int), "--log-every": ("log_every", int),
}
LISTS = {"--l1-corpus": "l1_corpus", "--l2-corpus": "l2_corpus", "--qa-eval": "qa_eval"}


def build_config(args: argparse.Namespace, base: dict | None = None):
    """The former flags and config file, read as they were, as a run of ``monotrans,floor`` on
    the ``files`` source (:func:`xlviz.transfer.config.legacy_corpus_dict`)."""
    from xlviz.commands.transfer import method_settings
    from xlviz.transfer.config import TransferConfig, legacy_corpus_dict

    d = dict(base or {})
    for flag, (key, _) in OPTIONS.items():
        value = getattr(args, key, None)
        if value is not None:
            d[key] = value
    for flag, key in LISTS.items():
        value = getattr(args, key, None)
        if value:
            d[key] = list(value)
    if getattr(args, "parallel", None):
        d["parallel"] = list(args.parallel)
    if getattr(args, "no_lowercase", False):
        d["lowercase"] = False
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
        print_corpus_rows(rows, pipeline.data.l1 if pipeline.data is not None else pipeline.world.l1)
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
    p.add_argument("--l1-corpus", dest="l1_corpus", nargs="+", metavar="GLOB", help="L1 corpus files/globs (.gz ok; shared:... = shared data)")
    p.add_argument("--l2-corpus", dest="l2_corpus", nargs="+", metavar="GLOB", help="L2 corpus files/globs, independent of L1 (not translations)")
    p.add_argument("--parallel", nargs=2, metavar=("L1_FILE", "L2_FILE"), help="line-aligned evaluation pairs (never trained on)")
    p.add_argument("--qa-eval", dest="qa_eval", nargs="+", metavar="FILE_OR_DIR", help="SQuAD-format <name>.<lang>.json files or folders")
    p.add_argument("--no-lowercase", dest="no_lowercase", action="store_true", help="keep case in the learned vocabularies")
    from xlviz.limits import SIZE_LIMITS

    for flag, (key, typ) in OPTIONS.items():
        rng = SIZE_LIMITS.get(key)
        p.add_argument(flag, dest=key, type=typ, help=f"{rng[0]:,} to {rng[1]:,}" if rng else None)
    from xlviz.commands.transfer import add_method_options

    add_method_options(p, only=("monotrans",))
    p.set_defaults(handler=run)
