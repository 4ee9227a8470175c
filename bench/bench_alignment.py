"""Alignment page, server side: CPU seconds of its cold and warm render under Streamlit's AppTest,
with and without the run's stored encodings (``xlviz analyse encodings``), before and after.

    python bench/bench_alignment.py [--before DIR] [--pairs 500] [--repeat 3] [--copy RUN]

Builds a tiny finished run in a temporary folder (tests/analysis_fixtures.py: en + sov, an L1
masked LM, a transferred model and the floor, with ``--pairs`` parallel pairs in its world) and
renders the Alignment page with its default view (the run's parallel pairs, its two systems,
mean pooling, word translation on) in a fresh process per measurement:

- cold: the first script run of a new process, opened on the Alignment page (a link to
  ``/alignment`` on a server just started: the app's sidebar and the page, nothing imported or
  cached beyond Streamlit itself);
- warm: the same page rendered again in that session (Streamlit's caches filled), median of
  ``--repeat``;
- whether the render imported torch or transformers' model code (``transformers.models.*.modeling_*``).

``--before DIR``: a checkout of the code to compare with (``git archive <commit> | tar -x -C DIR``);
its column has no stored encodings (it cannot read them). ``--copy RUN``: measure a copy of a real
run (e.g. a finished ``xlviz demo``) instead of the tiny one (its stored encodings, if any, are
removed from the copy first, so "computed" computes). CPU seconds (``time.process_time``: every
thread of the process) move less with the machine's load than wall seconds; both are printed. Say
whether the machine was shared when you quote them. The browser adds its drawing on top (not
measured here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worker(root: Path, repeat: int) -> dict:
    from streamlit.testing.v1 import AppTest

    os.environ["XLVIZ_CHECKPOINTS"] = str(root)
    tree = Path(os.environ["BENCH_TREE"])
    at = AppTest.from_file(str(tree / "app.py"), default_timeout=1200)
    at.switch_page("pages/alignment.py")  # the first page this server draws: a link to /alignment
    before = {m for m in sys.modules if m == "torch" or ".modeling_" in m}
    c, t = time.process_time(), time.perf_counter()
    at.run()
    cold = {"cpu": time.process_time() - c, "wall": time.perf_counter() - t}
    loaded = sorted({m for m in sys.modules if m == "torch" or (m.startswith("transformers.models.") and ".modeling_" in m)} - before)
    errors = [e.value for e in at.exception] + [e.value for e in at.error]
    warm = []
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        at.switch_page("pages/alignment.py").run()
        warm.append({"cpu": time.process_time() - c, "wall": time.perf_counter() - t})
    table = next((d.value for d in at.dataframe if "cka" in d.value.columns), None)
    return {"cold": cold, "warm": {k: statistics.median(w[k] for w in warm) for k in ("cpu", "wall")},
            "imported": loaded, "errors": [str(e)[:200] for e in errors][:3],
            "rows": None if table is None else len(table)}


def _run_worker(tree: Path, root: Path, repeat: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), BENCH_TREE=str(tree), OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(root), str(repeat)], env=env,
                         cwd=tree, capture_output=True, text=True, timeout=3600)
    line = next((l for l in reversed(out.stdout.splitlines()) if l.startswith("{")), None)
    if line is None:
        raise SystemExit(f"worker failed in {tree}:\n{out.stderr[-3000:]}")
    return json.loads(line)


def build(root: Path, pairs: int) -> Path:
    """A tiny finished run with ``pairs`` parallel pairs in its world."""
    import tests.app_fixtures as af
    from tests.analysis_fixtures import make_analysis_run
    from xlviz.data.world import World, WorldConfig

    af._world = lambda seed=0: World(WorldConfig(seed=seed, qa_test_paragraphs=4, parallel_pairs=pairs, corpus_documents=50))
    return make_analysis_run(root, "bench-run")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a checkout of the code to compare with")
    ap.add_argument("--pairs", type=int, default=500, help="parallel pairs in the run's world (the page shows 500)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--copy", help="a run folder to measure (copied; the original is not touched)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, os.environ["BENCH_TREE"])
        import xlviz

        assert Path(xlviz.__file__).resolve().is_relative_to(Path(os.environ["BENCH_TREE"]).resolve()), xlviz.__file__
        print(json.dumps(worker(Path(args.worker[0]), int(args.worker[1]))))
        return 0

    sys.path.insert(0, str(REPO))
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkpoints"
        if args.copy:
            import shutil

            run = Path(shutil.copytree(args.copy, root / Path(args.copy).name, symlinks=True,
                                       ignore=shutil.ignore_patterns("encodings", "tensorboard")))
            manifest = run / "manifest.json"
            if manifest.is_file():  # the stored encodings' entries go with their files
                m = json.loads(manifest.read_text())
                m["artefacts"] = [e for e in m["artefacts"] if e.get("kind") != "encodings"]
                manifest.write_text(json.dumps(m, indent=2))
        else:
            run = build(root, args.pairs)
        if args.before:
            results["before"] = _run_worker(Path(args.before).resolve(), root, args.repeat)
        results["after, computed"] = _run_worker(REPO, root, args.repeat)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "xlviz", "analyse", "encodings", "--run", str(run), "--quiet"], env=env,
                       cwd=REPO, check=True, capture_output=True, text=True)
        write_s = time.perf_counter() - t
        results["after, from disk"] = _run_worker(REPO, root, args.repeat)

    what = f"a copy of {args.copy}" if args.copy else f"{args.pairs} pairs, tiny models"
    print(f"\nload: {os.getloadavg()[0]:.1f} (1-min average, {os.cpu_count()} CPUs); {what}")
    print(f"xlviz analyse encodings: {write_s:.1f} s wall (imports included)\n")
    print(f"{'':<20}{'cold CPU s':>12}{'cold wall s':>12}{'warm CPU s':>12}{'warm wall s':>12}  imported by the render")
    for name, r in results.items():
        print(f"{name:<20}{r['cold']['cpu']:>12.2f}{r['cold']['wall']:>12.2f}{r['warm']['cpu']:>12.2f}{r['warm']['wall']:>12.2f}  "
              f"{', '.join(r['imported']) or 'no model code'}" + (f"  ERRORS {r['errors']}" if r["errors"] else ""))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
