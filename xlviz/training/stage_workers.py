"""Stages at once: run a staged run's independent stages side by side in worker processes.

Why: the small models of the bench gain almost nothing from a second thread (a masked-LM step
of the demo's model runs as fast on one core as on two) but a second core can train another
stage: the two pair models of ``jointpair-disjoint``, MONOTRANS's step 2 per language, the
fine-tunings. Each stage is seeded by its name and reads only the stages it waits for
(``StagedRun.needs``), so which worker runs it and in what order changes nothing.

The process holding the run's writer lock schedules and stays the run's only writer of
``status.json``, ``metrics.jsonl``, ``log.txt``, ``results.json`` and ``manifest.json``: a worker sends its log
lines, metrics, progress, stage verdicts, result rows and manifest entries as JSON lines on its stdout (its own prints go to
stderr) and writes only the folders of the stage it runs, atomically. Workers are started with
``python -m xlviz.training.stage_workers`` (a fresh interpreter, no fork of a process holding
torch threads), read one stage per line on stdin, die with their parent (Linux) and on
SIGTERM stop like Ctrl-C, leaving nothing half-written (``atomic_dir``).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from xlviz.errors import XlvizError

THREADS_ENV = "XLVIZ_WORKER_THREADS"  # torch threads per worker (default: the cores / workers)
BAR_ENV = "XLVIZ_BAR_POSITION"  # the worker's progress-bar line in a terminal


class Worker:
    """One worker process and the stage it runs."""

    def __init__(self, owner, slot: int, threads: int):
        cls = type(owner)
        env = {**os.environ, THREADS_ENV: os.environ.get(THREADS_ENV, str(threads)), BAR_ENV: str(slot),
               "OMP_NUM_THREADS": os.environ.get(THREADS_ENV, str(threads))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xlviz.training.stage_workers", f"{cls.__module__}:{cls.__qualname__}", str(owner.run.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.buffer = b""
        self.slot = slot
        self.stage: str | None = None
        self.started = 0.0

    def start(self, stage: str, index: int) -> None:
        self.stage, self.started = stage, time.time()
        self.proc.stdin.write((json.dumps({"stage": stage, "index": index}) + "\n").encode())
        self.proc.stdin.flush()

    def messages(self) -> list[dict] | None:
        """The complete messages that have arrived (read without blocking after ``select``
        said the pipe is readable: a buffered ``readline`` would hide later lines from
        ``select``); None at end of output (the worker stopped)."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def stop(self, force: bool) -> None:
        """End of input (an idle worker exits); ``force``: SIGTERM too (a busy one stops mid-stage)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            if force:
                self.proc.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> None:
        """Wait for the worker to exit until ``deadline`` (``time.monotonic``), then kill it."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_stages(owner, plan: list[str], workers: int) -> None:
    """Run the stages of ``plan`` not yet done, each as soon as its ``needs`` are, on up to
    ``workers`` processes; mark each done as it finishes. Raises on the first failed stage
    (after stopping the others)."""
    run = owner.run
    done = {s for s in plan if run.stage_done(s)}
    pending = [s for s in plan if s not in done]
    index = {s: i for i, s in enumerate(owner.plan())}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cores // workers)
    pool: list[Worker] = []
    progress: dict[str, dict] = {}
    failed = True
    owner._log(f"running up to {workers} stages at once ({threads} thread{'s' * (threads > 1)} each)")
    try:
        while pending or any(w.stage for w in pool):
            running = {w.stage for w in pool if w.stage}
            for stage in [s for s in pending if owner.needs(s) <= done]:
                idle = [w for w in pool if w.stage is None]
                if not idle and len(pool) < workers:
                    pool.append(Worker(owner, len(pool), threads))
                    idle = [pool[-1]]
                if not idle:
                    break
                pending.remove(stage)
                running.add(stage)
                owner._log(f"stage {len(done) + len(running)}/{len(plan)}: {stage}")
                idle[0].start(stage, index[stage])
            busy = [w for w in pool if w.stage]
            if not busy:
                raise XlvizError(f"stages {pending} wait for stages that are not in the run", field="methods")
            _status(owner, busy, plan, done, progress)
            ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 2.0)
            for w in busy:
                if w.proc.stdout not in ready:
                    continue
                messages = w.messages()
                if messages is None:
                    code = w.proc.wait()
                    raise XlvizError(f"the worker running stage {w.stage!r} stopped (exit code {code}); resume the run to retry it")
                for message in messages:
                    if _handle(owner, message, progress):
                        seconds = time.time() - w.started
                        run.mark_stage_done(w.stage, seconds)
                        done.add(w.stage)
                        progress.pop(w.stage, None)
                        owner._log(f"  {w.stage} done in {seconds:.0f} s")
                        w.stage = None
        failed = False
        owner._status(running=None)
    finally:
        # every worker told first, then one shared deadline: stopping N busy workers takes at
        # most 60 s in all, not 60 s each (a cancelled run must end promptly on a loaded machine)
        for w in pool:
            w.stop(force=failed)
        deadline = time.monotonic() + (60 if failed else 600)
        for w in pool:
            w.wait(deadline)


