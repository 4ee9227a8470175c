"""``xlviz transfer``: train and score the chosen systems on one data source into a run folder (or resume one)."""

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


def sources_help() -> str:
    from xlviz.data.sources import sources

    return "data source: " + "; ".join(f"{s.name}: {s.description}" for s in sources().values()) + " (default: world)"


def tasks_help() -> str:
    from xlviz.transfer.tasks import tasks

    return ("comma list of evaluation tasks (default: every task the source supports): "
            + "; ".join(f"{t.name}: {t.description}" for t in tasks().values()))


# flag -> (config field, type): a corpus source's options (the config's "data")
DATA_OPTIONS = {"--l1": ("l1", str), "--l2": ("l2", str), "--parallel-max": ("parallel_max", int),
                "--tokenizer-lines": ("tokenizer_lines", int), "--max-lines": ("max_lines", int),
                "--shuffle-buffer": ("shuffle_buffer", int), "--l2-vocab-size": ("l2_vocab_size", int),
                "--qa-train": ("qa_train", str), "--qa-train-articles": ("qa_train_articles", int),
                "--dictionary-lines": ("dictionary_lines", int), "--dictionary-min-count": ("dictionary_min_count", int),
                "--dictionary-threshold": ("dictionary_threshold", float),
                "--dictionary-test-fraction": ("dictionary_test_fraction", float)}
DATA_LISTS = {"--l1-corpus": "l1_corpus", "--l2-corpus": "l2_corpus", "--qa-eval": "qa_eval", "--parallel": "parallel",
              "--parallel-train": "parallel_train"}
# flag -> (config field, type): settings of every run and of retrieval (each method's own
# options get their flags from its options dataclass: add_method_options)
RUN_OPTIONS = {"--init-model": ("init_model", str), "--tokenizer": ("tokenizer", str),
               "--mlm-probability": ("mlm_probability", float), "--mlm-random-share": ("mlm_random_share", float),
               "--pretrain-lr": ("pretrain_lr", float),
               "--transfer-lr": ("transfer_lr", float), "--finetune-lr": ("finetune_lr", float),
               "--qa-max-length": ("qa_max_length", int), "--doc-stride": ("doc_stride", int),
               "--eval-pooling": ("eval_pooling", str), "--eval-max-length": ("eval_max_length", int),
               "--log-every": ("log_every", int)}


