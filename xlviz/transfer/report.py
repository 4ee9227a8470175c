"""Result tables: system x language EM/F1 with their intervals and the L2/L1 F1 ratio, one
table per setting (zero-shot, translate-train, translate-test: never side by side). A row that
depends on a degenerate stage (``"verdict": "degenerate"``, :mod:`xlviz.training.verdicts`) is
no result: shown as degenerate, left out of ratios, means and standard deviations, with the
reason."""

from __future__ import annotations

import math

from xlviz.errors import XlvizError
from xlviz.methods import SETTINGS, combine_labels, resources_label, row_resources, row_setting
from xlviz.training.verdicts import degenerate_reason, is_degenerate

# Scores a row must carry (a number each), and those it may carry.
SCORES = ("exact_match", "f1")
OPTIONAL_SCORES = ("l1_f1", "l1_exact_match", "f1_v11", "exact_match_v11")
# (EM, F1) pairs of one model on one test set: an exact match is also a full F1 match, so EM <= F1
EM_F1_PAIRS = (("exact_match", "f1"), ("l1_exact_match", "l1_f1"), ("exact_match_v11", "f1_v11"))
# two decimals stored as four may round EM a hair above an equal F1
EM_F1_SLACK = 1e-6


def check_score_rows(rows: list[dict], path: object = None) -> list[dict]:
    """``rows`` if every row's scores are percentages, else an XlvizError naming the row and
    field: a results.json edited by hand or written by another tool (``"f1": null``, ``"f1":
    "12"``, a missing ``exact_match``, F1 1e308 or -5, EM 300, EM 90 beside F1 10, a ``setting``
    no table knows) must not end the report in a format traceback, a ``nan`` shown as a score,
    a number no test set can give, or a row filed under another setting."""
    for i, r in enumerate(rows):
        for key in SCORES + OPTIONAL_SCORES:
            if key not in r:
                if key in SCORES:
                    raise XlvizError(f"row {i} ({r.get('system')} {r.get('language')}) has no {key}", path=path, field=f"[{i}].{key}")
                continue
            v = r[key]
            if key in OPTIONAL_SCORES and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise XlvizError(f"row {i} ({r.get('system')} {r.get('language')}): must be a finite number, got {str(v)[:40]!r}",
                                 path=path, field=f"[{i}].{key}")
            if not 0 <= v <= 100:
                raise XlvizError(f"row {i} ({r.get('system')} {r.get('language')}): must be a score from 0 to 100, got {v:g}",
                                 path=path, field=f"[{i}].{key}")
        for em, f1 in EM_F1_PAIRS:
            if isinstance(r.get(em), (int, float)) and isinstance(r.get(f1), (int, float)) and r[em] > r[f1] + EM_F1_SLACK:
                raise XlvizError(f"row {i} ({r.get('system')} {r.get('language')}): EM {r[em]:g} above F1 {r[f1]:g} "
                                 "(an exact match is also a full F1 match, so EM never exceeds F1)", path=path, field=f"[{i}].{em}")
        setting = r.get("setting")
        if setting is not None and setting not in SETTINGS:
            raise XlvizError(f"row {i} ({r.get('system')} {r.get('language')}): unknown setting {str(setting)[:40]!r}; "
                             f"settings are {', '.join(SETTINGS)}", path=path, field=f"[{i}].setting")
        pairs = r.get("parallel_pairs")
        if pairs is not None and (isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 0):
            raise XlvizError(f"row {i}: must be a count of pairs, got {str(pairs)[:40]!r}", path=path, field=f"[{i}].parallel_pairs")
    return rows


def split_degenerate(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rows that are results, rows that depend on a degenerate stage)."""
    return [r for r in rows if not is_degenerate(r)], [r for r in rows if is_degenerate(r)]


SETTING_NOTES = {
    "zero-shot": "QA labels in L1 only; the test reads the L2 alone",
    "translate-train": "trained on QA labels in the L2 (a translated training set): a ceiling, not a transfer result",
    "translate-test": "reads each L2 test context with its gold L1 translation at test time: not comparable with either",
}


def by_setting(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """(setting, its rows) in the order zero-shot, translate-train, translate-test; empty ones left out."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(row_setting(r), []).append(r)
    return [(s, groups[s]) for s in SETTINGS if s in groups]


def ci_text(row: dict, metric: str) -> str:
    """``[low, high]`` of a row's interval for ``metric`` (exact_match, f1), or ``n/a``."""
    lo, hi = row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return "n/a"
    return f"[{lo:.1f}, {hi:.1f}]"