def _handle(owner, message: dict[str, Any], progress: dict[str, dict]) -> bool:
    """Act on one worker message; True when it says its stage is done."""
    run = owner.run
    if "log" in message:
        owner._log(message["log"])
    if "metric" in message:
        owner.record_metric(message["metric"])
    if "progress" in message:
        progress[message["progress"]["stage"]] = message["progress"]
    if "verdict" in message:
        verdict = dict(message["verdict"])
        run.record_verdict(str(verdict.pop("stage")), verdict)
    if "results" in message:
        owner.add_results(message["results"])
    if "result_fields" in message:
        owner.add_result_fields(message["result_fields"])
    if "artefacts" in message:
        run.record_artefacts(message["artefacts"])
    if "failed" in message:
        if message.get("kind") == "XlvizError":
            raise XlvizError(message["error"])
        raise RuntimeError(f"stage {message['failed']!r} failed: {message['error']}")
    return "done" in message


def _status(owner, busy: list[Worker], plan: list[str], done: set[str], progress: dict[str, dict]) -> None:
    """``stage``: the running stage first in the plan; ``running``: all of them; ``progress``:
    their finished shares summed (``fraction``), so the Runs page's bar counts every one."""
    running = sorted((w.stage for w in busy), key=plan.index)
    share = sum(p["step"] / p["total"] for s, p in progress.items() if s in running and p.get("total"))
    owner._status(stage=running[0], running=running, stage_index=len(done), n_stages=len(plan),
                  progress={"stage": running[0], "fraction": round(share, 4), **({k: progress[running[0]][k] for k in ("step", "total")}
                                                                                  if running[0] in progress else {})})


# --------------------------------------------------------------------------- the worker
def _die_with_parent() -> None:
    """Linux: get SIGTERM when the scheduling process dies (kill -9 included)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # prints (logs, progress bars) go to stderr; stdout carries the messages
    _die_with_parent()
    import torch

    torch.set_num_threads(int(os.environ.get(THREADS_ENV, "1")))
    target, run_dir = argv
    module, _, name = target.partition(":")
    if not module.startswith("xlviz."):
        raise SystemExit(f"not an xlviz run class: {target}")
    cls = getattr(importlib.import_module(module), name)
    owner = cls.resume(Path(run_dir))
    owner._channel = channel
    from xlviz.io import confine_writes
    from xlviz.runs import sigterm_as_interrupt

    with confine_writes(owner.run.path), sigterm_as_interrupt():
        for line in sys.stdin:
            job = json.loads(line)
            try:
                owner.execute(job["stage"], int(job["index"]))
            except KeyboardInterrupt:
                return 130
            except Exception as e:  # reported to the owner, which fails the run with it
                expected = isinstance(e, (XlvizError, OSError))  # bad input or the machine: one line
                if not expected:
                    import traceback

                    traceback.print_exc()
                owner.send(failed=job["stage"], kind="XlvizError" if expected else type(e).__name__,
                           error=str(e) if expected else f"{type(e).__name__}: {e}")
                return 1
            owner.send(done=job["stage"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
