"""Runs page logic without Streamlit: run summaries, progress and time left, loss curves,
the transfer command line from the form, and the cross-run comparison of results."""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from xlviz import jobs
from xlviz.errors import XlvizError
from xlviz.data.typology import PRESETS, parse_languages
from xlviz.methods import method_of, methods, resolve
from xlviz.names import check_code
from xlviz.runs import Run
from xlviz.training.verdicts import DEGENERATE, dead, is_degenerate, live
from xlviz.views.choices import config_value
from xlviz.views.forms import FORM_BUDGET, check_sizes, form_class, form_flags
from xlviz.views.figures import legend_below

MODEL_SIZES = ("tiny", "small", "medium")
L2_LANGUAGES = tuple(PRESETS)  # the grammar presets (xlviz.data.typology); each its own L2 code


def system_options() -> dict[str, str]:
    """Every system of the method registry, with a one-line description (the Runs form's choices)."""
    out = {}
    for m in methods().values():
        for system in m.default_systems(every=True):
            out[system] = m.describe(system)
        for group, members in m.sweeps().items():
            out[group] = f"{m.describe(members[0])}: {', '.join(members)}"
    return out


def source_options() -> dict[str, str]:
    """Every data source of the registry (:mod:`xlviz.data.sources`), with its description (the Runs form's choices)."""
    from xlviz.data.sources import sources

    return {s.name: s.description for s in sources().values()}


def method_option_fields() -> dict[str, list]:
    """Each method's options (:mod:`xlviz.methods.options`) by method name, for the form's
    "Method options": the fields of the dataclasses the CLI's flags come from."""
    from xlviz.methods.options import option_fields

    return {m.name: option_fields(m.options, m.name) for m in methods().values() if m.options is not None}


def option_widget(opt) -> str:
    """The form's widget for one option, by its type: checkbox, select (choices), text, integer or number."""
    if opt.type is bool:
        return "checkbox"
    if opt.type is str:
        return "select" if opt.choices else "text"
    return "integer" if opt.type is int else "number"


def option_step(opt) -> float:
    """The +/- step of a number option's input: a tenth of its default's order of magnitude."""
    d = abs(float(opt.default))
    return 10.0 ** (math.floor(math.log10(d)) - 1) if d > 0 else 0.01