def interval_note(rows: list[dict]) -> str:
    """What the intervals of one run's rows are: method, resamples, paragraphs, questions; 1 seed."""
    with_ci = [r for r in rows if "f1_ci_low" in r]
    if not with_ci:
        return "No intervals: these rows carry none and the run kept no predictions to compute them from. 1 seed."
    paras = sorted({int(r.get("n_paragraphs") or 0) for r in with_ci})
    questions = sorted({int(r.get("n_questions") or 0) for r in with_ci})
    b = max(int(r.get("n_resamples") or 0) for r in with_ci)
    span = (lambda v: f"{v[0]}" if len(v) == 1 else f"{v[0]}-{v[-1]}")
    return (f"[low, high]: 95% paragraph bootstrap intervals (whole test paragraphs resampled, B = {b}; "
            f"{span(paras)} paragraphs, {span(questions)} questions per language). 1 seed: the intervals say nothing "
            "about the spread over training seeds (report several runs for that).")


def results_table(rows: list[dict], l1: str = "en") -> str:
    """A plain-text table per setting, one line per system and language, L1 first, each score
    with its interval; the L2/L1 ratio divides by the same model's L1 F1 (``l1_f1`` of a pair
    model's row, else the system's L1 row). EM/F1 strip each language's own articles
    (MLQA-style); ``F1 v1.1`` is the official English-only normalisation, shown when the rows
    carry it. Rows of other tasks only (a system scored by probing or word translation, no
    QA: no ``f1``) are not QA results and are left out."""
    rows = [r for r in rows if "f1" in r]
    if not rows:
        return "No QA rows: the run's systems were scored by other tasks only."
    l1_f1 = {r["system"]: r["f1"] for r in rows if r["language"] == l1 and not is_degenerate(r)}
    v11 = any("f1_v11" in r for r in rows)
    w = max([20] + [len(str(r["system"])) for r in rows])
    head = (f"{'system':<{w}} {'language':<9} {'EM':>6} {'EM 95% CI':>14} {'F1':>6} {'F1 95% CI':>14} {'F1 L2/L1':>9}"
            + (f" {'F1 v1.1':>8}" if v11 else "") + "  resources")
    lines = []
    groups = by_setting(rows)
    for setting, part in groups:
        if len(groups) > 1 or setting != "zero-shot":
            lines += ([""] if lines else []) + [f"{setting}: {SETTING_NOTES[setting]}"]
        lines += [head, "-" * len(head)]
        for r in sorted(part, key=lambda r: (r["system"], r["language"] != l1, r["language"])):
            if is_degenerate(r):  # no result: no number to read, compare or average
                lines.append(f"{r['system']:<{w}} {r['language']:<9} {'degenerate':>23}  ({degenerate_reason(r)})  "
                             f"{resources_label(row_resources(r))}")
                continue
            base = r.get("l1_f1") or l1_f1.get(r["system"])  # pair models: the L1 score of the same model
            ratio = "" if r["language"] == l1 or not base else f"{r['f1'] / base:.2f}"
            line = (f"{r['system']:<{w}} {r['language']:<9} {r['exact_match']:>6.1f} {ci_text(r, 'exact_match'):>14} "
                    f"{r['f1']:>6.1f} {ci_text(r, 'f1'):>14} {ratio:>9}")
            if v11:
                line += f" {r['f1_v11']:>8.1f}" if "f1_v11" in r else f" {'':>8}"
            lines.append(f"{line}  {resources_label(row_resources(r))}")
    lines.append(interval_note(rows))
    lines.append(RESOURCES_NOTE)
    if v11:
        lines.append("EM/F1 strip each language's own articles (as MLQA does); F1 v1.1: English articles only.")
    if any(is_degenerate(r) for r in rows):
        lines.append("degenerate: the row's model failed to learn (its stage's verdict in verdicts.json); it is not a result.")
    return "\n".join(lines)


RESOURCES_NOTE = ("resources: what a system read beyond L1 QA labels (parallel pairs, a bilingual dictionary: its size, gold "
                  "or induced, \"(all)\" when it includes the held-out words word translation is scored on; L2 labels; "
                  "test-time translation); \"(derived)\": a row written before rows recorded it.")


