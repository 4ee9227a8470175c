"""``xlviz analyse ...``: the Alignment and Probing pages' analyses on the command line.

Subcommands (each writes its numbers with ``--out FILE.json`` and/or ``--csv FILE.csv`` and
prints a short table):

- ``alignment``: per-layer sentence retrieval (both directions), linear CKA, word translation
  accuracy (generated world) and, with ``--train-fraction``, retrieval before/after an
  orthogonal map; for a run's transferred model and floor, or for any HF encoder(s).
- ``agreement``: Goldberg's masked-LM agreement probe, per category, with coverage; with a
  RUN folder first, store in the run the results the Probing page's first view of it shows
  (:mod:`xlviz.views.probing`), so the page reads them instead of loading every model.
- ``wic``: word-in-context probe and contextual similarity per layer.
- ``probing``: agreement + wic for a run's L1 model (on L1), transferred models and floor.
- ``encodings``: store in a run the vectors the Alignment page's default view of it needs (each
  system's encoders on the run's parallel pairs), so the page reads them instead of loading the
  models (:mod:`xlviz.analysis.encodings`).
- ``patching``: patching across languages: the share of the English answer score an L2 run
  gets back when a layer's states at aligned positions come from the English run, per layer and
  token group, per system (:mod:`xlviz.analysis.patching`); stored in the run.
- ``renderings``: words versus order: each system's QA exports on the test questions rendered
  with the L2's words in English order, English words in the L2's order, and English with one
  typological feature of the L2's grammar at a time (:mod:`xlviz.analysis.counterfactuals`);
  stored in the run.

Accuracies are fractions in [0, 1].
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from xlviz.analysis.agreement_store import PAIRS_PER_CATEGORY as AG_PAIRS, UNIT as AG_UNIT
    from xlviz.data.parallel import sources as parallel_sources

    p = sub.add_parser("analyse", aliases=["analyze"], help="alignment and probing analyses of models and runs",
                       description=__doc__.splitlines()[0])
    asub = p.add_subparsers(dest="analysis", metavar="ANALYSIS")
    p.set_defaults(handler=lambda args: _help(p))

    a = asub.add_parser("alignment", help="retrieval, CKA, word translation per layer (transferred vs floor, or any encoders)")
    a.add_argument("--run", help="run folder: compare its transferred model and floor on L1-L2 (with --source world: "
                   "the run's own parallel pairs, generated world or a corpus run's world/parallel/<l1>-<l2>.jsonl)")
    a.add_argument("--l2", help="the run's target language (e.g. sov)")
    a.add_argument("--source", default="world", choices=list(parallel_sources()),
                   help="parallel data: " + "; ".join(f"{n}: {s.description}" for n, s in parallel_sources().items()))
    a.add_argument("--model", help="one HF encoder (folder or hub id) reading both languages")
    a.add_argument("--model-a", dest="model_a", help="the model reading language A")
    a.add_argument("--model-b", dest="model_b", help="the model reading language B")
    a.add_argument("--tokenizer-a", dest="tokenizer_a")
    a.add_argument("--tokenizer-b", dest="tokenizer_b")
    a.add_argument("--lang-a", dest="lang_a", default="en")
    a.add_argument("--lang-b", dest="lang_b", help="second language (pud, multi30k, tatoeba)")
    a.add_argument("--files", nargs=2, metavar=("A.txt", "B.txt"), help="two line-aligned files (--source files)")
    a.add_argument("--limit", type=int, default=1000, help="number of sentence pairs (default 1000)")
    a.add_argument("--pooling", default="mean", choices=["mean", "mean_no_special", "cls"])
    a.add_argument("--center", action="store_true", help="subtract each language's mean vector first")
    a.add_argument("--train-fraction", dest="train_fraction", type=float,
                   help="fit an orthogonal map on this share of the pairs; report retrieval on the rest before/after")
    a.add_argument("--no-floor", dest="floor", action="store_false", help="skip the floor system of a run")
    a.add_argument("--no-words", dest="words", action="store_false", help="skip word translation accuracy")
    _outputs(a)
    a.set_defaults(handler=run_alignment_cmd)

    g = asub.add_parser("agreement", help="masked-LM agreement on minimal pairs (Goldberg 2019), per category; "
                        "with RUN: store the Probing page's first view of the run in it",
                        description="Goldberg's masked-LM agreement probe, per category, with coverage. With a RUN "
                        "folder first (xlviz analyse agreement RUN): score the rows the Probing page opens on (the "
                        "run's masked LMs of every L2, the floor, the page's default rows) on the run's generated-world "
                        "minimal pairs and store each result in the run (analyses/agreement-<key>.json and .csv, "
                        "listed in its manifest), so the page reads them instead of loading the models. Results "
                        "already stored are kept.")
    g.add_argument("run_dir", nargs="?", metavar="RUN", help="run folder: store the Probing page's agreement results in it")
    _model_options(g)
    g.add_argument("--data", help="world:LANG (a run's generated world) or marvin-linzen (default)")
    g.add_argument("--ml-file", dest="ml_file", help="Marvin & Linzen TSV (default ../shared/data/syneval/marvin_linzen.tsv.gz)")
    g.add_argument("--max-per-category", dest="max_per_category", type=int,
                   help=f"N pairs of each category, spread through it (default: all; with RUN: the page's {AG_PAIRS})")
    g.add_argument("--unit", default=AG_UNIT, metavar="{word,token}",
                   help="word: both forms must be single tokens (Goldberg, the paper's coverage); token: the "
                   f"tokenizations may differ in one sub-word (default {AG_UNIT})")
    g.add_argument("--systems", help="with RUN: comma-separated systems whose rows to store (default: the rows the "
                   "page opens on); the L1 model's row is stored too")
    g.add_argument("--items", help="also write every pair (masked sentence, log-probabilities, choice) to this CSV")
    _outputs(g)
    g.set_defaults(handler=run_agreement_cmd)

    w = asub.add_parser("wic", help="word-in-context probe and contextual similarity per layer (generated world)")
    _model_options(w)
    w.add_argument("--data", required=True, help="world:LANG (a run's same-word-different-sense pairs)")
    w.add_argument("--limit", type=int, help="first N sense pairs")
    w.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    w.add_argument("--test-fraction", dest="test_fraction", type=float, help="one train/test split instead of CV")
    w.add_argument("--items", help="also write every pair (cosine and prediction per layer) to this CSV")
    _outputs(w)
    w.set_defaults(handler=run_wic_cmd)

    r = asub.add_parser("probing", help="agreement + wic for a run: L1 model on L1, transferred and floor on each L2")
    r.add_argument("--run", required=True)
    r.add_argument("--l2", help="comma-separated target languages (default: all of the run's)")
    r.add_argument("--tasks", default="agreement,wic")
    r.add_argument("--max-per-category", dest="max_per_category", type=int)
    r.add_argument("--limit", type=int, help="first N sense pairs")
    r.add_argument("--no-floor", dest="floor", action="store_false")
    _outputs(r)
    r.set_defaults(handler=run_probing_cmd)

    e = asub.add_parser("encodings", help="store a run's encodings for the Alignment page (read from disk, not computed there)",
                        description="Encode the run's parallel pairs (the first 500, mean pooling, 128 tokens, word "
                        "vectors where the pairs have words) with each system's encoders and store them in the run "
                        "(encodings/, listed in its manifest). The Alignment page reads them when its view matches "
                        "and the models are unchanged. Files already stored are kept.")
    e.add_argument("--run", required=True, help="run folder")
    e.add_argument("--l2", help="comma-separated target languages (default: every one with parallel pairs)")
    e.add_argument("--systems", help="comma-separated systems (default: every system of the run)")
    e.add_argument("--quiet", action="store_true", help="print nothing but errors")
    e.add_argument("--threads", type=int, help="torch and BLAS threads")
    e.set_defaults(handler=run_encodings_cmd)

    _register_patching(asub)
    _register_renderings(asub)


def _register_patching(asub) -> None:
    from xlviz.analysis.patching_report import LIMIT

    pt = asub.add_parser("patching", help="patching across languages: layer x token group, per system (stored in the run)",
                         description="Replace an L2 run's hidden states at one layer and aligned positions by the English "
                         "run's and measure how much of the English answer's start+end logit score comes back, per layer "
                         "and token group (question, answer, verb, rest, all), over the run's test questions.")
    pt.add_argument("run", metavar="RUN", help="run folder (a generated world with gold alignments)")
    pt.add_argument("--language", required=True, help="the L2 (e.g. sov)")
    pt.add_argument("--systems", help="comma-separated systems (default: every one with English and L2 QA exports)")
    pt.add_argument("--limit", type=int, default=LIMIT, help=f"test questions per system (default {LIMIT})")
    pt.add_argument("--csv", help="also write the table as CSV here")
    pt.add_argument("--quiet", action="store_true", help="no progress")
    pt.add_argument("--threads", type=int, help="torch and BLAS threads")
    pt.set_defaults(handler=run_patching_cmd)


def _register_renderings(asub) -> None:
    r = asub.add_parser("renderings", help="words versus order: every system's QA exports on counterfactual renderings "
                        "(stored in the run)",
                        description="Score each system's exported QA models, without retraining, on the run's test "
                        "questions rendered with the L2's words in English order, English words in the L2's order and "
                        "English with only one typological feature set to the L2's, and split the L2's F1 loss into "
                        "'words not aligned', 'order not read' and '<feature> alone' with paired intervals.")
    r.add_argument("run", metavar="RUN", help="run folder (a generated world)")
    r.add_argument("--language", required=True, help="the L2 (e.g. sov)")
    r.add_argument("--systems", help="comma-separated systems (default: every one with English and L2 QA exports)")
    r.add_argument("--paragraphs", type=int, help="first N test paragraphs (default: all)")
    r.add_argument("--quiet", action="store_true")
    r.add_argument("--threads", type=int, help="torch and BLAS threads")
    r.set_defaults(handler=run_renderings_cmd)



def _analysis_run(path: str):
    """The run an analysis command reads (refused when the folder is not one)."""
    from pathlib import Path

    from xlviz.errors import XlvizError
    from xlviz.runs import Run

    run = Run(Path(path).expanduser())
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=run.path)
    return run


def _systems(args: argparse.Namespace) -> list[str] | None:
    return [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None


def _stored_or_computed(run, module, params: tuple, quiet: bool) -> tuple[object, str]:
    """A stored analysis table (``module``: ``request``/``find``/``compute``/``write`` over
    ``run`` and ``params``) read back when its request matches, else computed and stored under
    the run's writer lock; and a line saying which."""
    from xlviz.errors import XlvizError
    from xlviz.runs import record_artefacts

    req, _ = module.request(run.path, *params)
    got = module.find(run.path, req)
    if got is not None:
        return got[0], f"read from {got[1]}"
    table = module.compute(run.path, *params, log=None if quiet else print)
    try:
        with run.writer_lock():
            return table, f"written to {module.write(run.path, table, lambda entries: record_artefacts(run, entries))}"
    except XlvizError as e:
        return table, f"not stored ({e})"