def option_arg(value) -> str:
    """An option's value as its CLI flag reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def describe(system: str) -> str:
    try:
        return method_of(system).describe(system)
    except XlvizError:
        return system_options().get(system, system)


# The settings the Runs form shows, in its command line's order: the world's apply to the
# generated world only, and the world is the default source (no --source for it).
RUN_FORM = ("seed", "source", "languages", "corpus_documents", "qa_train_paragraphs", "qa_test_paragraphs", "model_size",
            "pretrain_steps", "transfer_steps", "finetune_steps", "methods", "batch_size", "mlm_batch_size", "workers")


class _TransferForm:
    """What the Runs page's form collects: the settings of :data:`RUN_FORM`, starting from the
    forms' small budget (:data:`xlviz.views.forms.FORM_BUDGET`: they finish in a few minutes on a
    laptop CPU; the paper-like sizes are the CLI's) and one target language, and the method
    options set in the form (``options``: name -> value; the others keep their defaults)."""

    def changed_options(self) -> list:
        """``(option, value)`` for the method options set to another value than their default, in registry order."""
        return [(f, self.options[f.name]) for opts in method_option_fields().values() for f in opts
                if f.name in self.options and self.options[f.name] != f.default]

    def validate(self) -> None:
        if self.source == "world" and not self.languages:
            raise XlvizError("pick at least one target language", field="languages")
        if self.model_size not in MODEL_SIZES:
            raise XlvizError(f"model size must be one of {', '.join(MODEL_SIZES)}", field="model_size")
        check_sizes(self, RUN_FORM)  # the documented ranges (docs/reliability.md)
        if not 0 <= int(self.workers) <= 64:
            raise XlvizError("must be between 0 (one per core) and 64", field="workers")
        for entry in self.languages if self.source == "world" else ():  # a preset, or code:grammar[:script] (e.g. x:tr+determiner=before)
            if "," in entry:
                raise XlvizError(f"one language per entry, got {entry!r}", field="languages")
            check_code(parse_languages(entry)[0]["code"], field="languages")
        if not self.methods:
            raise XlvizError("pick at least one system", field="methods")
        resolve(list(self.methods))  # every name in the registry, else one line naming it
        if self.source not in source_options():
            raise XlvizError(f"unknown data source {self.source!r}; choose from {list(source_options())}", field="source")
        known = {f.name: f for opts in method_option_fields().values() for f in opts}
        for name, value in self.options.items():
            if name not in known:
                raise XlvizError(f"unknown method option; choose from {sorted(known)}", field=name)
            known[name].check(value)  # the method's own rule: one line naming the option

    def argv(self, run_dir: str | Path) -> list[str]:
        """``xlviz transfer`` arguments for this form (without the program name): each setting's
        generated flag (the world's on the world only, ``--source`` for another source)."""
        self.validate()
        run_dir = Path(run_dir)
        world = self.source == "world"
        flags = [a for s, value in form_flags(self, RUN_FORM)
                 if not (s.path.startswith("world.") and not world or s.name == "source" and world) for a in (s.flag, value)]
        return ["transfer", "--run-dir", str(run_dir), "--name", run_dir.name, *flags,
                *[a for opt, value in self.changed_options() for a in (opt.flag, option_arg(value))]]


TransferForm = form_class("TransferForm", _TransferForm, RUN_FORM, {**FORM_BUDGET, "languages": ("sov",)},
                          extra=(("options", dict, field(default_factory=dict)),))


def parse_form(form, root: str | Path, name: str, *, command: str, thing: str, taken: str):
    """The Runs and Sweeps forms' shared checks before anything is created: the form's ranges,
    the name (:func:`xlviz.names.check_name`, the CLI's own rule; ``taken`` names what an
    existing folder is) and the arguments through the CLI's own parser. Returns ``(args, name)``."""
    from xlviz.cli import build_parser
    from xlviz.names import check_name, check_run_dir

    form.validate()
    root = Path(root)
    name = name.strip()
    if name:
        check_name(name, field="name", what=f"{thing} name")
        if check_run_dir(root / name, root).exists():
            raise XlvizError(f"a {taken} named {name!r} already exists; pick another name", field="name")
    try:
        args = build_parser().parse_args(form.argv(root / (name or command)))
    except SystemExit:
        raise XlvizError(f"the form's settings are not valid xlviz {command} arguments", field="form") from None
    return args, name


def prepare_run(form: TransferForm, root: str | Path, name: str = "") -> tuple[Path, list[str]]:
    """The run folder and ``xlviz transfer`` arguments for the Runs form, after every check the
    CLI will make: the form's ranges, the run name (:func:`xlviz.names.check_name`, the CLI's
    own rule) and the whole config as the CLI builds it from these arguments. Why: the form
    said "Started" for a name the CLI then refused, leaving a failed folder behind. Nothing is
    created unless everything passes; then a fresh folder for an unnamed run."""
    from xlviz.commands.transfer import build_config
    from xlviz.runs import new_run_path

    root = Path(root)
    args, name = parse_form(form, root, name, command="transfer", thing="run", taken="run")
    build_config(args)  # the CLI's validation of the whole config: one line naming the field
    run_dir = root / name if name else new_run_path(root, "transfer")
    return run_dir, form.argv(run_dir)


def _parse_time(value) -> _dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _number(value: object) -> float | None:
    """``value`` as a finite float if it is a JSON number (not a boolean), else None: a
    status.json edited by hand or by another tool must not break the page."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def progress_problem(status: dict) -> str | None:
    """What in ``status["progress"]`` is not a number and so cannot be drawn, else None."""
    p = status.get("progress")
    if p is None:
        return None
    if isinstance(p, dict):
        for key in ("fraction", "step", "done", "total"):
            if key in p and _number(p[key]) is None:
                return f"field 'progress.{key}' must be a number, got {str(p[key])[:40]}"
        return None
    return None if _number(p) is not None else f"field 'progress' must be a number or an object, got {str(p)[:40]}"


def _progress_fraction(status: dict) -> float | None:
    """Overall progress 0..1: finished stages plus the current stage's step fraction.

    ``status["progress"]`` is the training loop's ``{"stage", "step", "total"}`` (or a plain
    number); ``stage_index`` / ``n_stages`` place the current stage in the plan.
    """
    p = status.get("progress")
    inner = None
    if isinstance(p, dict):
        if "fraction" in p:
            inner = _number(p["fraction"])
        elif (total := _number(p.get("total"))) and (p.get("stage") in (None, status.get("stage"))):
            step = _number(p.get("step", p.get("done", 0)))
            inner = None if step is None else step / total
    elif _number(p) is not None:
        inner = float(p) / 100.0 if 1.0 < float(p) <= 100.0 else float(p)
        if "n_stages" not in status:
            return min(max(inner, 0.0), 1.0)
    n, i = status.get("n_stages"), status.get("stage_index")
    if isinstance(n, int) and n > 0 and isinstance(i, int):
        done = len(status.get("stages_done") or [])
        base = max(i, done) if status.get("stage") else done
        return min(max((base + (inner or 0.0)) / n, 0.0), 1.0)
    return None if inner is None else min(max(inner, 0.0), 1.0)


@dataclass
class Progress:
    fraction: float | None
    elapsed_s: float | None
    left_s: float | None
    stage: str | None
    text: str
    problem: str | None = None  # status.json's progress could not be read (shown, not raised)


def stage_text(status: dict, state: str | None) -> str:
    """The stage a run is in; "a + b" while it trains several at once (``workers``)."""
    running = status.get("running") if state == "running" else None
    if isinstance(running, list) and running and all(isinstance(s, str) for s in running):
        return " + ".join(running)
    stage = status.get("stage")
    return stage if isinstance(stage, str) else ""


def run_progress(run: Run, state: str | None = None, now: _dt.datetime | None = None) -> Progress:
    """Overall progress, elapsed time and an estimate of the time left (linear in progress)."""
    try:
        status = run.status()
    except XlvizError:
        status = {}
    state = state or status.get("state", "pending")
    now = now or _dt.datetime.now(_dt.timezone.utc)
    frac = _progress_fraction(status)
    if state == "completed":
        frac = 1.0
    job = None
    started = _parse_time(status.get("started") or status.get("started_at") or status.get("created"))
    if started is None:
        job = jobs.job_info(run.path) or {}
        started = _parse_time(job.get("started"))
    # the clock stops when the run does: a cancelled, failed or stopped run's elapsed time is up to its
    # last record (a run cancelled before it wrote a status has only job.json's "cancelled" time)
    end = now if state in ("running", "starting") else _parse_time(
        status.get("finished") or status.get("ended") or status.get("updated"))
    if end is None and state not in ("running", "starting"):
        job = job if job is not None else (jobs.job_info(run.path) or {})
        end = _parse_time(job.get("cancelled") or job.get("ended"))
    elapsed = (end - started).total_seconds() if started and end else None
    left = None
    if state == "running" and frac and frac > 0.01 and elapsed is not None:
        left = elapsed * (1.0 - frac) / frac
    stage = status.get("stage")
    bits = [state]
    if text := stage_text(status, state):
        bits.append(f"stage{'s' * (' + ' in text)} {text}")
    if frac is not None:
        bits.append(f"{100 * frac:.0f}%")
    if elapsed is not None:
        bits.append(f"{format_duration(elapsed)} elapsed")
    if left is not None:
        bits.append(f"about {format_duration(left)} left")
    problem = progress_problem(status)
    return Progress(frac, elapsed, left, stage, " · ".join(bits),
                    f"{run.status_path}: {problem}" if problem else None)


def format_duration(seconds: float) -> str:
    seconds = int(round(max(seconds, 0)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s:02d}s"
    return f"{s}s"


def _short(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(_short(v) if not isinstance(v, dict) else str(v.get("code", v)) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    return str(value)


def run_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: state, stage, the config that matters and its best L2 F1, zero-shot and
    translate-train apart."""
    rows = []
    for run in runs:
        try:
            cfg = run.config()
        except XlvizError:
            cfg = {}
        # a folder the app started whose job has not (or never) written its config is no
        # unreadable run: it is starting, cancelled or failed, and can be resumed or deleted
        problem = run.unreadable() if run.exists() else None
        state = f"unreadable: {problem}" if problem else jobs.effective_state(run.path)
        try:
            tags = ", ".join(run.notes()["tags"])
        except XlvizError:
            tags = "unreadable notes.json"
        try:
            status = run.status()
        except XlvizError:
            status = {}
        try:
            results = run.results()
        except XlvizError:
            results = []
        steps = config_value(cfg, "steps")
        row = {
            "run": run.name,
            "state": state,
            "stage": stage_text(status, state),
            "languages": _short(config_value(cfg, "languages")),
            "model size": _short(config_value(cfg, "model_size", "size")),
            "steps": _short(steps) if steps is not None else "/".join(
                _short(config_value(cfg, k)) for k in ("pretrain_steps", "transfer_steps", "finetune_steps")
            ).strip("/"),
            "systems": _short(config_value(cfg, "methods", "variants")),
            "seed": _short(config_value(cfg, "seed")),
            "results": len(results),
            # never one number over both settings: a translate-train row is not a zero-shot result
            "best L2 F1, zero-shot": _best_l2_f1(results, l1_language(run), l2_labels=False),
            "best L2 F1, L2 labels": _best_l2_f1(results, l1_language(run), l2_labels=True),
            "best L2 F1, translate-test": _best_l2_f1(results, l1_language(run), l2_labels=True, setting=TRANSLATE_TEST),
            "tags": tags,
            # rows of degenerate stages are no result: counted here, never in the best F1
            "degenerate rows": sum(1 for r in results if is_degenerate(r)),
            "updated": status.get("updated", ""),
        }
        rows.append(row)
    return pd.DataFrame(rows)


