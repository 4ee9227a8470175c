"""``xlviz transfer-corpus``: MONOTRANS on real monolingual corpora into a run folder (or resume one).

    xlviz transfer-corpus --l1 en --l2 de \\
        --l1-corpus 'shared:multi30k/task2/train.*.en.gz' --l2-corpus 'shared:multi30k/task2/train.*.de.gz' \\
        --parallel shared:multi30k/task1/val.en.gz shared:multi30k/task1/val.de.gz
    xlviz transfer-corpus --config configs/multi30k-en-de.json
    xlviz transfer-corpus --init-model path/to/english-bert --l2-corpus 'de/*.txt.gz' --parallel a.en b.de
    accelerate launch --multi_gpu --num_processes 2 -m xlviz transfer-corpus --config ...   # scale out

Runs under ``accelerate launch`` unchanged (``batch_size`` is global; see xlviz/transfer/runner.py).
"""

from __future__ import annotations

import argparse

# flag -> (config field, type); each overrides the config file's value
OPTIONS = {
    "--name": ("name", str), "--seed": ("seed", int), "--l1": ("l1", str), "--l2": ("l2", str),
    "--parallel-max": ("parallel_max", int), "--init-model": ("init_model", str), "--model-size": ("model_size", str),
    "--dropout": ("dropout", float), "--vocab-size": ("vocab_size", int), "--l2-vocab-size": ("l2_vocab_size", int),
    "--tokenizer": ("tokenizer", str), "--tokenizer-lines": ("tokenizer_lines", int), "--max-lines": ("max_lines", int),
    "--block-size": ("block_size", int), "--shuffle-buffer": ("shuffle_buffer", int), "--mask-prob": ("mask_prob", float), "--batch-size": ("batch_size", int),
    "--pretrain-steps": ("pretrain_steps", int), "--pretrain-lr": ("pretrain_lr", float),
    "--transfer-steps": ("transfer_steps", int), "--transfer-lr": ("transfer_lr", float),
    "--embedding-init": ("embedding_init", str), "--eval-pooling": ("eval_pooling", str),
    "--eval-max-length": ("eval_max_length", int), "--qa-train": ("qa_train", str),
    "--qa-train-paragraphs": ("qa_train_paragraphs", int), "--finetune-steps": ("finetune_steps", int),
    "--finetune-lr": ("finetune_lr", float), "--qa-batch-size": ("qa_batch_size", int),
    "--qa-max-length": ("qa_max_length", int), "--doc-stride": ("doc_stride", int),
    "--mlm-head-steps": ("mlm_head_steps", int), "--mlm-head-lr": ("mlm_head_lr", float), "--qa-train-articles": ("qa_train_articles", int),
    "--mlm-head-top-layers": ("mlm_head_top_layers", int),
    "--mixed-precision": ("mixed_precision", str), "--grad-accum": ("grad_accum", int), "--log-every": ("log_every", int),
}
LISTS = {"--l1-corpus": "l1_corpus", "--l2-corpus": "l2_corpus", "--qa-eval": "qa_eval"}


def build_config(args: argparse.Namespace, base: dict | None = None):
    from xlviz.transfer.corpus import CorpusTransferConfig

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
    return CorpusTransferConfig.from_dict(d, path=getattr(args, "config", None))


def run(args: argparse.Namespace) -> int:
    from xlviz.commands.transfer import open_pipeline
    from xlviz.transfer.corpus import CorpusPipeline
    from xlviz.transfer.report import results_table

    pipeline = open_pipeline(CorpusPipeline, args, build_config, "transfer-corpus config")
    pipeline.stop_after = args.stop_after
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
    if pipeline.main:
        qa_rows = [r for r in rows if "f1" in r]
        if qa_rows:
            print(results_table(qa_rows, l1=pipeline.cfg.l1))
        for r in rows:
            if "retrieval" in r:
                print(f"retrieval {r['system']:<10} {r['language']}: {r['retrieval']:.1f}% (held out) at layer {r['retrieval_layer']}; "
                      f"per layer {r['retrieval_per_layer']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "transfer-corpus", help="MONOTRANS on real monolingual corpora (or from a pre-trained model) into a run folder",
        description="Learn vocabularies on two monolingual corpora, pre-train on L1 (or take --init-model as step 1), "
                    "learn L2 embeddings on the L2 corpus, measure sentence retrieval per layer on a parallel set "
                    "against the floor (untrained L2 embeddings); optionally fine-tune QA on L1 and evaluate zero-shot.",
    )
    p.add_argument("--config", help="JSON file with CorpusTransferConfig settings (e.g. configs/multi30k-en-de.json)")
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
    p.set_defaults(handler=run)