def run_renderings_cmd(args: argparse.Namespace) -> int:
    import time

    from xlviz.analysis import counterfactuals as cf
    from xlviz.errors import XlvizError

    _threads(args)
    run = _analysis_run(args.run)
    if args.paragraphs is not None and args.paragraphs < 1:
        raise XlvizError("must be at least 1", field="--paragraphs")
    t0 = time.perf_counter()
    table, how = _stored_or_computed(run, cf, (args.language, _systems(args), args.paragraphs), args.quiet)
    print(cf.format_table(table))
    print(f"{how} ({time.perf_counter() - t0:.1f} s)")
    return 0


def run_patching_cmd(args: argparse.Namespace) -> int:
    import time

    from xlviz.analysis import patching_report as pr
    from xlviz.errors import XlvizError

    _threads(args)
    run = _analysis_run(args.run)
    if args.limit < 1:
        raise XlvizError("must be at least 1", field="--limit")
    t0 = time.perf_counter()
    table, how = _stored_or_computed(run, pr, (args.language, _systems(args), args.limit), args.quiet)
    print(pr.format_table(table["rows"]))
    if args.csv:
        from xlviz.io import atomic_write_text

        atomic_write_text(args.csv, pr.csv_text(table["rows"]))
    print(f"{how} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="masked LM folder or hub id")
    p.add_argument("--tokenizer", help="tokenizer folder when it is not beside the model")
    p.add_argument("--run", help="run folder: its generated world, and its models when --model is not given")


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="write the result as JSON here")
    p.add_argument("--csv", help="write the table as CSV here")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--threads", type=int, help="torch and BLAS threads (1 is often fastest for small models on a "
                   "busy CPU: extra threads spin; default: torch's choice)")