ZERO_SHOT = "zero-shot"
TRANSLATE_TRAIN = "translate-train (L2 labels)"
TRANSLATE_TEST = "translate-test (gold L1 translation at test time)"
SETTINGS = (ZERO_SHOT, TRANSLATE_TRAIN, TRANSLATE_TEST)
SETTING_NOTES = {ZERO_SHOT: "QA labels in L1 only", TRANSLATE_TRAIN: "trained on QA labels in the L2: a ceiling, not a transfer result",
                 TRANSLATE_TEST: "reads each L2 test context with its gold L1 translation: comparable with neither other setting"}
CI_COLUMNS = ["exact_match_ci_low", "exact_match_ci_high", "f1_ci_low", "f1_ci_high", "n_paragraphs", "n_questions"]
RESULT_COLUMNS = ["run", "setting", "system", "language", "exact_match", "f1", "parallel_pairs", "resources", "l1_f1", "l1", "verdict",
                  *CI_COLUMNS]


def with_degenerate(table: pd.DataFrame, cells: list[tuple[object, str]]) -> pd.DataFrame:
    """``table`` with the given (index, column) cells reading "degenerate" instead of a
    number: a row that depends on a degenerate stage is no result (xlviz.training.verdicts).
    The columns touched become text (one decimal, n/a left empty)."""
    if not cells:
        return table
    out = table.copy()
    for col in dict.fromkeys(c for _, c in cells):
        if col in out:
            out[col] = pd.Series([None if v is None or (isinstance(v, float) and pd.isna(v)) else
                                  f"{v:.1f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
                                  for v in out[col].tolist()], index=out.index, dtype=object)
    for idx, col in cells:
        if col in out:
            out.at[idx, col] = DEGENERATE
    return out


def setting_of(row: dict) -> str:
    """A result row's setting label: zero-shot (QA labels in L1 only), translate-train (it saw
    QA labels in an L2) or translate-test (it reads the test context's gold translation), as
    the row (or, for rows written before rows carried it, its method) declares."""
    from xlviz.methods import row_setting

    return SETTINGS[("zero-shot", "translate-train", "translate-test").index(row_setting(row))]


def resources_of(row: dict) -> str:
    """A result row's short resources label (``pairs 2k · dict 132 gold``): what its system read
    beyond L1 QA labels, as the row records it (derived for rows written before they did, "not
    recorded" when nothing says)."""
    from xlviz.methods import resources_label, row_resources

    return resources_label(row_resources(row))


def combine_labels(labels) -> str:
    """One resources label for several rows (:func:`xlviz.methods.combine_labels`)."""
    from xlviz.methods import combine_labels as combine

    return combine(list(labels))


def with_interval(value, low, high) -> str:
    """``61.2 [55.0, 67.1]``: a score with its interval (``61.2`` alone when it has none)."""
    if not isinstance(value, (int, float)) or pd.isna(value):
        return ""
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and not (pd.isna(low) or pd.isna(high)):
        return f"{value:.1f} [{low:.1f}, {high:.1f}]"
    return f"{value:.1f}"