def system_resources(runs: list[list[dict]]) -> dict[str, str]:
    """System -> its resources label over every row of ``runs`` (:func:`~xlviz.methods.combine_labels`:
    a size range where each L2 and seed has its own dictionary split)."""
    out: dict[str, dict] = {}
    for rows in runs:
        for r in rows:
            out.setdefault(str(r.get("system")), {})[resources_label(row_resources(r))] = None
    return {name: combine_labels(labels) for name, labels in out.items()}


def resources_table(runs: list[list[dict]]) -> str:
    """A markdown table beside the seeds table: each system's resources label (what its rows
    read beyond L1 QA labels), so rows that read different data are marked, not mixed silently."""
    lines = ["| system | resources |", "|---|---|"]
    lines += [f"| {name} | {label} |" for name, label in sorted(system_resources(runs).items())]
    return "\n".join(lines + ["", RESOURCES_NOTE])


def resources_line(runs: list[list[dict]], a: str, b: str) -> str:
    """The line ``xlviz report --compare A B`` prints under its table: each system's resources
    and, when they differ, that the difference includes what the extra resources give."""
    labels = system_resources(runs)
    la, lb = labels.get(a, "not recorded"), labels.get(b, "not recorded")
    text = f"Resources: {a}: {la}; {b}: {lb}."
    if la.replace(" (derived)", "") != lb.replace(" (derived)", ""):  # what was read, however it is known
        text += (" Different resources: the difference is not like for like (it includes what the other data gave), "
                 "a comparison of systems with their resources, not of methods alone.")
    return text


def _ratios(rows: list[dict], l1: str) -> dict[tuple[str, str], float]:
    """(system, language) -> L2/L1 F1 over the same model's L1 score (as ``results_table``)."""
    l1_f1 = {r["system"]: r["f1"] for r in rows if r["language"] == l1}
    out = {}
    for r in rows:
        base = r.get("l1_f1") or l1_f1.get(r["system"])
        if r["language"] != l1 and base:
            out[(r["system"], r["language"])] = r["f1"] / base
    return out