def add_method_options(p: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """One flag per field of every method's options dataclass (xlviz.methods.options), as
    ``HfArgumentParser`` makes them: ``ppa_steps`` -> ``--ppa-steps``, its type, its choices, its
    help and default; a group per method (``only``: these methods'). Unset flags leave the
    config file's value."""
    from xlviz.methods import methods
    from xlviz.methods.options import option_fields, parse_bool

    for m in methods().values():
        if m.options is None or only is not None and m.name not in only:
            continue
        group = p.add_argument_group(f"{m.name} options", f"settings of the {m.name} systems ({', '.join(m.systems)})")
        for f in option_fields(m.options, m.name):
            kind = parse_bool if f.type is bool else f.type
            group.add_argument(f.flag, dest=f.name, type=kind, choices=f.choices, default=None,
                               metavar=None if f.choices else f.type.__name__.upper(),
                               help=f"{f.help} (default: {f.default})".replace("%", "%%"))


def method_settings(args: argparse.Namespace, d: dict) -> None:
    """The method option flags given on the command line into the config dict ``d``."""
    from xlviz.methods.options import all_option_fields

    for f in all_option_fields():
        if getattr(args, f.name, None) is not None:
            d[f.name] = getattr(args, f.name)


def add_source_options(p: argparse.ArgumentParser) -> None:
    """``transfer``'s flags for the data source, its options and the tasks."""
    p.add_argument("--source", help=sources_help())
    p.add_argument("--systems", dest="methods", help="the same as --methods")
    p.add_argument("--tasks", help=tasks_help())
    p.add_argument("--l1-corpus", dest="l1_corpus", nargs="+", metavar="GLOB", help="corpus sources: L1 corpus files/globs (.gz ok; shared:... = shared data)")
    p.add_argument("--l2-corpus", dest="l2_corpus", nargs="+", metavar="GLOB", help="corpus sources: L2 corpus files/globs, independent of L1 (not translations)")
    p.add_argument("--parallel", nargs=2, metavar=("L1_FILE", "L2_FILE"), help="corpus sources: line-aligned evaluation pairs (never trained on)")
    p.add_argument("--parallel-train", dest="parallel_train", nargs=2, metavar=("L1_FILE", "L2_FILE"),
                   help="corpus sources: line-aligned training pairs a bilingual dictionary is induced from (word translation)")
    p.add_argument("--qa-eval", dest="qa_eval", nargs="+", metavar="FILE_OR_DIR", help="corpus sources: SQuAD-format <name>.<lang>.json files or folders")
    p.add_argument("--no-lowercase", dest="no_lowercase", action="store_true", help="corpus sources: keep case in the learned vocabularies")
    p.add_argument("--stop-after", dest="stop_after", metavar="STAGE", help="stop after this stage (e.g. s1_pretrain); --resume continues")
    for flag, (key, typ) in {**DATA_OPTIONS, **RUN_OPTIONS}.items():
        p.add_argument(flag, dest=key, type=typ)


def source_settings(args: argparse.Namespace, d: dict) -> None:
    """The source flags into the config dict ``d`` (its ``data`` for a source's options); only
    for a parser with :func:`add_source_options` (``sweep`` and ``demo`` share other flags, and
    their own ``--parallel`` means something else)."""
    if not hasattr(args, "l1_corpus"):
        return
    if getattr(args, "source", None):
        d["source"] = args.source
    if getattr(args, "tasks", None):
        d["tasks"] = [t.strip() for t in args.tasks.split(",") if t.strip()]
    data = dict(d.get("data") or {})
    for key, _ in DATA_OPTIONS.values():
        if getattr(args, key, None) is not None:
            data[key] = getattr(args, key)
    for key in DATA_LISTS.values():
        if getattr(args, key, None):
            data[key] = list(getattr(args, key))
    if getattr(args, "no_lowercase", False):
        data["lowercase"] = False
    for key, _ in RUN_OPTIONS.values():
        if getattr(args, key, None) is not None:
            d[key] = getattr(args, key)
    if data:
        d["data"] = data


def build_config(args: argparse.Namespace, base: dict | None = None):
    """Merge a config file (or defaults) with command-line overrides into a validated config."""
    from xlviz.transfer.config import LEGACY_CORPUS_KEYS, TransferConfig, legacy_corpus_dict

    d = dict(base or {})
    if "source" not in d and LEGACY_CORPUS_KEYS & set(d):  # a transfer-corpus config file
        d = legacy_corpus_dict(d)
    source_settings(args, d)
    method_settings(args, d)
    corpus = d.get("source", "world") != "world"
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
            if corpus and key == "qa_train_paragraphs":
                d.setdefault("data", {})[key] = getattr(args, key)
            else:
                world[key] = getattr(args, key)
    if getattr(args, "languages", None) is not None:  # '' is refused, not read as "the default languages"
        from xlviz.data.typology import parse_languages

        world["languages"] = parse_languages(args.languages)
    if "seed" in d:
        world.setdefault("seed", d["seed"])
    if world:
        d["world"] = world
    cfg = TransferConfig.from_dict(d, path=getattr(args, "config", None))
    check_resources(cfg, getattr(args, "config", None))  # the app's Runs form builds its runs here too
    return cfg


def check_resources(cfg, path=None) -> None:
    """Refuse a run whose training would not fit in the machine's memory
    (:func:`xlviz.training.memory.check_memory`), for configs with masked-LM settings."""
    from xlviz.training.memory import check_memory

    if all(hasattr(cfg, k) for k in ("model_size", "vocab_size", "block_size", "mlm_batch_size", "qa_max_length", "batch_size")):
        check_memory(cfg, path=path)


def open_pipeline(pipeline_cls, args: argparse.Namespace, build, what: str):
    """The run command's pipeline: resumed from ``--resume``, or configured from ``--config``
    plus flags (``build(args, base)``) into ``--run-dir`` or a fresh folder under ``--out``."""
    from xlviz.io import read_json_object
    from xlviz.runs import checkpoints_root, explicit_run_dir, new_run_path, resume_dir

    if args.resume:
        pipeline = pipeline_cls.resume(resume_dir(args.resume, checkpoints_root(getattr(args, "out", None))))
        check_resources(pipeline.cfg, pipeline.run.config_path)
    else:
        base = read_json_object(args.config, what=what) if args.config else None
        cfg = build(args, base)
        check_resources(cfg, args.config)  # before the run folder is made
        root = checkpoints_root(args.out)
        check = getattr(cfg, "check_files", None)
        if check is not None:  # before the run folder is made: a missing corpus leaves no failed run behind
            check()
        pipeline = pipeline_cls(cfg, explicit_run_dir(args.run_dir, root, cfg.to_dict()) if args.run_dir else new_run_path(root, cfg.name))
    if pipeline.main:
        print(f"run folder: {pipeline.run.path}", flush=True)
    return pipeline


def run(args: argparse.Namespace) -> int:
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.report import results_table

    pipeline = open_pipeline(Pipeline, args, build_config, "transfer config")
    pipeline.stop_after = getattr(args, "stop_after", None)
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
    if pipeline.main:
        if pipeline.source_kind == "world":
            print(results_table(rows))
        else:
            print_corpus_rows(rows, pipeline.data.l1)
    return 0


def print_corpus_rows(rows: list[dict], l1: str) -> None:
    """A corpus run's QA table and its retrieval lines."""
    from xlviz.training.verdicts import degenerate_reason, is_degenerate
    from xlviz.transfer.report import results_table

    qa_rows = [r for r in rows if "f1" in r]
    if qa_rows:
        print(results_table(qa_rows, l1=l1))
    for r in rows:
        if "retrieval" in r and is_degenerate(r):  # no result: not a number (the run's results.json keeps them)
            print(f"retrieval {r['system']:<10} {r['language']}: degenerate ({degenerate_reason(r)}), not a result")
        elif "retrieval" in r:
            print(f"retrieval {r['system']:<10} {r['language']}: {r['retrieval']:.1f}% (held out) at layer {r['retrieval_layer']}; "
                  f"per layer {r['retrieval_per_layer']}")


def register(sub) -> None:
    p = sub.add_parser("transfer", help="train and score transfer methods on a data source (the generated world, Multi30k, files) into a run folder",
                       description="Train the chosen systems (MONOTRANS and its variants, the joint multilingual baselines, ...) "
                                   "on one data source (--source: the generated world by default) and score each on the run's "
                                   "tasks (--tasks: QA zero-shot in every language, sentence retrieval, ...).")
    p.add_argument("--config", help="JSON file with transfer settings (see xlviz/transfer/config.py)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its last completed stage")
    p.add_argument("--run-dir", dest="run_dir", help="exact run folder to create (default: <out>/<name>-<timestamp>)")
    add_transfer_options(p)
    add_source_options(p)
    add_method_options(p)
    p.set_defaults(handler=run)