def is_upper_bound(system: str) -> bool:
    """A system that is an upper bound, not a transfer method (the dictionary oracle copies
    gold translations' L1 rows): its method's description says so."""
    return describe(system).lower().startswith("upper bound")


def _best_l2_f1(results: list[dict], l1: str, *, l2_labels: bool, setting: str | None = None) -> float | None:
    """The best F1 of the run's L2 rows in one setting (None: no such row); upper bounds
    (:func:`is_upper_bound`) are left out: the best *transfer* result, not the oracle's."""
    want = setting or (TRANSLATE_TRAIN if l2_labels else ZERO_SHOT)
    f1s = [float(r["f1"]) for r in results if r.get("language") != l1 and isinstance(r.get("f1"), (int, float))
           and setting_of(r) == want and not is_degenerate(r)  # a degenerate row is no result
           and not is_upper_bound(str(r.get("system")))]
    return max(f1s, default=None)


def results_frame(runs: list[Run]) -> pd.DataFrame:
    """Long table of results rows of several runs: run, setting (zero-shot, translate-train or
    translate-test), system, language, exact_match, f1, the parallel pairs the system trained
    on, what it read beyond L1 labels (``resources``: :func:`resources_of`), a pair model's own
    L1 F1 (``l1_f1``), the run's L1 and the rows' 95% paragraph-bootstrap intervals (None for
    rows written before rows carried them)."""
    rows = []
    for run in runs:
        try:
            results = run.results()
        except XlvizError:
            continue
        l1 = l1_language(run)
        for r in results:
            pairs = r.get("parallel_pairs")
            rows.append({"run": run.name, "setting": setting_of(r), "system": r.get("system"), "language": r.get("language"),
                         "exact_match": r.get("exact_match"), "f1": r.get("f1"),
                         "parallel_pairs": int(pairs) if isinstance(pairs, (int, float)) else 0, "resources": resources_of(r),
                         "l1_f1": r.get("l1_f1"), "l1": l1, "verdict": DEGENERATE if is_degenerate(r) else None,
                         **{k: r.get(k) if isinstance(r.get(k), (int, float)) else None for k in CI_COLUMNS}})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def results_by_setting(table: pd.DataFrame, languages: list[str],
                       metrics: tuple[str, ...] = ("f1",)) -> list[tuple[str, pd.DataFrame]]:
    """One run's results as (setting, system × language table) pairs, one per setting present:
    each cell a score with its 95% paragraph-bootstrap interval (``61.2 [55.0, 67.1]``), the
    parallel pairs each system trained on first. Settings are never mixed in one table. One
    metric: a column per language; several (``("exact_match", "f1")``): ``<lang> · EM``,
    ``<lang> · F1`` side by side per language."""
    out = []
    names = {"exact_match": "EM", "f1": "F1"}
    for setting in SETTINGS:
        sub = table[table["setting"] == setting]
        if sub.empty:
            continue
        parts = []
        bad = sub["verdict"] == DEGENERATE if "verdict" in sub else pd.Series(False, index=sub.index)
        for metric in metrics:
            lo, hi = (sub[c] if c in sub else pd.Series([None] * len(sub), index=sub.index)
                      for c in (f"{metric}_ci_low", f"{metric}_ci_high"))
            # a row that depends on a degenerate stage is no result: "degenerate", not its number
            cells = sub.assign(cell=[DEGENERATE if x else with_interval(v, a, b) for v, a, b, x in zip(sub[metric], lo, hi, bad)])
            part = cells.pivot_table(index="system", columns="language", values="cell", aggfunc="first")
            part = part.reindex(index=list(dict.fromkeys(sub["system"])),
                                columns=[l for l in languages if l in part.columns] + [l for l in part.columns if l not in languages])
            if len(metrics) > 1:
                part.columns = [f"{l} · {names[metric]}" for l in part.columns]
            parts.append(part)
        wide = parts[0] if len(parts) == 1 else pd.concat(parts, axis=1)
        if len(parts) > 1:  # EM and F1 of a language next to each other
            langs = list(dict.fromkeys(c.rsplit(" · ", 1)[0] for p in parts for c in p.columns))
            wide = wide[[f"{l} · {names[m]}" for l in langs for m in metrics if f"{l} · {names[m]}" in wide.columns]]
        wide.insert(0, "parallel pairs", sub.groupby("system")["parallel_pairs"].max().reindex(wide.index).astype(int))
        if "resources" in sub:  # what each row read beyond L1 labels: rows of different resources are marked, not hidden
            wide.insert(0, "resources", sub.groupby("system")["resources"].agg(combine_labels).reindex(wide.index))
        wide.columns.name = None
        out.append((setting, wide))
    return out


def interval_caption(table: pd.DataFrame) -> str:
    """What the intervals of one run's table are (method, paragraphs, questions) and "1 seed"."""
    n = table["n_paragraphs"].dropna() if "n_paragraphs" in table else pd.Series(dtype=float)
    q = table["n_questions"].dropna() if "n_questions" in table else pd.Series(dtype=float)
    if n.empty:
        return "No intervals: this run's results were written before rows carried them (`xlviz report` computes them). 1 seed."
    span = (lambda s: f"{int(s.min())}" if s.min() == s.max() else f"{int(s.min())}-{int(s.max())}")
    return (f"[low, high]: 95% paragraph bootstrap (whole test paragraphs resampled; {span(n)} paragraphs, {span(q)} "
            "questions per language). 1 seed: the spread over training seeds is not in these intervals.")


