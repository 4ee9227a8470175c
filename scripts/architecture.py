"""The layout of the code as a picture: which package imports which, checked one way down.

Reads every import of ``xlviz/``, ``pages/`` and ``app.py`` (module level and inside
functions), folds them to packages (``xlviz.methods.monotrans`` -> ``methods``), and

- lists the edges that go *up* the layers (``tests/test_layers.py`` asserts there are none
  beyond the documented exceptions);
- draws the package graph as a Mermaid diagram (GitHub renders it) between the markers in
  ``docs/architecture.md``; ``--write`` refreshes it, the test checks it is current;
- counts the ``system ==`` branches left in ``xlviz/methods`` (the ``Variant`` table style
  replaces them);
- finds import cycles between the modules of ``xlviz/`` (every import, those inside functions
  too: a circle hidden in a function still ties the modules together; ``tests/test_house.py``
  asserts there are none).

    python scripts/architecture.py           # print the block and any violation
    python scripts/architecture.py --write   # refresh docs/architecture.md
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (scripts/architecture.py --write) -->", "<!-- layers:end -->"

# Utilities every layer may use: errors, atomic I/O, names, limits, confined reads, the run folder,
# settings declared as dataclass fields (and their flags).
UTILITIES = ("xlviz", "errors", "io", "names", "limits", "confined", "runs", "fields")
# Rank of each package: an import may go to the same rank or lower, never higher.
RANKS: dict[str, int] = {
    "data": 0, "models": 1, "training": 2, "methods": 3, "evaluation": 4, "analysis": 5, "transfer": 6,
    "views": 7,  # the pages' and notebooks' Streamlit-free code, one module per view
    "ui": 8,  # what needs Streamlit: built on the views, never below them
    "jobs": 9, "commands": 9, "cli": 9, "__main__": 10, "pages": 10,
}
# Upward edges that are deliberate, with the reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("views", "cli"): "the Runs form validates with the CLI's own parser, so the form and the CLI refuse the same input",
    ("views", "commands"): "the Runs and Sweeps forms build the run config with `xlviz transfer`'s own `build_config`",
}


def package_of(path: Path) -> str:
    rel = path.relative_to(REPO)
    if rel.parts[0] != "xlviz":
        return "pages"  # pages/*.py and app.py
    if len(rel.parts) == 2:
        return "xlviz" if rel.stem == "__init__" else rel.stem
    return rel.parts[1]


def imported(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "xlviz":
        return None
    return parts[1] if len(parts) > 1 else "xlviz"


def sources() -> list[Path]:
    return sorted([*REPO.glob("xlviz/**/*.py"), *REPO.glob("pages/*.py"), REPO / "app.py"])


def edges() -> dict[tuple[str, str], list[str]]:
    """``{(importer, imported): [file:line, ...]}`` between packages."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in sources():
        src = package_of(f)
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                dst = imported(name)
                if dst and dst != src:
                    out[(src, dst)].append(f"{f.relative_to(REPO)}:{node.lineno}")
    return dict(out)


def module_of(path: Path, root: Path = REPO) -> str:
    """``xlviz/methods/monotrans.py`` -> ``xlviz.methods.monotrans`` (a package: its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_edges(files: dict[str, str]) -> dict[str, set[str]]:
    """``{module: {module it imports}}`` between the modules of ``files`` (``{module name:
    source}``), every import statement counted, module level or inside a function. ``from
    package import name`` reaches the submodule ``package.name`` when there is one, else the
    package."""
    out: dict[str, set[str]] = {m: set() for m in files}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    for mod, text in files.items():
        is_package = any(m.startswith(mod + ".") for m in files)
        package = mod if is_package else mod.rpartition(".")[0]  # what a relative import starts from
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for t in targets:
                dst = known(t)
                if dst and dst != mod:
                    out[mod].add(dst)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a circle (strongly
    connected components of more than one module, Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def module_cycles() -> list[list[str]]:
    """Import cycles between the modules of ``xlviz/``."""
    files = {module_of(f): f.read_text() for f in sorted(REPO.glob("xlviz/**/*.py"))}
    return cycles(module_edges(files))


def violations(graph: dict[tuple[str, str], list[str]]) -> list[str]:
    """Imports that go up the layers (or reach a package with no rank), not documented exceptions."""
    bad = []
    for (src, dst), where in sorted(graph.items()):
        if dst in UTILITIES or (src, dst) in EXCEPTIONS:
            continue
        if src in UTILITIES:
            bad.append(f"utility {src} imports {dst} ({', '.join(where[:3])})")
        elif src not in RANKS or dst not in RANKS:
            bad.append(f"{src} -> {dst}: a package without a layer ({', '.join(where[:3])})")
        elif RANKS[dst] > RANKS[src]:
            bad.append(f"{src} (layer {RANKS[src]}) imports {dst} (layer {RANKS[dst]}) ({', '.join(where[:3])})")
    return bad


def system_branches() -> int:
    """``system ==`` / ``system !=`` comparisons left in the method modules."""
    pattern = re.compile(r"\bsystem\s*[!=]=")
    return sum(len(pattern.findall(f.read_text())) for f in sorted((REPO / "xlviz" / "methods").glob("*.py")))


def block(graph: dict[tuple[str, str], list[str]]) -> str:
    layers: dict[int, list[str]] = defaultdict(list)
    for pkg, rank in RANKS.items():
        layers[rank].append(pkg)
    lines = [BEGIN, "", "```mermaid", "flowchart TD"]
    for rank in sorted(layers):
        lines.append(f"  subgraph L{rank}[\"layer {rank}\"]")
        lines += [f"    {p.strip('_')}[\"{p}\"]" for p in sorted(layers[rank])]
        lines.append("  end")
    for (src, dst), where in sorted(graph.items()):
        if src in RANKS and dst in RANKS:
            style = "-.->" if (src, dst) in EXCEPTIONS else "-->"
            lines.append(f"  {src.strip('_')} {style} {dst.strip('_')}")
    lines += ["```", ""]
    lines.append(f"Every package may also import the utilities {', '.join(f'`{u}`' for u in UTILITIES[1:])} "
                 "(and `xlviz` itself), which import no layer.")
    lines.append("Dotted arrows are the deliberate upward edges: "
                 + "; ".join(f"{a} → {b} ({why})" for (a, b), why in EXCEPTIONS.items()) + ".")
    lines.append(f"Imports counted: {sum(len(w) for w in graph.values())} between packages; "
                 f"upward imports outside those: {len(violations(graph))}; "
                 f"import cycles between modules: {len(module_cycles())}; "
                 f"`system ==` branches in `xlviz/methods`: {system_branches()}.")
    lines += ["", END]
    return "\n".join(lines)


def current_doc_block() -> str | None:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN): text.index(END) + len(END)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="refresh the block in docs/architecture.md")
    args = ap.parse_args(argv)
    graph = edges()
    new = block(graph)
    if args.write:
        text = DOC.read_text()
        old = current_doc_block()
        DOC.write_text(text.replace(old, new) if old else text.rstrip() + "\n\n## The layers, as the imports draw them\n\n" + new + "\n")
    else:
        print(new)
    for v in violations(graph):
        print("upward import:", v, file=sys.stderr)
    for c in module_cycles():
        print("import cycle:", " <-> ".join(c), file=sys.stderr)
    return 1 if violations(graph) or module_cycles() else 0


if __name__ == "__main__":
    sys.exit(main())
