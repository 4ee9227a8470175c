"""Result tables: system x language EM/F1 with the L2/L1 F1 ratio."""

from __future__ import annotations


def results_table(rows: list[dict], l1: str = "en") -> str:
    """A plain-text table, one line per system and language, L1 first."""
    l1_f1 = {r["system"]: r["f1"] for r in rows if r["language"] == l1}
    lines = [f"{'system':<20} {'language':<9} {'EM':>6} {'F1':>6} {'F1 L2/L1':>9}", "-" * 54]
    for r in sorted(rows, key=lambda r: (r["system"], r["language"] != l1, r["language"])):
        base = l1_f1.get(r["system"])
        ratio = "" if r["language"] == l1 or not base else f"{r['f1'] / base:.2f}"
        lines.append(f"{r['system']:<20} {r['language']:<9} {r['exact_match']:>6.1f} {r['f1']:>6.1f} {ratio:>9}")
    return "\n".join(lines)