def compare_table(long: pd.DataFrame) -> pd.DataFrame:
    """(setting, run, system) × (metric, language): EM and F1 side by side like the paper's
    tables, zero-shot rows first, then translate-train (never mixed in one row), with the
    parallel pairs each system trained on and its F1 L2/L1 ratio."""
    if long.empty:
        return pd.DataFrame()
    if "setting" not in long:
        long = long.assign(setting=ZERO_SHOT)
    keys = ["setting", "run", "system"]
    wide = long.pivot_table(index=keys, columns="language", values=["exact_match", "f1"], aggfunc="mean")
    wide = wide.rename(columns={"exact_match": "EM", "f1": "F1"}, level=0)
    wide.columns = [f"{metric} {lang}" for metric, lang in wide.columns]
    wide = wide.round(1).reset_index()
    order = {s: i for i, s in enumerate(SETTINGS)}
    wide = wide.sort_values("setting", key=lambda c: c.map(lambda v: order.get(v, len(order))), kind="stable")
    # rows of degenerate stages: no number, no ratio (blanked here, labelled at the end)
    degenerate: list[tuple[object, str]] = []
    if "verdict" in long:
        for _, bad in long[long["verdict"] == DEGENERATE].iterrows():
            match = wide.index[(wide["setting"] == bad["setting"]) & (wide["run"] == bad["run"]) & (wide["system"] == bad["system"])]
            for idx in match:
                for metric in ("EM", "F1"):
                    wide.loc[idx, f"{metric} {bad['language']}"] = float("nan")
                    degenerate.append((idx, f"{metric} {bad['language']}"))
    if "f1_ci_low" in long:  # every score beside its 95% interval (one run's paragraph bootstrap)
        cis = {tuple(r[k] for k in keys + ["language"]): r for r in long.to_dict("records")}
        for metric, name in (("exact_match", "EM"), ("f1", "F1")):
            for lang in dict.fromkeys(long["language"]):
                col = f"{name} {lang}"
                if col not in wide:
                    continue
                cells = []
                for _, row in wide.iterrows():
                    r = cis.get(tuple(row[k] for k in keys) + (lang,))
                    cells.append("" if r is None else DEGENERATE if r.get("verdict") == DEGENERATE
                                 else with_interval(r[metric], r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]))
                wide.insert(wide.columns.get_loc(col) + 1, f"{col} [95% CI]", cells)
    if "parallel_pairs" in long:
        pairs = long.groupby(keys)["parallel_pairs"].max()
        wide.insert(3, "parallel pairs", [int(pairs.get(tuple(r[k] for k in keys), 0)) for _, r in wide.iterrows()])
    if "resources" in long:
        labels = long.groupby(keys)["resources"].agg(combine_labels)
        wide.insert(3, "resources", [labels.get(tuple(r[k] for k in keys), "not recorded") for _, r in wide.iterrows()])
    # L2/L1: how much of its L1 score a system keeps in each L2 (the paper's transfer ratio),
    # against the same run and system's L1 F1, or a pair model's own L1 F1 (``l1_f1``)
    if "l1" in long:
        own = long.set_index(keys + ["language"])["l1_f1"] if "l1_f1" in long else None
        l1_of = long.groupby("run")["l1"].first()
        for lang in [l for l in dict.fromkeys(long["language"]) if l not in set(long["l1"])]:
            ratio = []
            for _, row in wide.iterrows():
                num, den = row.get(f"F1 {lang}"), row.get(f"F1 {l1_of.get(row['run'])}")
                if own is not None:
                    mine = own.get(tuple(row[k] for k in keys) + (lang,))
                    den = mine if isinstance(mine, (int, float)) and pd.notna(mine) else den
                ratio.append(round(num / den, 2) if pd.notna(num) and pd.notna(den) and den else None)
            # a ratio (0.94), as the sweep page, `xlviz report` and the docs write it; not a percentage
            wide[f"F1 {lang}/L1"] = pd.array(ratio, dtype="Float64").astype(float)
    if "verdict" in long:  # which languages of a row are no result (tables and exports keep the row, and say so)
        per_row: dict[tuple, list[str]] = {}
        for r in dead(long).to_dict("records"):
            per_row.setdefault(tuple(r[k] for k in keys), []).append(str(r["language"]))
        wide["verdict"] = [f"{DEGENERATE}: {', '.join(per_row[t])}" if (t := tuple(row[k] for k in keys)) in per_row
                           else "ok" for _, row in wide.iterrows()]
    return with_degenerate(wide, degenerate).reset_index(drop=True)


CSV_FIELDS = ("metric", "setting")


def compare_figure(long: pd.DataFrame, colours: dict[str, str] | None = None):
    """Grouped bars: language on x, one bar per run · system, EM and F1 side by side; colour =
    system (the app-wide colour, :mod:`xlviz.views.colours`), pattern = run; zero-shot and
    translate-train rows in separate panels."""
    import plotly.express as px

    from xlviz.views.colours import colour_map

    from xlviz.views.text import plot_text

    ids = ["run", "system", "language"] + (["setting"] if "setting" in long else [])
    gone = dead(long)  # a degenerate row is no result: no bar; the chart's CSV lists it with its verdict
    long = live(long)
    df = long.melt(id_vars=ids, value_vars=["exact_match", "f1"], var_name="metric", value_name="score")
    df["metric"] = df["metric"].map({"exact_match": "EM", "f1": "F1"})
    for col in ("run", "system", "language"):  # names from results.json and folder names: plotly renders <a href>
        df[col] = df[col].map(plot_text)
    colours = {**colour_map(df["system"]), **{plot_text(k): v for k, v in (colours or {}).items()}}
    two = "setting" in df and df["setting"].nunique() > 1
    fig = px.bar(df, x="language", y="score", color="system", pattern_shape="run", barmode="group", facet_col="metric",
                 facet_row="setting" if two else None, range_y=[0, 100], labels={"score": "score (%)", "setting": ""},
                 color_discrete_map=colours, hover_data=["run"], custom_data=CSV_FIELDS[:1 + ("setting" in df)],
                 category_orders={"setting": list(SETTINGS)} if two else None)
    # the CSV export (xlviz.views.export.figure_frame) reads these per bar: EM and F1 apart; and the
    # rows left out, each with its verdict
    left_out = [{"trace": f"{r['system']}, {r['run']}", "x": r["language"], "y": None, "metric": m,
                 **({"setting": r["setting"]} if "setting" in gone else {}), "verdict": DEGENERATE}
                for r in gone.to_dict("records") for m in ("EM", "F1")]
    fig.update_layout(meta={"customdata": list(CSV_FIELDS[:1 + ("setting" in df)]), "left_out": left_out})
    fig.update_layout(margin=dict(l=10, r=40, t=40))
    legend_below(fig, [t.name for t in fig.data if t.showlegend is not False], height=380 * (2 if two else 1))
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))  # "EM", not "metric=EM"
    return fig


