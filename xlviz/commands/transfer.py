"""``xlviz transfer``: run one configured MONOTRANS pipeline into a run folder (or resume one)."""

from __future__ import annotations

import argparse


def methods_help() -> str:
    from xlviz.methods import aliases, methods

    systems = "; ".join(f"{m.name}: {', '.join(m.systems)}" for m in methods().values())
    return (f"comma list of systems to train and score ({systems}), or a group: {', '.join(aliases())}")


def add_transfer_options(p: argparse.ArgumentParser) -> None:
    """Flags shared by ``transfer`` and ``demo``; each overrides the config file's value."""
    p.add_argument("--methods", help=methods_help())
    p.add_argument("--variants", help="MONOTRANS variants by their former names: comma list of base,floor,pos,noise,adapters,oracle or 'all'")
    p.add_argument("--out", help="checkpoints root (default: $XLVIZ_CHECKPOINTS or ./checkpoints)")
    p.add_argument("--name", help="run name prefix")
    p.add_argument("--seed", type=int)
    p.add_argument("--languages", help="L2s of the generated world: code[:grammar[:script]], comma-separated, e.g. 'svo,sov', 'tr,cy', "
                                         "'x:tr+determiner=before:greek'; a code that names a grammar preset takes it (presets: "
                                         "svo step1 step2 step3 sov tr cy; docs/typology.md); or a JSON list of entries with 'features'")
    p.add_argument("--model-size", dest="model_size", help="tiny | small | medium")
    p.add_argument("--vocab-size", dest="vocab_size", type=int)
    p.add_argument("--pretrain-steps", dest="pretrain_steps", type=int)
    p.add_argument("--transfer-steps", dest="transfer_steps", type=int)
    p.add_argument("--finetune-steps", dest="finetune_steps", type=int)
    p.add_argument("--batch-size", dest="batch_size", type=int, help="QA fine-tuning batch (paragraph windows)")
    p.add_argument("--mlm-batch-size", dest="mlm_batch_size", type=int, help="masked-LM batch of steps 1 and 2 (blocks)")
    p.add_argument("--block-size", dest="block_size", type=int, help="masked-LM block length in tokens")
    p.add_argument("--corpus-documents", dest="corpus_documents", type=int, help="documents per language corpus")
    p.add_argument("--qa-train-paragraphs", dest="qa_train_paragraphs", type=int)
    p.add_argument("--qa-test-paragraphs", dest="qa_test_paragraphs", type=int)
    p.add_argument("--mixed-precision", dest="mixed_precision", help="auto (default: bf16 on GPUs and on CPUs with AMX or AVX512-BF16, else no) | no | bf16 | fp16")
    p.add_argument("--grad-accum", dest="grad_accum", type=int)
    p.add_argument("--log-with", dest="log_with", help="trackers besides metrics.jsonl, through accelerate: tensorboard (default: "
                                                       "event files in the run folder) | wandb | mlflow | aim | all | none, or a comma list")
    p.add_argument("--strict", action="store_true", default=None,
                   help="stop the run at the first degenerate stage (an MLM loss not below its corpus's unigram entropy, "
                        "a QA model no better than a trivial baseline on the dev split)")
    p.add_argument("--workers", type=int, help="stages trained at once in worker processes (0: one per CPU core, at most 4; "
                                               "the demo's default; 1: one after the other, the default of transfer)")


def build_config(args: argparse.Namespace, base: dict | None = None):
    """Merge a config file (or defaults) with command-line overrides into a validated config."""
    from xlviz.transfer.config import TransferConfig

    d = dict(base or {})
    world = dict(d.get("world") or {})
    for key in ("seed", "model_size", "vocab_size", "pretrain_steps", "transfer_steps", "finetune_steps", "batch_size", "mlm_batch_size", "block_size", "mixed_precision", "grad_accum", "workers", "log_with", "strict"):
        if getattr(args, key, None) is not None:
            d[key] = getattr(args, key)
    if getattr(args, "name", None):
        d["name"] = args.name
    if getattr(args, "variants", None):
        from xlviz.transfer.config import parse_variants

        d["methods"] = parse_variants(args.variants)
    if getattr(args, "methods", None):
        d["methods"] = args.methods
    for key in ("corpus_documents", "qa_train_paragraphs", "qa_test_paragraphs"):
        if getattr(args, key, None) is not None:
            world[key] = getattr(args, key)
    if getattr(args, "languages", None):
        from xlviz.data.typology import parse_languages

        world["languages"] = parse_languages(args.languages)
    if "seed" in d:
        world.setdefault("seed", d["seed"])
    if world:
        d["world"] = world
    return TransferConfig.from_dict(d, path=getattr(args, "config", None))


def open_pipeline(pipeline_cls, args: argparse.Namespace, build, what: str):
    """The run command's pipeline: resumed from ``--resume``, or configured from ``--config``
    plus flags (``build(args, base)``) into ``--run-dir`` or a fresh folder under ``--out``."""
    from xlviz.io import read_json_object
    from xlviz.runs import checkpoints_root, explicit_run_dir, new_run_path, resume_dir

    if args.resume:
        pipeline = pipeline_cls.resume(resume_dir(args.resume, checkpoints_root(getattr(args, "out", None))))
    else:
        base = read_json_object(args.config, what=what) if args.config else None
        cfg = build(args, base)
        root = checkpoints_root(args.out)
        pipeline = pipeline_cls(cfg, explicit_run_dir(args.run_dir, root, cfg.to_dict()) if args.run_dir else new_run_path(root, cfg.name))
    if pipeline.main:
        print(f"run folder: {pipeline.run.path}", flush=True)
    return pipeline


def run(args: argparse.Namespace) -> int:
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.report import results_table

    pipeline = open_pipeline(Pipeline, args, build_config, "transfer config")
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
    if pipeline.main:
        print(results_table(rows))
    return 0


def register(sub) -> None:
    p = sub.add_parser("transfer", help="train and score transfer methods on the generated world into a run folder",
                       description="Train the chosen systems (MONOTRANS and its variants, the joint multilingual baselines, ...) "
                                   "on one generated world and score each zero-shot in every language.")
    p.add_argument("--config", help="JSON file with transfer settings (see xlviz/transfer/config.py)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its last completed stage")
    p.add_argument("--run-dir", dest="run_dir", help="exact run folder to create (default: <out>/<name>-<timestamp>)")
    add_transfer_options(p)
    p.set_defaults(handler=run)
