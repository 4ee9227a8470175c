"""``xlviz finetune-qa``: fine-tune any encoder for extractive QA on SQuAD-format data and
evaluate it per language (XQuAD), into a resumable run folder with the demo's results rows.

    xlviz finetune-qa --model DIR_OR_HUB_ID --train train-v1.1.json --eval-dir ../shared/data/xquad
    # a CPU slice: 40 paragraphs of xquad.en for training, the other paragraphs in every language
    xlviz finetune-qa --model checkpoints/run/s1_pretrain --train ../shared/data/xquad/xquad.en.json \\
        --train-paragraphs 40 --eval-dir ../shared/data/xquad --languages en,de,es --steps 200 --max-length 256
    accelerate launch --multi_gpu --num_processes 8 -m xlviz finetune-qa ...   # scale out (global batch)
"""

from __future__ import annotations

import argparse

OPTIONS = {
    "--name": ("name", str), "--seed": ("seed", int), "--model": ("model", str), "--tokenizer": ("tokenizer", str),
    "--system": ("system", str), "--train": ("train", str), "--train-paragraphs": ("train_paragraphs", int),
    "--languages": ("languages", str), "--steps": ("steps", int), "--lr": ("lr", float), "--warmup-ratio": ("warmup_ratio", float),
    "--batch-size": ("batch_size", int), "--max-length": ("max_length", int), "--doc-stride": ("doc_stride", int),
    "--max-answer-length": ("max_answer_length", int), "--eval-batch-size": ("eval_batch_size", int),
    "--mixed-precision": ("mixed_precision", str), "--grad-accum": ("grad_accum", int), "--log-every": ("log_every", int),
}


def build_config(args: argparse.Namespace, base: dict | None = None):
    from xlviz.transfer.qa import QAConfig

    d = dict(base or {})
    for flag, (key, _) in OPTIONS.items():
        value = getattr(args, key, None)
        if value is not None:
            d[key] = value
    if getattr(args, "eval", None):
        d["eval"] = list(args.eval)
    if getattr(args, "keep_train_ids", False):
        d["exclude_train_ids"] = False
    if getattr(args, "freeze_token_embeddings", False):
        d["freeze_token_embeddings"] = True
    return QAConfig.from_dict(d, path=getattr(args, "config", None))


def run(args: argparse.Namespace) -> int:
    from xlviz.commands.transfer import open_pipeline
    from xlviz.transfer.qa import QAPipeline
    from xlviz.transfer.report import results_table

    pipeline = open_pipeline(QAPipeline, args, build_config, "finetune-qa config")
    pipeline.stop_after = args.stop_after
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
    if pipeline.main and rows:
        print(results_table(rows, l1="en"))
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "finetune-qa", help="fine-tune any encoder for extractive QA (SQuAD format) and evaluate per language (XQuAD)",
        description="Fine-tune a BERT / RoBERTa / XLM-R / DistilBERT / ELECTRA model (folder or hub id) on SQuAD-format "
                    "data with offset mapping and doc stride; score every evaluation language with the official v1.1 "
                    "EM/F1; results.json rows {system, language, exact_match, f1} as in the demo.",
    )
    p.add_argument("--config", help="JSON file with QAConfig settings")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last completed stage")
    p.add_argument("--run-dir", dest="run_dir", help="exact run folder (default: <out>/<name>-<timestamp>)")
    p.add_argument("--out", help="checkpoints root (default: $XLVIZ_CHECKPOINTS or ./checkpoints)")
    p.add_argument("--stop-after", dest="stop_after", metavar="STAGE", help="stop after this stage (e.g. s3_finetune)")
    p.add_argument("--eval-dir", "--eval", dest="eval", nargs="+", metavar="DIR_OR_FILE",
                   help="folders of <name>.<lang>.json files and/or such files")
    p.add_argument("--keep-train-ids", dest="keep_train_ids", action="store_true",
                   help="also evaluate on question ids used in training (by default they are left out)")
    p.add_argument("--freeze-token-embeddings", dest="freeze_token_embeddings", action="store_true",
                   help="MONOTRANS step 3: token embeddings stay fixed except the special tokens")
    from xlviz.limits import SIZE_LIMITS

    for flag, (key, typ) in OPTIONS.items():
        rng = SIZE_LIMITS.get(key)
        p.add_argument(flag, dest=key, type=typ, help=f"{rng[0]:,} to {rng[1]:,}" if rng else None)
    p.set_defaults(handler=run)