def with_attempts(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (stage, step, ...) with an ``attempt`` column: a stage's step count going back
    (a resumed run restarts the stage it was cancelled in) starts a new attempt, so a curve
    never joins the end of one attempt to the start of the next."""
    df = df.reset_index(drop=True).copy()
    attempt = []
    last: dict = {}
    count: dict = {}
    for stage, step in zip(df["stage"], df["step"]):
        if stage in last and step <= last[stage]:
            count[stage] = count.get(stage, 0) + 1
        last[stage] = step
        attempt.append(count.get(stage, 0))
    df["attempt"] = attempt
    df["trace"] = df["stage"].astype(str) + " #" + df["attempt"].astype(str)
    return df


def loss_figure(metrics: list[dict]):
    """Loss against step, one panel per stage (stages restart their step count); each attempt
    of a resumed stage is its own line."""
    import plotly.express as px

    df = pd.DataFrame([m for m in metrics if "loss" in m and "step" in m and "stage" in m])
    if df.empty:
        return None
    from xlviz.views.text import plot_text

    df["stage"] = df["stage"].map(plot_text)  # stage names from metrics.jsonl: plotly renders <a href>
    df = with_attempts(df)
    stages = list(dict.fromkeys(df["stage"]))
    wrap = min(3, len(stages))
    rows = (len(stages) + wrap - 1) // wrap
    # each row carries its own x tick labels, so rows need room for them above the next titles
    fig = px.line(df, x="step", y="loss", facet_col="stage", facet_col_wrap=wrap, category_orders={"stage": stages},
                  color="stage", line_group="attempt", line_dash="attempt",  # a resumed stage's attempts look apart
                  markers=len(df) < 40 or int(df.groupby("trace").size().min()) < 3,  # a 1-point line is invisible
                  facet_row_spacing=0.22 / rows if rows > 1 else 0.03)
    fig.update_xaxes(matches=None, showticklabels=True)
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_layout(height=max(260, 230 * rows), showlegend=False, margin=dict(l=10, r=10, t=30, b=10))
    return fig


# --- comparing runs -----------------------------------------------------------------------------

def curves_frame(runs: list[Run]) -> pd.DataFrame:
    """Training curves of several runs: run, stage, attempt, step, elapsed (s), loss."""
    frames = []
    for run in runs:
        try:
            rows = [m for m in run.metrics(all_attempts=True) if "loss" in m and "step" in m and "stage" in m]
        except XlvizError:
            continue
        if rows:
            df = with_attempts(pd.DataFrame(rows))
            df.insert(0, "run", run.name)
            if "elapsed" not in df:
                df["elapsed"] = float("nan")
            frames.append(df[["run", "stage", "attempt", "step", "elapsed", "loss"]])
    cols = ["run", "stage", "attempt", "step", "elapsed", "loss"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def smooth(values, weight: float) -> list[float]:
    """TensorBoard's debiased exponential moving average (weight 0: the raw values)."""
    out, last, n = [], 0.0, 0
    for v in values:
        n += 1
        last = last * weight + (1 - weight) * float(v)
        out.append(last / (1 - weight ** n) if weight > 0 else float(v))
    return out


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = (None, "circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon")


def overlay_figure(curves: pd.DataFrame, *, x: str = "step", smoothing: float = 0.0, log_x: bool = False,
                   log_y: bool = False):
    """Loss curves of several runs and stages on one chart: colour = run, dash = stage (past
    six stages, markers tell the next six apart), and a resumed stage's earlier attempts thin
    and faint beside its last one; the raw curve stays fainter behind the smoothed one, as in
    TensorBoard. No two legend entries look alike."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    from xlviz.views.text import plot_text

    fig = go.Figure()
    runs = list(dict.fromkeys(curves["run"]))
    stages = list(dict.fromkeys(curves["stage"]))
    last = curves.groupby(["run", "stage"])["attempt"].max().to_dict()
    palette = qualitative.Plotly
    for (run, stage, attempt), g in curves.groupby(["run", "stage", "attempt"], sort=False):
        colour = palette[runs.index(run) % len(palette)]
        i = stages.index(stage)
        n = last[(run, stage)]
        name = f"{plot_text(run)} · {plot_text(stage)}" + (f" (attempt {attempt + 1} of {n + 1})" if n else "")
        earlier = attempt < n
        symbol = SYMBOLS[(i // len(DASHES)) % len(SYMBOLS)]
        xs = g[x].tolist()
        if smoothing > 0:
            fig.add_scatter(x=xs, y=g["loss"].tolist(), mode="lines", line=dict(color=colour, width=1), opacity=0.25,
                            showlegend=False, hoverinfo="skip", legendgroup=name)
        fig.add_scatter(x=xs, y=smooth(g["loss"], smoothing), mode="lines+markers" if symbol else "lines", name=name,
                        legendgroup=name, opacity=0.55 if earlier else 1.0,
                        marker=dict(symbol=symbol or "circle", size=6, maxdisplayed=12),
                        line=dict(color=colour, dash=DASHES[i % len(DASHES)], width=1 if earlier else 2.2))
    fig.update_layout(margin=dict(l=10, r=10, t=30), xaxis_title="step" if x == "step" else "time (s)", yaxis_title="loss")
    legend_below(fig, [t.name for t in fig.data if t.showlegend is not False], height=420)  # never over the x-axis title
    if log_x:
        fig.update_xaxes(type="log")
    if log_y:
        fig.update_yaxes(type="log")
    return fig


IGNORED_CONFIG_KEYS = ("name", "versions", "run_dir", "out")


def flat_config(cfg: dict, prefix: str = "") -> dict[str, object]:
    """``{"world.seed": 1, ...}``: nested config keys as dotted paths."""
    out: dict[str, object] = {}
    for k, v in (cfg or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, key + "."))
        else:
            out[key] = _short(v) if isinstance(v, (list, tuple)) else v
    return out


def _config(run: Run) -> dict:
    try:
        cfg = run.config()
    except XlvizError:
        return {}
    return {k: v for k, v in flat_config(cfg).items() if k.split(".")[0] not in IGNORED_CONFIG_KEYS}


def config_table(run: Run) -> pd.DataFrame:
    """One run's whole ``config.json`` as rows of (setting, value), dotted keys, values as text
    (shown read-only; package versions included: they are part of reproducing it). Empty
    when the run has not written its config yet; an XlvizError naming the file when it is
    unreadable."""
    if not run.exists():
        return pd.DataFrame(columns=["setting", "value"])
    flat = flat_config(run.config())
    return pd.DataFrame([{"setting": k, "value": v if isinstance(v, str) else json.dumps(v)} for k, v in flat.items()],
                        columns=["setting", "value"])


def parse_tags(text: str) -> list[str]:
    """Tags typed as one comma-separated line, checked (:func:`xlviz.runs.check_tags`)."""
    from xlviz.runs import check_tags

    return check_tags([t.strip() for t in str(text).split(",") if t.strip()])


def config_diff(runs: list[Run]) -> pd.DataFrame:
    """Config keys whose values differ between the runs (key × run); empty when all agree."""
    configs = {run.name: _config(run) for run in runs}
    keys = sorted({k for c in configs.values() for k in c})
    rows = []
    for k in keys:
        values = [configs[name].get(k, "—") for name in configs]
        if len({repr(v) for v in values}) > 1:
            rows.append({"key": k, **{name: _short(v) if not isinstance(v, str) else v for name, v in zip(configs, values)}})
    return pd.DataFrame(rows, columns=["key", *configs])


def seed_groups(runs: list[Run]) -> list[list[str]]:
    """Runs whose configs differ only in seeds (any key named ``seed``), grouped; groups of
    two or more runs only."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        cfg = _config(run)
        if not cfg:
            continue
        sig = repr(sorted((k, repr(v)) for k, v in cfg.items() if k.split(".")[-1] != "seed"))
        groups.setdefault(sig, []).append(run.name)
    return [g for g in groups.values() if len(g) > 1]


def name_width(names) -> int:
    """Pixels a table column needs to show the longest of ``names`` whole (the grid's default
    "medium" width cut "demo-20261124-123805" to "demo-2026112…", and every run looked alike)."""
    longest = max((len(str(n)) for n in names), default=0)
    return min(max(120, 8 * longest + 32), 640)


def compare_column_order(table: pd.DataFrame) -> list[str]:
    """The columns a :func:`compare_table` part shows, so that it fits a 1,400 px window with F1
    in view: the names, then F1 and EM per language, each as ``score [95% CI]`` where rows carry
    intervals (the bare score, which that text repeats, is then left out of the view; the frame
    and its CSV keep it), then the L2/L1 ratios, the parallel pairs and the verdict."""
    cols = [str(c) for c in table.columns]
    names = [c for c in ("run", "runs", "system") if c in cols]
    langs = list(dict.fromkeys(c[3:] for c in cols if c.startswith("F1 ") and not c.endswith(("]", "/L1"))))
    langs += [l for l in dict.fromkeys(c[3:] for c in cols if c.startswith("EM ") and not c.endswith("]")) if l not in langs]
    scores = []
    for metric in ("F1", "EM"):
        for lang in langs:
            ci, bare = f"{metric} {lang} [95% CI]", f"{metric} {lang}"
            if ci in cols and table[ci].map(lambda v: isinstance(v, str) and bool(v)).any():
                scores.append(ci)
            elif bare in cols:
                scores.append(bare)
    ratios = [c for c in cols if c.endswith("/L1")]
    tail = [c for c in ("parallel pairs", "verdict") if c in cols]
    return names + scores + ratios + tail  # F1 L2/L1 ratios: two decimals (0.94), everywhere they are shown


def seed_summary(long: pd.DataFrame, groups: list[list[str]]) -> pd.DataFrame:
    """Mean ± sd of EM and F1 per setting, system and language over each group of seed-only
    runs, with the mean's 95% Student-t interval over the runs (none from one run: "1 seed")."""
    from xlviz.evaluation.uncertainty import seed_interval

    def t_text(values) -> str:
        values = [float(v) for v in values if pd.notna(v)]
        if len(values) < 2:
            return "1 seed" if values else ""
        t = seed_interval(values)
        return f"[{t.low:.1f}, {t.high:.1f}]"

    rows = []
    if "setting" not in long:
        long = long.assign(setting=ZERO_SHOT)
    long = live(long)  # a degenerate row is no result: never in a mean or sd
    for group in groups:
        sub = long[long["run"].isin(group)]
        for (setting, system, lang), g in sub.groupby(["setting", "system", "language"], sort=False):
            rows.append({"runs": ", ".join(group), "setting": setting, "system": system, "language": lang, "n": len(g),
                         "EM mean": g["exact_match"].mean(), "EM sd": g["exact_match"].std(ddof=1),
                         "EM 95% t over seeds": t_text(g["exact_match"]),
                         "F1 mean": g["f1"].mean(), "F1 sd": g["f1"].std(ddof=1), "F1 95% t over seeds": t_text(g["f1"])})
    return pd.DataFrame(rows, columns=["runs", "setting", "system", "language", "n", "EM mean", "EM sd", "EM 95% t over seeds",
                                       "F1 mean", "F1 sd", "F1 95% t over seeds"]).round(2)


def l1_language(run: Run) -> str:
    """The run's L1 (its first language)."""
    from xlviz.views.choices import run_languages

    langs = run_languages(run)
    return langs[0] if langs else "en"


def no_runs_message(root=None) -> str:
    """What the Runs page says when it has no run to show: where the sweeps' cells are, if any
    (they are listed on the Sweeps page and open in every analysis page)."""
    from xlviz.runs import is_sweep_folder, list_runs

    cells = sum(1 for r in list_runs(root) if is_sweep_folder(r.path.parent))
    if cells:
        return (f"No runs outside sweeps yet — start one above. The {cells} cell{'s' if cells > 1 else ''} of this "
                "folder's sweeps are on the Sweeps page, and open in XQuAD, Attention, Alignment and Probing.")
    return "No runs yet — start one above."


def all_runs(root=None) -> list[Run]:
    """Run folders, newest first, including ones the app just started whose job has not
    written ``config.json`` yet (``list_runs`` skips those)."""
    from xlviz.runs import checkpoints_root, is_run

    root = checkpoints_root(root)
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        if (p.is_dir() and not p.name.startswith(".") and ((p / "config.json").exists() or (p / jobs.JOB_FILE).exists())
                and is_run(p, root)):  # the one rule: never a model folder or a link
            out.append(Run(p))

    def mtime(r: Run) -> float:
        for f in (r.config_path, r.path / jobs.JOB_FILE, r.path):
            try:
                return f.stat().st_mtime
            except OSError:
                continue
        return 0.0

    return sorted(out, key=mtime, reverse=True)


def export_degenerate(run_name: str | None, system: str | None, root=None) -> dict[str, list[str]]:
    """``{language: degenerate stages}`` of a run's exported system: the languages whose row
    depends on a degenerate stage (empty for models that are not a run's)."""
    from xlviz.runs import checkpoints_root

    if not run_name or not system:
        return {}
    try:
        rows = Run(checkpoints_root(root) / run_name).results()
    except XlvizError:
        return {}
    return {str(r["language"]): [str(s) for s in r.get("degenerate_stages") or []] for r in rows
            if r.get("system") == system and is_degenerate(r)}


def stage_verdicts(run: Run) -> pd.DataFrame:
    """One row per judged stage: verdict and the numbers it was judged on (Runs live view)."""
    try:
        verdicts = run.verdicts()
    except XlvizError:
        verdicts = {}
    rows = [{"stage": stage, "verdict": str(v.get("verdict", "")), "why": str(v.get("reason", ""))}
            for stage, v in verdicts.items() if v.get("verdict") != "unjudged"]
    return pd.DataFrame(rows, columns=["stage", "verdict", "why"])


def export_resources(run_name: str | None, system: str | None, root=None) -> str | None:
    """The resources label (:func:`resources_of`) of a run's exported system, from its
    results.json rows; None for models that are not a run's (typed folders, hub ids)."""
    from xlviz.runs import checkpoints_root

    if not run_name or not system:
        return None
    try:
        rows = [r for r in Run(checkpoints_root(root) / run_name).results() if r.get("system") == system]
    except XlvizError:
        rows = []
    return combine_labels(resources_of(r) for r in rows)


def resources_table(models: list[str], resources: dict[str, str | None], pairs: dict[str, int]) -> pd.DataFrame | None:
    """One row per model: what it read beyond L1 labels (``resources``) and its parallel pairs;
    None when no model read anything recorded (the score tables then need no legend)."""
    if not any(resources.get(m) for m in models) and not any(pairs.get(m) for m in models):
        return None
    return pd.DataFrame([{"model": m, "resources": resources.get(m) or "", "parallel pairs": int(pairs.get(m) or 0)}
                         for m in models], columns=["model", "resources", "parallel pairs"])


def export_setting(run_name: str | None, system: str | None, root=None) -> tuple[str | None, int]:
    """(setting, parallel pairs) of a run's exported system, from its results.json rows (the
    method's declaration is written there); (None, 0) for models that are not a run's (typed
    folders, hub ids)."""
    from xlviz.runs import checkpoints_root

    if not run_name:
        return None, 0
    if not system:  # a run's QA stage folder in the sidebar (s3_finetune): fine-tuned on L1 labels
        return ZERO_SHOT, 0
    try:
        rows = [r for r in Run(checkpoints_root(root) / run_name).results() if r.get("system") == system]
    except XlvizError:
        rows = []
    if not rows:
        return ZERO_SHOT, 0
    pairs = max((int(r["parallel_pairs"]) for r in rows if isinstance(r.get("parallel_pairs"), (int, float))), default=0)
    settings = {setting_of(r) for r in rows}
    return next((s for s in reversed(SETTINGS) if s in settings), ZERO_SHOT), pairs
