"""App benchmark, before/after side by side: page render times with cached models, XQuAD cold
on real data, and the server's CPU with one idle tab open.

    python bench/bench_app.py [--before DIR] [--repeat 3] [--idle-s 30]

``--before DIR`` is a checkout of the code to compare with (e.g. ``git archive <commit> | tar -x
-C DIR``); each measurement runs in a fresh process with ``PYTHONPATH=DIR`` (or this checkout),
so both sides use the same virtual environment and data, one after the other on the same machine.

- pages: every page rendered with Streamlit's AppTest (the script run the server does, without
  the browser's drawing) on a fake run (tests/app_fixtures.py: tiny models), after a warm-up
  render so models and predictions are cached as for a user clicking around. Target ≤ 2 s.
- XQuAD cold: a new process answers 200 questions × 3 languages of ../shared/data/xquad with one
  model (the fake run's English QA export, typed as a folder), from nothing cached. Target ≤ 20 s.
  Also shown: the page alone once the app's first page rendered (a running server's first visit,
  the libraries already imported). The fake model's tiny vocabulary splits real text into
  characters (~900 tokens a context, ~45 windows a question at the run's window 48), so this is
  a heavy case: a real model reads the same text in far fewer windows.
- ``--xquad-repeat N``: the XQuAD row N times, before and after alternating, median reported
  (the machine's load moves a lot between minutes).
- idle CPU: ``streamlit run app.py`` with a headless chromium tab open on the Runs page; the
  server's CPU time over ``--idle-s`` seconds, in % of one core. "before" is Streamlit's default
  file watcher (what ran before .streamlit/config.toml shipped), "after" the shipped config.
  Target ≤ 5 %.

Timings depend on load: say whether the machine was shared when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = ["home", "runs", "xquad", "attention", "alignment", "probing"]
PAGE_TARGET_S, XQUAD_TARGET_S, IDLE_TARGET = 2.0, 20.0, 5.0


# --- workers (run in a fresh process, with the tree under test first on sys.path) --------------

def worker_pages(root: Path, repeat: int) -> dict:
    from streamlit.testing.v1 import AppTest

    os.environ["XLVIZ_CHECKPOINTS"] = str(root)
    tree = Path(os.environ["BENCH_TREE"])
    at = AppTest.from_file(str(tree / "app.py"), default_timeout=600)
    at.session_state["xlviz_models"] = ["run:bench-run:export:monotrans", "run:bench-run:s1_pretrain"]
    at.run()
    out = {}
    for page in PAGES:
        if not (tree / "pages" / f"{page}.py").exists():
            continue
        at.switch_page(f"pages/{page}.py").run()  # warm-up: loads models, computes predictions
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            at.switch_page(f"pages/{page}.py").run()
            times.append(time.perf_counter() - t)
        out[page] = {"median": statistics.median(times), "max": max(times), "errors": len(at.exception) + len(at.error)}
    return out


def worker_xquad(root: Path, xquad: Path, model: Path) -> dict:
    from streamlit.testing.v1 import AppTest

    os.environ["XLVIZ_CHECKPOINTS"] = str(root)
    tree = Path(os.environ["BENCH_TREE"])
    key = f"path:{model}"
    at = AppTest.from_file(str(tree / "app.py"), default_timeout=1200)
    at.session_state["xlviz_typed_models"] = [str(model)]
    at.session_state["xlviz_models"] = [key]
    at.session_state["xlviz_languages"] = ["en", "de", "es"]
    at.session_state["xq_source"] = "folder"
    at.session_state["xq_folder"] = str(xquad)
    at.session_state["xq_limit"] = 200
    t, cpu0 = time.perf_counter(), time.process_time()
    at.run()
    started = time.perf_counter()
    at.switch_page("pages/xquad.py").run()
    took = time.perf_counter() - t
    cells = at.dataframe[0].value.shape if len(at.dataframe) else None
    # seconds: from a new process (imports included); page: the XQuAD page alone once the app's
    # first page has rendered (a running server, nothing cached: a user's first visit)
    # cpu_s: CPU seconds of every thread of the process: what the work costs whatever the load
    return {"seconds": took, "page": time.perf_counter() - started, "cpu_s": time.process_time() - cpu0,
            "errors": [e.value for e in at.error][:2],
            "matrix": list(cells) if cells else None}


# --- driver ------------------------------------------------------------------------------------

def _run_worker(tree: Path, args: list[str]) -> dict:
    # as the served app (app.py sets it before torch loads): busy-waiting OpenMP threads on a shared
    # CPU make each tiny matmul ~100x slower
    env = dict(os.environ, PYTHONPATH=str(tree), BENCH_TREE=str(tree), OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", *args], env=env, cwd=tree,
                         capture_output=True, text=True, timeout=3600)
    line = next((l for l in reversed(out.stdout.splitlines()) if l.startswith("{")), None)
    if line is None:
        raise SystemExit(f"worker failed in {tree}:\n{out.stderr[-3000:]}")
    return json.loads(line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def idle_cpu(root: Path, watcher: str | None, idle_s: float) -> float:
    """% of one core the server uses over ``idle_s`` with one tab open on the Runs page."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    argv = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)]
    if watcher:
        argv += ["--server.fileWatcherType", watcher]
    env = dict(os.environ, XLVIZ_CHECKPOINTS=str(root))
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/runs")
            page.wait_for_selector("h1", timeout=120_000)
            time.sleep(10)  # let the first render and any warm-up finish
            c0, t0 = _cpu_seconds(proc.pid), time.monotonic()
            time.sleep(idle_s)
            c1, t1 = _cpu_seconds(proc.pid), time.monotonic()
            browser.close()
        return 100.0 * (c1 - c0) / (t1 - t0)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a checkout of the code to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=30.0)
    ap.add_argument("--xquad-repeat", type=int, default=1, help="XQuAD runs per side, alternating; median shown")
    ap.add_argument("--skip", default="", help="comma-separated: pages, xquad, idle")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        # the tree under test first: this script's own checkout on sys.path would make "before"
        # import the new package (the before column then measured the after code)
        sys.path.insert(0, os.environ["BENCH_TREE"])
        import xlviz

        assert Path(xlviz.__file__).resolve().is_relative_to(Path(os.environ["BENCH_TREE"]).resolve()), xlviz.__file__
        kind, *rest = args.worker
        result = worker_pages(Path(rest[0]), int(rest[1])) if kind == "pages" else worker_xquad(*map(Path, rest))
        print(json.dumps(result))
        return 0

    sys.path.insert(0, str(REPO))
    from tests.app_fixtures import make_run

    skip = set(filter(None, args.skip.split(",")))
    trees = [("before", Path(args.before).resolve())] if args.before else []
    trees.append(("after", REPO))
    xquad = None
    try:
        from xlviz.ui.common import shared_data_dir

        shared = shared_data_dir()
        xquad = shared / "xquad" if shared and (shared / "xquad").is_dir() else None
    except Exception:  # noqa: BLE001 - the XQuAD row is skipped without real data
        xquad = None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkpoints"
        make_run(root, "bench-run")
        results: dict[str, dict] = {}
        for name, tree in trees:
            r: dict = {}
            if "pages" not in skip:
                r["pages"] = _run_worker(tree, ["pages", str(root), str(args.repeat)])
            results[name] = r
        if "xquad" not in skip and xquad is not None:
            runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
            for _ in range(args.xquad_repeat):  # before and after alternate: both see the same load
                for name, tree in trees:
                    runs[name].append(_run_worker(tree, ["xquad", str(root), str(xquad),
                                                         str(root / "bench-run" / "export" / "monotrans-en")]))
            for name, got in runs.items():
                mid = sorted(got, key=lambda g: g["seconds"])[len(got) // 2]
                results[name]["xquad"] = dict(mid, all=[round(g["seconds"], 1) for g in got])
        if "idle" not in skip:
            results.setdefault("before", {})["idle"] = idle_cpu(root, "auto", args.idle_s)
            results["after"]["idle"] = idle_cpu(root, None, args.idle_s)

    cols = [n for n in ("before", "after") if n in results]
    print(f"\nload: {os.getloadavg()[0]:.1f} (1-min average, {os.cpu_count()} CPUs; shared with other work)")
    print(f"\n{'measure':<44}" + "".join(f"{c:>12}" for c in cols) + "   target")
    print("-" * (52 + 12 * len(cols)))
    for page in PAGES:
        vals = [results[c].get("pages", {}).get(page) for c in cols]
        if any(vals):
            print(f"{'page ' + page + ' (median s, cached models)':<44}"
                  + "".join(f"{v['median']:>12.2f}" if v else f"{'—':>12}" for v in vals) + f"   ≤ {PAGE_TARGET_S:.0f} s")
    vals = [results[c].get("xquad") for c in cols]
    if any(vals):
        print(f"{'XQuAD cold, 200 q × 3 languages (s)':<44}" + "".join(f"{v['seconds']:>12.1f}" if v else f"{'—':>12}" for v in vals)
              + f"   ≤ {XQUAD_TARGET_S:.0f} s")
    if any(v and "page" in v for v in vals):
        print(f"{'  of which the page, app started (s)':<44}" + "".join(f"{v['page']:>12.1f}" if v and "page" in v else f"{'—':>12}" for v in vals))
    if any(v and "cpu_s" in v for v in vals):
        print(f"{'  CPU seconds of the cold process':<44}" + "".join(f"{v['cpu_s']:>12.1f}" if v and "cpu_s" in v else f"{'—':>12}" for v in vals)
              + "   (load-independent)")
    vals = [results[c].get("idle") for c in cols]
    if any(v is not None for v in vals):
        print(f"{'idle tab, server CPU (% of a core)':<44}" + "".join(f"{v:>12.1f}" if v is not None else f"{'—':>12}" for v in vals)
              + f"   ≤ {IDLE_TARGET:.0f} %")
    print("\n(idle: 'before' runs Streamlit's default file watcher on this checkout, 'after' the shipped .streamlit/config.toml)")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