# --------------------------------------------------------------------------- helpers
def _threads(args) -> None:
    n = getattr(args, "threads", None)
    if n:
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(n)
        threadpool_limits(n)


def _progress(args):
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        return None
    last = [""]

    def show(fraction: float, text: str) -> None:
        line = f"\r[{int(fraction * 100):3d}%] {text[:70]:<70}"
        if line != last[0]:
            sys.stderr.write(line)
            sys.stderr.flush()
            last[0] = line
        if fraction >= 1.0:
            sys.stderr.write("\n")

    return show


def _write(args, result: dict, rows: list[dict], items: list[dict] | None = None) -> None:
    from xlviz.io import atomic_write_json

    if args.out:
        atomic_write_json(args.out, result)
    if args.csv:
        write_csv(args.csv, rows)
    if items is not None and getattr(args, "items", None):
        write_csv(args.items, items)


def write_csv(path, rows: list[dict]) -> None:
    """Rows of dicts as CSV (columns in first-seen order; lists joined with ';')."""
    import csv
    import io

    from xlviz.io import atomic_write_text

    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=cols)
    wr.writeheader()
    for r in rows:
        wr.writerow({k: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in r.items()})
    atomic_write_text(path, buf.getvalue())


def format_table(rows: list[dict], cols: list[str], percent: tuple[str, ...] = ()) -> str:
    """A plain-text table; columns in ``percent`` (fractions) are shown as percentages."""
    def cell(r, c):
        v = r.get(c)
        if v is None:
            return "-"
        if c in percent and isinstance(v, (int, float)):
            return f"{100 * v:.1f}"
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v)

    body = [[cell(r, c) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def _probe_models(args, lang: str):
    """[(ProbeModel)] for --model, or the run's models reading ``lang``."""
    from xlviz.analysis.reports import ProbeModel, probed_and_refused, refused_rows, run_info, run_probe_models
    from xlviz.models.reference import ModelSpec
    from xlviz.errors import XlvizError

    if args.model:
        return [ProbeModel(args.model, lang, ModelSpec(args.model, args.tokenizer))]
    if not args.run:
        raise XlvizError("give --model DIR or --run DIR", field="model")
    info = run_info(args.run)
    found = [m for m in run_probe_models(args.run, [] if lang == info.l1 else [lang]) if m.language == lang]
    models, refused = probed_and_refused(found)
    _say_refused(refused_rows(refused))
    return models


def _say_refused(rows: list[dict]) -> None:
    """One line per model built on a degenerate stage: not probed, and why."""
    for r in rows:
        print(f"not probed, DEGENERATE: {r['model']} ({r['language']}) — {r['reason']}")


# --------------------------------------------------------------------------- commands
def run_alignment_cmd(args: argparse.Namespace) -> int:
    from xlviz.analysis.reports import System, alignment_report, parallel_data, run_systems
    from xlviz.models.reference import ModelSpec
    from xlviz.errors import XlvizError

    _threads(args)

    systems, refused = [], []
    if args.run:
        if not args.l2:
            raise XlvizError("give --l2 (the run's target language)", field="l2")
        found = run_systems(args.run, args.l2, floor=args.floor)
        refused = [s for s in found if s.degenerate]  # built on a degenerate stage: no result
        for s in refused:
            print(f"not compared, DEGENERATE: {s.name} — {s.degenerate_reason}")
        systems += [s for s in found if not s.degenerate]
    # a run's L2 is the data's language B (a generated world's invented L2, or e.g. "de" for a corpus run on
    # real data, which can then be compared on --source pud/tatoeba/multi30k too)
    lang_b = args.l2 if (args.source == "world" or args.run) else args.lang_b
    if args.model or args.model_a or args.model_b:
        a = args.model_a or args.model
        b = args.model_b or args.model
        if not a or not b:
            raise XlvizError("give --model (one model for both languages) or both --model-a and --model-b", field="model")
        name = a if a == b else f"{a} + {b}"
        systems.append(System(name, args.lang_a, lang_b or "b", ModelSpec(a, args.tokenizer_a), ModelSpec(b, args.tokenizer_b)))
    if not systems:
        raise XlvizError("nothing to compare: give --run DIR --l2 L2, --model, or --model-a and --model-b"
                         + (" (every system of the run is built on a degenerate stage)" if args.run and refused else ""),
                         field="run")
    data = parallel_data(args.source, run_dir=args.run, l2=args.l2, lang_a=args.lang_a, lang_b=lang_b, limit=args.limit,
                         files=tuple(args.files) if args.files else None)
    rows = alignment_report(systems, data, pooling=args.pooling, center=args.center, train_fraction=args.train_fraction,
                            words=args.words, progress=_progress(args))
    result = {"analysis": "alignment",
              "meta": {"source": data.source, "lang_a": data.lang_a, "lang_b": data.lang_b, "n_pairs": len(data),
                       "pooling": args.pooling, "center": args.center, "train_fraction": args.train_fraction,
                       "systems": [{"name": s.name, "a": s.a.__dict__, "b": s.b.__dict__} for s in systems]},
              "rows": rows,
              "degenerate": [{"system": s.name, "verdict": "degenerate", "degenerate_stages": list(s.degenerate),
                              "reason": s.degenerate_reason} for s in refused] if args.run else []}
    _write(args, result, rows)
    cols = ["system", "layer", "retrieval_a_to_b", "retrieval_b_to_a", "cka"]
    pct = ("retrieval_a_to_b", "retrieval_b_to_a", "retrieval_before", "retrieval_after", "word_translation_a_to_b")
    if args.train_fraction:
        cols += ["retrieval_before", "retrieval_after"]
    if any(r.get("word_translation_a_to_b") is not None for r in rows):
        cols.append("word_translation_a_to_b")
    print(f"{data.source}: {len(data)} pairs, A = {data.lang_a}, B = {data.lang_b}; retrieval/word translation in %")
    print(format_table(rows, cols, pct))
    return 0


def run_agreement_cmd(args: argparse.Namespace) -> int:
    from xlviz.analysis.probing import UNITS, agreement_accuracy
    from xlviz.analysis.reports import agreement_data, agreement_rows
    from xlviz.errors import XlvizError
    from xlviz.models.reference import load_spec

    if args.unit not in UNITS:
        raise XlvizError(f"unknown unit {args.unit!r}; use one of {', '.join(UNITS)}", field="--unit")
    if args.max_per_category is not None and args.max_per_category < 1:
        raise XlvizError("must be at least 1", field="--max-per-category")
    if args.run_dir is not None:
        return store_agreement_cmd(args)
    if args.systems:
        raise XlvizError("--systems picks a run's rows to store: give the run folder first (xlviz analyse agreement RUN)",
                         field="--systems")
    _threads(args)

    args.data = args.data or "marvin-linzen"
    lang, pairs = agreement_data(args.data, run_dir=args.run, max_per_category=args.max_per_category, path=args.ml_file)
    rows, all_items, results = [], [], {}
    progress = _progress(args)
    for m in _probe_models(args, lang):
        model, tok = load_spec(m.spec, "mlm")
        res = agreement_accuracy(model, tok, pairs, unit=args.unit,
                                 progress=None if progress is None else (lambda d, t, m=m: progress(d / max(t, 1), m.name)))
        rows += agreement_rows(m.name, lang, res, m.role, args.data)
        all_items += [{"model": m.name, "language": lang, **it} for it in res["items"]]
        results[m.name] = {k: v for k, v in res.items() if k != "items"}
    result = {"analysis": "agreement", "meta": {"data": args.data, "language": lang, "unit": args.unit,
                                               "n_pairs": len(pairs)}, "rows": rows, "items": all_items}
    _write(args, result, rows, all_items)
    print(f"agreement on {args.data} ({lang}), {len(pairs)} pairs; accuracy and coverage in %")
    print(format_table(rows, ["model", "category", "accuracy", "n_scored", "n_total", "coverage"], ("accuracy", "coverage")))
    return 0


def store_agreement_cmd(args: argparse.Namespace) -> int:
    """``xlviz analyse agreement RUN``: the Probing page's first view of the run, stored in it."""
    import time

    from xlviz.errors import XlvizError

    given = [flag for flag, v in (("--model", args.model), ("--tokenizer", args.tokenizer), ("--run", args.run),
                                  ("--data", args.data), ("--ml-file", args.ml_file), ("--items", args.items)) if v]
    if given:
        raise XlvizError(f"stores the run's own rows on its world pairs; {given[0]} belongs to the form without RUN",
                         field=given[0])
    _threads(args)
    run = _analysis_run(args.run_dir)
    t0 = time.perf_counter()
    rows, how, _ = store_probing(run, max_per_category=args.max_per_category, unit=args.unit, systems=_systems(args),
                              log=None if args.quiet else print)
    table = [{"model": r.model.name, "language": r.model.language, "accuracy": r.result["accuracy"],
              "n_scored": r.result["n_scored"], "n_total": r.result["n_total"], "coverage": r.result["coverage"], "result": r.how}
             for r in rows]
    if not args.quiet:
        print(f"agreement on the generated world, {args.unit} unit; accuracy and coverage in %")
        print(format_table(table, ["model", "language", "accuracy", "n_scored", "n_total", "coverage", "result"],
                           ("accuracy", "coverage")))
    if args.out or args.csv:
        from xlviz.analysis.reports import agreement_rows

        grid = [g for r in rows for g in agreement_rows(r.model.name, r.model.language, r.result, r.model.role, r.data)]
        _write(args, {"analysis": "agreement", "meta": {"run": str(run.path), "unit": args.unit,
                                                        "max_per_category": args.max_per_category}, "rows": grid}, grid)
    print(f"{how} ({time.perf_counter() - t0:.1f} s)")
    return 0


def store_probing(run, *, max_per_category: int | None = None, unit: str | None = None, systems: list[str] | None = None,
                  log=None, locked: bool = False) -> tuple[list, str, bool]:
    """The agreement results of the Probing page's first view of ``run`` (:class:`xlviz.runs.Run`),
    computed where not stored and written as the run's writer (its lock taken unless ``locked``:
    the caller holds it, as ``xlviz demo`` does); a line saying what was stored where; and
    whether every row is now stored."""
    from xlviz.analysis.agreement_store import PAIRS_PER_CATEGORY, UNIT
    from xlviz.errors import XlvizError
    from xlviz.runs import record_artefacts
    from xlviz.views.probing import agreement_results, store_agreement

    rows = agreement_results(run.path, max_per_category=PAIRS_PER_CATEGORY if max_per_category is None else max_per_category,
                             unit=unit or UNIT, systems=systems, log=log)
    computed = sum(r.how == "computed" for r in rows)
    if not computed:
        return rows, f"all {len(rows)} rows' agreement results were already stored in {run.path / 'analyses'}", True

    def write() -> list:
        return store_agreement(run.path, rows, lambda entries: record_artefacts(run, entries))

    try:
        if locked:
            written = write()
        else:
            with run.writer_lock():
                written = write()
    except XlvizError as e:
        return rows, f"agreement results computed, not stored ({e})", False
    return rows, (f"agreement results of {len(written)} row(s) written to {run.path / 'analyses'}"
                  + (f" ({len(rows) - computed} already stored)" if len(rows) > computed else "")), True


def run_wic_cmd(args: argparse.Namespace) -> int:
    from xlviz.analysis.probing import word_in_context
    from xlviz.analysis.reports import sense_data, wic_rows
    from xlviz.models.reference import load_spec
    from xlviz.errors import XlvizError

    _threads(args)

    if not args.data.startswith("world:"):
        raise XlvizError("word-in-context pairs come from a run's generated world: --data world:LANG", field="data")
    if not args.run:
        raise XlvizError("give --run DIR (the run whose generated world holds the sense pairs)", field="run")
    lang = args.data.split(":", 1)[1]
    pairs = sense_data(args.run, lang, args.limit)
    rows, items = [], []
    progress = _progress(args)
    for m in _probe_models(args, lang):
        model, tok = load_spec(m.spec, "base")
        res = word_in_context(model, tok, pairs, folds=args.folds, test_fraction=args.test_fraction,
                              progress=None if progress is None else (lambda d, t, m=m: progress(d / max(t, 1), m.name)))
        rows += wic_rows(m.name, lang, res, m.role)
        items += [{"model": m.name, "language": lang, **it} for it in res["items"]]
    result = {"analysis": "wic", "meta": {"data": args.data, "language": lang, "n_pairs": len(pairs),
                                         "gold_similarity": "binary: same sense = 1, different sense = 0"},
              "rows": rows, "items": items}
    _write(args, result, rows, items)
    print(f"word in context on {args.data}: {len(pairs)} pairs; gold similarity is binary (same sense = 1, different = 0)")
    print(format_table(rows, ["model", "layer", "accuracy", "majority", "spearman", "auc"], ("accuracy", "majority")))
    return 0


def run_probing_cmd(args: argparse.Namespace) -> int:
    from xlviz.analysis.reports import run_probing

    _threads(args)

    l2s = [s.strip() for s in args.l2.split(",") if s.strip()] if args.l2 else None
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    res = run_probing(args.run, l2s, tasks=tasks, max_per_category=args.max_per_category, n_senses=args.limit,
                      floor=args.floor, progress=_progress(args))
    rows = [{"task": "agreement", **r} for r in res["agreement"]] + [{"task": "wic", **r} for r in res["wic"]]
    _write(args, {"analysis": "probing", **res}, rows)
    if res["agreement"]:
        print("agreement (generated world); accuracy and coverage in %")
        print(format_table(res["agreement"], ["model", "language", "category", "accuracy", "n_scored", "coverage"],
                           ("accuracy", "coverage")))
    if res["wic"]:
        print("word in context (generated world); accuracy in %, gold similarity binary")
        print(format_table(res["wic"], ["model", "language", "layer", "accuracy", "majority", "spearman"], ("accuracy", "majority")))
    _say_refused(res["degenerate"])
    if res.get("wic_skipped"):
        print("word in context not run (same sense = same word in that language, so it would test word identity): "
              + ", ".join(res["wic_skipped"]))
    print(res["meta"]["note"])
    return 0


def run_encodings_cmd(args: argparse.Namespace) -> int:
    from pathlib import Path

    from xlviz.analysis.encodings import write_run_encodings
    from xlviz.errors import XlvizError
    from xlviz.runs import Run, record_artefacts

    _threads(args)

    run = Run(Path(args.run).expanduser())
    if not run.exists():  # before the lock, which would make the folder
        raise XlvizError("not a run folder (no config.json)", path=run.path)
    l2s = [s.strip() for s in args.l2.split(",") if s.strip()] if args.l2 else None
    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    say = None if args.quiet else print
    with run.writer_lock():  # the run's only writer meanwhile (its manifest); refused while the run itself writes
        written = write_run_encodings(run.path, lambda entries: record_artefacts(run, entries), l2s=l2s, systems=systems,
                                      log=say)
    if say:
        say(f"{len(written)} file(s) of encodings written to {run.path / 'encodings'}" if written
            else "every encoding was already stored")
    return 0