def _mean_sd(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    sd = (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return m, sd


def seeds_table(runs: list[list[dict]], l1: str = "en", combined: dict | None = None) -> str:
    """Markdown tables of several runs of the same systems (seeds), one per setting: per system
    and language the mean F1 ± the sample standard deviation over the runs that have it, its
    95% t interval over those runs, the combined interval (seeds, then test paragraphs,
    the seeds + test-set interval ``combined[(system, language)]``, when the runs kept their predictions) and the
    mean L2/L1 ratio. A cell from one run says "1 seed". The setting line says how many
    translation pairs a system read (``parallel_pairs``)."""
    from xlviz.evaluation.uncertainty import seed_interval

    systems: dict[str, dict] = {}
    languages: list[str] = []
    excluded = [(i, r) for i, rows in enumerate(runs) for r in split_degenerate(rows)[1]]
    runs = [split_degenerate(rows)[0] for rows in runs]
    languages += list(dict.fromkeys(r["language"] for _, r in excluded))  # their columns stay, reading "—"
    for rows in runs:
        ratios = _ratios(rows, l1)
        for r in rows:
            s = systems.setdefault(r["system"], {"f1": {}, "ratio": {}, "setting": row_setting(r), "pairs": 0})
            s["f1"].setdefault(r["language"], []).append(r["f1"])
            if (r["system"], r["language"]) in ratios:
                s["ratio"].setdefault(r["language"], []).append(ratios[(r["system"], r["language"])])
            s["pairs"] = max(s["pairs"], int(r.get("parallel_pairs") or 0))
            if r["language"] not in languages:
                languages.append(r["language"])
    languages.sort(key=lambda lang: (lang != l1, lang))
    head = ["system", "setting", *languages, "runs"]
    lines = []
    for setting in SETTINGS:
        names = sorted(n for n in systems if systems[n]["setting"] == setting)
        if not names:
            continue
        lines += (["" ] if lines else []) + [f"**{setting}**: {SETTING_NOTES[setting]}", "",
                                             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name in names:
            s = systems[name]
            label = setting + (f", {s['pairs']:,} pairs" if s["pairs"] else "")
            cells = []
            for lang in languages:
                if lang not in s["f1"]:
                    cells.append("—")
                    continue
                values = s["f1"][lang]
                m, sd = _mean_sd(values)
                if len(values) > 1:
                    t = seed_interval(values)
                    cell = f"{m:.1f} ± {sd:.1f} [t {t.low:.1f}, {t.high:.1f}]"
                else:
                    cell = f"{m:.1f} (1 seed)"
                both = (combined or {}).get((name, lang))
                if both is not None and both.n_seeds == len(values):
                    cell += f" [seeds+paragraphs {both.low:.1f}, {both.high:.1f}]"
                if lang in s["ratio"]:
                    cell += f" ({_mean_sd(s['ratio'][lang])[0]:.2f})"
                cells.append(cell)
            n = max(len(v) for v in s["f1"].values())
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + f" | {n} |")
    lines.append(f"\nF1 mean ± sample standard deviation over runs; [t low, high]: 95% Student-t interval of the mean over "
                 f"runs (seeds) on this test set (2 runs: one degree of freedom, wide); [seeds+paragraphs low, high]: 95% "
                 f"interval for the test distribution: the t over runs widened by the test set's own paragraph-sampling "
                 f"variance when the runs share their test questions (Welch-Satterthwaite); in brackets the mean L2/{l1} "
                 f"ratio (a pair model over its own {l1} score).")
    for i, r in excluded:
        lines.append(f"left out: {r['system']} {r['language']} of run {i + 1} ({degenerate_reason(r)}): not a result, "
                     "not in any mean, sd or ratio")
    return "\n".join(lines)


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def compare_table(rows: list[dict], a: str, b: str, family_size: int | None = None) -> str:
    """``xlviz report --compare A B``: per language and metric, A − B on the same questions with
    its 95% interval, the raw p and the Holm-adjusted p over the table's comparisons, the exact
    sign-flip p over seeds beside it, the verdict (:func:`xlviz.evaluation.seeds.decide`, on the
    Holm p) and how many seeds a difference of the observed size would need; the footer says
    which procedure each row used. ``rows`` from :func:`xlviz.transfer.uncertainty.compare_systems`."""
    from xlviz.evaluation.seeds import ALPHA, MIN_SEEDS_VERDICT, verdict_text

    head = ["language", "metric", f"{a} − {b}", "95% CI", "p", "p Holm", "p sign-flip (exact)", "verdict", "seeds",
            "seeds for 80% power", "paragraphs", "questions"]
    lines = [f"**{a}** against **{b}** ({rows[0]['setting']}), paired on the same test questions", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    procedures: dict[tuple[str, str, int], list[str]] = {}
    for r in rows:
        metric = "F1" if r["metric"] == "f1" else "EM"
        flip = _p(r.get("p_sign_flip"))
        if r.get("sign_flip_floor") is not None and r["sign_flip_floor"] >= ALPHA:
            flip += f" (min {r['sign_flip_floor']:.3f}: cannot reach {ALPHA})"
        need = r.get("seeds_needed")
        lines.append(f"| {r['language']} | {metric} | {r['difference']:+.1f} | [{r['low']:+.1f}, {r['high']:+.1f}] | "
                     f"{_p(r['p_value'])} | {_p(r.get('p_holm'))} | {flip} | {verdict_text(r['verdict'], a, b, r['n_seeds'])} | "
                     f"{r['n_seeds']} | {'—' if need is None else need} | {r['n_paragraphs']} | {r['n_questions']} |")
        procedures.setdefault((r["method"], r["p_method"], r["n_resamples"]), []).append(f"{r['language']} {metric}")
    lines.append("")
    for (method, p_method, b_resamples), which in procedures.items():
        how = f"{method}" + (f" (B = {b_resamples})" if b_resamples else "")
        lines.append(f"{', '.join(which)}: interval {how}; p {p_method} (two-sided).")
    scope = (f"the {len(rows)} comparisons of this table" if family_size in (None, len(rows))
             else f"the {family_size} comparisons of every cell printed")
    lines.append(f"p Holm: Holm-adjusted over {scope}; the verdict reads it. A verdict "
                 f"needs {MIN_SEEDS_VERDICT} seeds or more and p Holm < {ALPHA} (paired t on the per-seed differences); "
                 "the exact sign-flip p (all 2^n sign patterns of the per-seed differences) is a distribution-free check "
                 "that needs 6 seeds to reach 0.05. Seeds for 80% power: paired t at the observed difference and "
                 "between-seed sd.")
    if any(r["n_seeds"] == 1 for r in rows):
        lines.append("1 seed: the interval and p measure the test set's noise given the two trained models; they say "
                     "nothing about the method.")
    if any(r.get("excluded") for r in rows):
        lines.append("Left out: " + ", ".join(f"{r['language']} {r['excluded']} run(s)" for r in rows
                                              if r.get("excluded") and r["metric"] == "f1")
                     + " whose row of either system is degenerate (no result).")
    return "\n".join(lines)
