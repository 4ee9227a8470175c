"""The registry of evaluation tasks (as google-research/xtreme has): what a run scores.

A *task* (one module of this package defining ``TASK``, a :class:`Task`) declares what it needs
of the data source (names of :data:`xlviz.data.sources.OFFERS`) and the kinds of source it is
written for; it scores either once per run in a stage of its own (``stage``: sentence retrieval
runs as soon as the encoders exist, before QA fine-tuning) or per system in the system's
scoring stage, ``s4_<system>`` (``score``). A task owns its scoring: the run only schedules
its stage or calls ``score`` (the QA task's own hooks: :class:`xlviz.transfer.tasks.qa.QA`).
A run lists the tasks it scores in its config's ``tasks`` (empty: every default task its
source supports); result rows carry ``task`` (a row that merges several tasks' fields for one
system and language lists them in ``tasks``).

Tasks registered at runtime (:func:`register`) are found beside the modules here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from xlviz.errors import XlvizError


@dataclass
class Task:
    name: str
    description: str
    needs: frozenset[str] = frozenset()
    kinds: tuple[str, ...] = ("world", "corpus")
    stage: str | None = None  # its own stage's name (run once per run), or None: scored per system
    order: int = 50
    default: bool = True  # scored when a run lists no tasks (opt-in tasks: only when listed)

    def applies(self, kind: str, offers: frozenset[str]) -> bool:
        """Whether a run on a source of ``kind`` offering ``offers`` can score this task."""
        return kind in self.kinds and self.needs <= offers

    def check(self, ctx: Any) -> None:
        """Refuse, before anything trains, data the task will not find (a missing file): one
        XlvizError naming the field. Called when the run is opened; by default nothing."""
        return None

    def run(self, ctx: Any) -> None:
        """Its own stage (tasks with ``stage``)."""
        raise NotImplementedError

    def score(self, ctx: Any, system: str) -> None:
        """Score ``system`` (in its ``s4_<system>`` stage; tasks without ``stage``)."""
        raise NotImplementedError


_TASKS: dict[str, Task] | None = None
_EXTRA: dict[str, Task] = {}


def degenerate_mark(ctx, system: str, languages: list[str]) -> dict:
    """The fields that mark a task's row of ``system`` as no result when one of the stages its
    encoders of ``languages`` come from is degenerate (``{}`` otherwise: only a mark, since a
    QA score of the same row judges more stages and writes its own verdict)."""
    from xlviz.methods import method_of
    from xlviz.training.verdicts import DEGENERATE, degenerate_encoder_stages

    method = method_of(system)
    stages = dict.fromkeys(s for lang in languages for s in method.encoder_stages(ctx, system, lang))
    bad = degenerate_encoder_stages(list(stages), ctx.run.verdicts())
    return {"verdict": DEGENERATE, "degenerate_stages": bad} if bad else {}


def tasks() -> dict[str, Task]:
    """Every task by name: this package's modules, then those registered at runtime."""
    global _TASKS
    if _TASKS is None:
        found: dict[str, Task] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            task = getattr(importlib.import_module(f"{__name__}.{info.name}"), "TASK", None)
            if isinstance(task, Task):
                found[task.name] = task
        _TASKS = found
    return dict(sorted({**_TASKS, **_EXTRA}.items(), key=lambda kv: (kv[1].order, kv[0])))


def register(task: Task) -> Task:
    """Add a task at runtime (a plug-in, a test); the CLI and the validation list it."""
    _EXTRA[task.name] = task
    return task


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def task_of(name: str) -> Task:
    table = tasks()
    if not isinstance(name, str) or name not in table:
        raise XlvizError(f"unknown task {name!r}; choose from {list(table)}", field="tasks")
    return table[name]


def run_tasks(names: list[str], kind: str, offers: frozenset[str], *, path: str | None = None) -> list[str]:
    """The tasks a run scores: ``names`` validated against the source (one line naming ``tasks``
    when a listed task cannot be scored there), or, when empty, every task that applies."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise XlvizError(f"expected a list of task names, got {names!r}", path=path, field="tasks")
    if not names:
        return [t.name for t in tasks().values() if t.default and t.applies(kind, offers)]
    for name in names:
        task = task_of(name)
        if kind not in task.kinds:
            raise XlvizError(f"task {name!r} is not written for {kind} sources (it scores on: {', '.join(task.kinds)})",
                             path=path, field="tasks")
        missing = sorted(task.needs - offers)
        if missing:
            raise XlvizError(f"task {name!r} needs {', '.join(missing)}, which the run's source does not offer", path=path, field="tasks")
    return list(dict.fromkeys(names))


__all__ = ["Task", "tasks", "task_of", "register", "unregister", "run_tasks"]
