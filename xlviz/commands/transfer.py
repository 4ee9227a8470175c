"""``xlviz transfer``: train and score the chosen systems on one data source into a run folder (or resume one)."""

from __future__ import annotations

import argparse

# the help of --methods, --source and --tasks (read from the registries), importable here as before
from xlviz.transfer.settings import methods_help, sources_help, tasks_help  # noqa: F401


def add_transfer_options(p: argparse.ArgumentParser) -> None:
    """Flags shared by ``transfer``, ``demo`` and ``sweep``: those of the settings in
    :data:`xlviz.transfer.settings.EVERY_COMMAND`, generated from their declarations
    (:func:`xlviz.fields.add_flags`; each overrides the config file's value), and ``--variants``
    (MONOTRANS's systems by their former names) and ``--out``."""
    from xlviz.fields import add_flags
    from xlviz.transfer.settings import EVERY_COMMAND, named_settings

    methods, *rest = named_settings(EVERY_COMMAND)
    add_flags(p, [methods])
    p.add_argument("--variants", help="MONOTRANS variants by their former names: comma list of base,floor,pos,noise,adapters,oracle or 'all'")
    p.add_argument("--out", help="checkpoints root (default: $XLVIZ_CHECKPOINTS or ./checkpoints)")
    add_flags(p, rest)


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
    """``transfer``'s other flags: ``--source`` (and ``--systems``, the same as ``--methods``),
    ``--tasks``, every source's options (``data``), ``--stop-after``, then every other setting's
    flag, all generated from their declarations (:func:`xlviz.transfer.settings.run_settings`)."""
    from xlviz.fields import add_flags
    from xlviz.transfer.settings import EVERY_COMMAND, run_settings

    rest = [s for s in run_settings() if s.name not in EVERY_COMMAND]
    add_flags(p, [s for s in rest if s.name == "source"])
    p.add_argument("--systems", dest="methods", help="the same as --methods")
    add_flags(p, [s for s in rest if s.name == "tasks"])
    add_flags(p, [s for s in rest if s.path.startswith("data.")], note="corpus sources: ")
    p.add_argument("--stop-after", dest="stop_after", metavar="STAGE", help="stop after this stage (e.g. s1_pretrain); --resume continues")
    add_flags(p, [s for s in rest if "." not in s.path])


def build_config(args: argparse.Namespace, base: dict | None = None):
    """Merge a config file (or defaults) with command-line overrides into a validated config:
    the setting flags through :func:`xlviz.transfer.settings.with_flags` (a namespace made by
    hand may hold any of them), the method options' through :func:`method_settings`."""
    from xlviz.transfer.config import LEGACY_CORPUS_KEYS, TransferConfig, legacy_corpus_dict
    from xlviz.transfer.settings import with_flags

    d = dict(base or {})
    if "source" not in d and LEGACY_CORPUS_KEYS & set(d):  # a transfer-corpus config file
        d = legacy_corpus_dict(d)
    if getattr(args, "variants", None):  # --methods, when given too, wins
        from xlviz.transfer.config import parse_variants

        d["methods"] = parse_variants(args.variants)
    with_flags(args, d)
    method_settings(args, d)
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
    p.add_argument("--config", help="JSON file with transfer settings (see xlviz/transfer/settings.py)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its last completed stage")
    p.add_argument("--run-dir", dest="run_dir", help="exact run folder to create (default: <out>/<name>-<timestamp>)")
    add_transfer_options(p)
    add_source_options(p)
    add_method_options(p)
    p.set_defaults(handler=run)
