"""Result tables: system x language EM/F1 with the L2/L1 F1 ratio."""

from __future__ import annotations


def results_table(rows: list[dict], l1: str = "en") -> str:
    """A plain-text table, one line per system and language, L1 first; the L2/L1 ratio divides
    by the same model's L1 F1 (``l1_f1`` of a pair model's row, else the system's L1 row). EM/F1 strip each
    language's own articles (MLQA-style); ``F1 v1.1`` is the official English-only
    normalisation, shown when the rows carry it."""
    l1_f1 = {r["system"]: r["f1"] for r in rows if r["language"] == l1}
    v11 = any("f1_v11" in r for r in rows)
    w = max([20] + [len(str(r["system"])) for r in rows])
    head = f"{'system':<{w}} {'language':<9} {'EM':>6} {'F1':>6} {'F1 L2/L1':>9}" + (f" {'F1 v1.1':>8}" if v11 else "")
    lines = [head, "-" * len(head)]
    for r in sorted(rows, key=lambda r: (r["system"], r["language"] != l1, r["language"])):
        base = r.get("l1_f1") or l1_f1.get(r["system"])  # pair models: the L1 score of the same model
        ratio = "" if r["language"] == l1 or not base else f"{r['f1'] / base:.2f}"
        line = f"{r['system']:<{w}} {r['language']:<9} {r['exact_match']:>6.1f} {r['f1']:>6.1f} {ratio:>9}"
        if v11:
            line += f" {r['f1_v11']:>8.1f}" if "f1_v11" in r else f" {'':>8}"
        lines.append(line)
    if v11:
        lines.append("EM/F1 strip each language's own articles (as MLQA does); F1 v1.1: English articles only.")
    return "\n".join(lines)
