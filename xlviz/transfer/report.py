"""Result tables: system x language EM/F1 with the L2/L1 F1 ratio. A row that depends on a
degenerate stage (``"verdict": "degenerate"``, :mod:`xlviz.training.verdicts`) is no result:
shown as degenerate, left out of ratios, means and standard deviations, with the reason."""

from __future__ import annotations

from xlviz.training.verdicts import degenerate_reason, is_degenerate


def split_degenerate(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rows that are results, rows that depend on a degenerate stage)."""
    return [r for r in rows if not is_degenerate(r)], [r for r in rows if is_degenerate(r)]


def results_table(rows: list[dict], l1: str = "en") -> str:
    """A plain-text table, one line per system and language, L1 first; the L2/L1 ratio divides
    by the same model's L1 F1 (``l1_f1`` of a pair model's row, else the system's L1 row). EM/F1 strip each
    language's own articles (MLQA-style); ``F1 v1.1`` is the official English-only
    normalisation, shown when the rows carry it."""
    l1_f1 = {r["system"]: r["f1"] for r in rows if r["language"] == l1 and not is_degenerate(r)}
    v11 = any("f1_v11" in r for r in rows)
    w = max([20] + [len(str(r["system"])) for r in rows])
    head = f"{'system':<{w}} {'language':<9} {'EM':>6} {'F1':>6} {'F1 L2/L1':>9}" + (f" {'F1 v1.1':>8}" if v11 else "")
    lines = [head, "-" * len(head)]
    for r in sorted(rows, key=lambda r: (r["system"], r["language"] != l1, r["language"])):
        if is_degenerate(r):  # no result: no number to read, compare or average
            lines.append(f"{r['system']:<{w}} {r['language']:<9} {'degenerate':>23}  ({degenerate_reason(r)})")
            continue
        base = r.get("l1_f1") or l1_f1.get(r["system"])  # pair models: the L1 score of the same model
        ratio = "" if r["language"] == l1 or not base else f"{r['f1'] / base:.2f}"
        line = f"{r['system']:<{w}} {r['language']:<9} {r['exact_match']:>6.1f} {r['f1']:>6.1f} {ratio:>9}"
        if v11:
            line += f" {r['f1_v11']:>8.1f}" if "f1_v11" in r else f" {'':>8}"
        lines.append(line)
    if v11:
        lines.append("EM/F1 strip each language's own articles (as MLQA does); F1 v1.1: English articles only.")
    if any(is_degenerate(r) for r in rows):
        lines.append("degenerate: the row's model failed to learn (its stage's verdict in verdicts.json); it is not a result.")
    return "\n".join(lines)


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


def seeds_table(runs: list[list[dict]], l1: str = "en") -> str:
    """A Markdown table of several runs of the same systems (seeds): per system and language
    the mean F1 ± the sample standard deviation over the runs that have it, and the mean L2/L1
    ratio. The setting column keeps zero-shot and translate-train rows apart (``l2_labels``)
    and says how many translation pairs a system read (``parallel_pairs``)."""
    systems: dict[str, dict] = {}
    languages: list[str] = []
    excluded = [(i, r) for i, rows in enumerate(runs) for r in split_degenerate(rows)[1]]
    runs = [split_degenerate(rows)[0] for rows in runs]
    languages += list(dict.fromkeys(r["language"] for _, r in excluded))  # their columns stay, reading "—"
    for rows in runs:
        ratios = _ratios(rows, l1)
        for r in rows:
            s = systems.setdefault(r["system"], {"f1": {}, "ratio": {}, "labels": False, "pairs": 0})
            s["f1"].setdefault(r["language"], []).append(r["f1"])
            if (r["system"], r["language"]) in ratios:
                s["ratio"].setdefault(r["language"], []).append(ratios[(r["system"], r["language"])])
            s["labels"] |= bool(r.get("l2_labels"))
            s["pairs"] = max(s["pairs"], int(r.get("parallel_pairs") or 0))
            if r["language"] not in languages:
                languages.append(r["language"])
    languages.sort(key=lambda lang: (lang != l1, lang))
    head = ["system", "setting", *languages, "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in sorted(systems, key=lambda n: (systems[n]["labels"], n)):
        s = systems[name]
        setting = ("translate-train" if s["labels"] else "zero-shot") + (f", {s['pairs']:,} pairs" if s["pairs"] else "")
        cells = []
        for lang in languages:
            if lang not in s["f1"]:
                cells.append("—")
                continue
            m, sd = _mean_sd(s["f1"][lang])
            cell = f"{m:.1f} ± {sd:.1f}" if len(s["f1"][lang]) > 1 else f"{m:.1f}"
            if lang in s["ratio"]:
                cell += f" ({_mean_sd(s['ratio'][lang])[0]:.2f})"
            cells.append(cell)
        n = max(len(v) for v in s["f1"].values())
        lines.append(f"| {name} | {setting} | " + " | ".join(cells) + f" | {n} |")
    lines.append(f"\nF1 mean ± sample standard deviation over runs; in brackets the mean L2/{l1} ratio (a pair model over its own {l1} score).")
    for i, r in excluded:
        lines.append(f"left out: {r['system']} {r['language']} of run {i + 1} ({degenerate_reason(r)}): not a result, "
                     "not in any mean, sd or ratio")
    return "\n".join(lines)
