"""The bench of methods on the generated world: one run trains several systems (MONOTRANS,
its variants and floor, the joint multilingual baselines, ...) on the same world, corpora, QA
sets, model size and step budget, and scores each zero-shot in every language.

The stages come from the methods (:mod:`xlviz.methods`): each system lists its stages, stages
of the same name run once (the world, the tokenizers, MONOTRANS's step 1), and the plan orders
them by phase (data, pre-training, transfer, fine-tuning) and then by first appearance; the
tasks' own stages (sentence retrieval) come before fine-tuning; then one scoring stage per
system (``s4_<system>`` on disk, :func:`xlviz.runs.scoring_stage`) in which the tasks
(:mod:`xlviz.transfer.tasks`) score the system: the QA task exports its QA model and its
encoder per language, writes the predictions and the result rows. The plan holds typed stages
(:class:`PlannedStage`: a kind and, for a scoring stage, the system); their names are only what
the run folder records. This class schedules (what runs when, resume, seeding, the manifest's
stage of each artefact) and scores nothing itself; it is a plain user of the generic
:class:`~xlviz.training.staged.StagedRun` (status, resume, seeding, accelerate).

Run folder: ``world/``, one ``save_pretrained`` folder per training stage, the QA export of each
system and language (QA model + tokenizer, plain Hugging Face), its encoder (the masked LM that
reads that language in that system, for the analysis pages), predictions, ``results.json``; each
export, encoder and predictions file is recorded in ``manifest.json`` (:mod:`xlviz.runs`), where
every reader finds it.
"""

from __future__ import annotations

import enum
import functools
import zlib
from dataclasses import dataclass
from pathlib import Path

from transformers.utils import logging as hf_logging

from xlviz.data.world import World
from xlviz.errors import XlvizError
from xlviz.methods import method_of
from xlviz.methods.base import PHASES, Stage
from xlviz.runs import scoring_stage
from xlviz.training.loop import make_accelerator, run_precision
from xlviz.training.staged import StagedRun
from xlviz.transfer.config import TransferConfig

hf_logging.disable_progress_bar()
hf_logging.set_verbosity_error()


class StageKind(enum.Enum):
    """What a stage of the plan is: a method's stage (data, pre-training, transfer,
    fine-tuning; :class:`xlviz.methods.base.Stage`), a task's own stage (run once per run), or
    the stage that scores one system (its per-system tasks; on a corpus source also its
    encoders' export)."""

    METHOD = "method"
    TASK = "task"
    SCORE = "score"


@dataclass(frozen=True)
class PlannedStage:
    """One stage of the plan, typed: its ``kind`` and, for a scoring stage, the ``system`` it
    scores; a method's or a task's stage carries the name its method or task gives it
    (``given``). :attr:`name` is what status.json, manifest.json, metrics.jsonl and the log
    record."""

    kind: StageKind
    system: str | None = None
    given: str | None = None

    @property
    def name(self) -> str:
        return scoring_stage(self.system) if self.kind is StageKind.SCORE else self.given


class Pipeline(StagedRun):
    """One bench run on the generated world: ``Pipeline(cfg, run_dir).run_all()``;
    ``Pipeline.resume(run_dir).run_all()``."""

    config_class = TransferConfig

    def __init__(self, config: TransferConfig, run_dir: str | Path):
        from xlviz.data.sources import source_of
        from xlviz.transfer.tasks import run_tasks

        self.source = source_of(config.source)
        self.source_kind = self.source.kind
        self.offers = config.offers()
        self.task_names = run_tasks(list(config.tasks), self.source_kind, self.offers)
        # the run's data, read the same way on every source (xlviz.data.sources.RunData); the world
        # itself stays at hand for its own stage and the resources only it offers
        if self.source_kind == "world":
            from xlviz.data.sources.world import WorldData

            self.world = World(config.world)
            self.data = WorldData(self.world)
        else:  # a corpus source: text files streamed by the stages (xlviz.methods.corpus)
            from xlviz.data.sources.files import CorpusData

            self.world = None
            self.data = CorpusData(config.source_options())
        from xlviz.transfer.tasks import task_of

        for name in self.task_names:  # a missing file the tasks read: one line before anything trains
            task_of(name).check(self)
        super().__init__(config, run_dir)

    def stage_seed(self, stage: str, index: int) -> int:
        """Seeded by the stage's name, not its place in the plan: a system gets the same
        numbers whichever other systems share its run. On corpus sources the stages of the
        systems that ran there before the one pipeline (MONOTRANS and its floor: the method's
        ``seeds_by_place``) and the tasks' stages keep that seeding (by place in the plan of
        those stages alone), so those runs keep their numbers whichever systems join them."""
        if self.source_kind == "corpus" and stage in self._placed:
            return super().stage_seed(stage, self._placed.index(stage))
        return self.cfg.seed * 7919 + zlib.crc32(stage.encode()) % 1_000_003

    @functools.cached_property
    def _placed(self) -> list[str]:
        """A corpus run's stages seeded by place: every stage but those only systems seeded by name run."""
        own = {system: {s.name for s in self._lists[system]} | {self._scoring[system].name} for system in self.cfg.systems}
        by_place = {s for system, names in own.items() if method_of(system).seeds_by_place(system) for s in names}
        by_name = {s for system, names in own.items() if not method_of(system).seeds_by_place(system) for s in names}
        return [s for s in self.plan() if s in by_place or s not in by_name]

    def make_accelerator(self):
        if self.source_kind == "corpus":  # batch_size is global: N processes share each batch (xlviz.transfer.runner)
            return super().make_accelerator()
        # Batches here are per process (each process trains on its shard of the world's data).
        return make_accelerator(run_precision(self.cfg.mixed_precision), self.cfg.grad_accum, **self.tracker_kwargs())

    def workers(self) -> int:
        """A corpus run's stages run one after the other (they stream the same files)."""
        return 1 if self.source_kind == "corpus" else super().workers()

    # --- tasks (xlviz.transfer.tasks) --------------------------------------------------
    def _task_stages(self) -> dict[str, object]:
        """The run's tasks that have a stage of their own, by stage name."""
        from xlviz.transfer.tasks import task_of

        return {t.stage: t for t in map(task_of, self.task_names) if t.stage}

    def add_task_rows(self, task: str, rows: list[dict]) -> None:
        """Result fields of ``task``: merged by (system, language) with the fields other tasks
        wrote for the same system and language; ``tasks`` lists the tasks a row holds."""
        if not self.main:
            return
        held = {(r.get("system"), r.get("language")): r.get("tasks", []) for r in self.run.results()}
        rows = [{**r, "tasks": list(dict.fromkeys([*held.get((r["system"], r["language"]), []), task]))} for r in rows]
        self.add_result_fields(rows)

    # --- plan -------------------------------------------------------------------------
    @functools.cached_property
    def _stages(self) -> dict[str, Stage]:
        return self.stage_table()

    def stage_table(self) -> dict[str, Stage]:
        """Every training stage of the run's systems by name, in plan order."""
        seen: dict[str, Stage] = {}
        for system in self.cfg.systems:
            for stage in self._lists[system]:
                seen.setdefault(stage.name, stage)
        order = sorted(enumerate(seen.values()), key=lambda iv: (PHASES[iv[1].phase], iv[0]))
        return {s.name: s for _, s in order}

    @functools.cached_property
    def _scoring(self) -> dict[str, PlannedStage]:
        """Each system's scoring stage, by system."""
        return {system: PlannedStage(StageKind.SCORE, system=system) for system in self.cfg.systems}

    @functools.cached_property
    def planned(self) -> dict[str, PlannedStage]:
        """The plan, typed, by the names the run folder records: the training stages by phase;
        the tasks' own stages (sentence retrieval) once the encoders exist, before QA
        fine-tuning; then one scoring stage per system that scores the per-system tasks (a
        corpus run always has them: they also export each system's encoders, which the pages
        open; a world run without per-system tasks has none)."""
        train = [PlannedStage(StageKind.METHOD, given=n) for n, s in self._stages.items() if s.phase != "finetune"]
        finetune = [PlannedStage(StageKind.METHOD, given=n) for n, s in self._stages.items() if s.phase == "finetune"]
        tasks = [PlannedStage(StageKind.TASK, given=n) for n in self._task_stages()]
        scored = list(self._scoring.values()) if self.per_system_tasks() or self.source_kind == "corpus" else []
        return {s.name: s for s in train + tasks + finetune + scored}

    def plan(self) -> list[str]:
        return list(self.planned)

    def per_system_tasks(self) -> list[str]:
        """The run's tasks scored inside each system's scoring stage (no stage of their own)."""
        own = {t.name for t in self._task_stages().values()}
        return [t for t in self.task_names if t not in own]

    def run_all(self) -> list[dict]:
        self.check_trackers()  # before the rescoring below writes status.json
        if self.main and self.run.exists():
            self.rescore_added_tasks()
        rows = super().run_all()
        if self.main:
            self.run.update_status(tasks_scored=list(self.task_names))
        return rows

    def rescore_added_tasks(self) -> None:
        """A resume whose ``tasks`` (edited in config.json) name a per-system task the done
        scoring stages did not score runs those stages again: a done stage is skipped, so the
        added task would otherwise be left out in silence (a task with its own stage just runs).
        The tasks scored are recorded in status.json (``tasks_scored``); a run written before
        that record is judged by the tasks its result rows hold."""
        status = self.run.status()
        scored = status.get("tasks_scored")
        if scored is None:
            rows = [r for r in self.run.results() if "tasks" in r]
            # rows written before they named their tasks: nothing to compare with, leave the run as it is
            scored = sorted({t for r in rows for t in r["tasks"]}) if rows else list(self.task_names)
        added = [t for t in self.per_system_tasks() if t not in scored]
        done = set(status.get("stages_done", []))
        redo = [s.name for s in self._scoring.values() if s.name in done]
        if added and redo:
            self.run.unmark_stages(redo)
            self._log(f"task(s) {', '.join(added)} added since the scoring stages ran: {', '.join(redo)} run again")
        self.run.update_status(tasks_scored=list(self.task_names))

    @functools.cached_property
    def _lists(self) -> dict[str, list[Stage]]:
        """Each system's stages, as its method lists them."""
        return {system: method_of(system).stages(self, system) for system in self.cfg.systems}

    def needs(self, stage: str) -> set[str]:
        """What ``stage`` waits for: every data stage (the world, the vocabularies), and, in the
        list of each system that runs it, the stages of earlier phases (MONOTRANS's step 2
        waits for its step 1, not for the joint models' pre-training), plus the same-phase
        stages it names (``Stage.needs``); a system's scoring stage waits for the system's
        stages. A stage that reads a folder outside these fails (``StagedRun.path``)."""
        if self.source_kind == "corpus":  # one stage after the other, as planned
            plan = self.plan()
            return set(plan[: plan.index(stage)])
        planned = self.planned.get(stage)
        if planned is not None and planned.kind is StageKind.SCORE:
            own = {s.name for s in self._lists[planned.system]}
            return own | {n for s in own for n in self.needs(s)}
        st = self._stages[stage]
        out = set(st.needs)
        if st.phase == "data":
            return out
        out |= {n for n, s in self._stages.items() if s.phase == "data"}
        for stages in self._lists.values():
            if any(s.name == stage for s in stages):
                out |= {s.name for s in stages if PHASES[s.phase] < PHASES[st.phase]}
        return out

    def run_stage(self, stage: str) -> None:
        planned = self.planned[stage]
        if planned.kind is StageKind.SCORE:
            return self.score_system(planned.system)
        if planned.kind is StageKind.TASK:
            return self._task_stages()[stage].run(self)
        self._stages[stage].execute(self)

    def score_system(self, system: str) -> None:
        """A system's scoring stage: each per-system task scores it (the QA task on the world
        also exports its models); on a corpus source its encoders are exported too."""
        from xlviz.transfer.tasks import task_of

        for task in map(task_of, self.task_names):
            if not task.stage:
                task.score(self, system)
        if self.source_kind == "corpus":  # the world's QA task exports them with its rows
            from xlviz.transfer.exports import export_encoders

            export_encoders(self, system)

    def finetune_corpus_qa(self) -> None:
        """MONOTRANS's step 3 on a corpus source (its stage, :func:`xlviz.methods.monotrans.corpus_stages`, asks
        the run; the QA task trains it)."""
        self._qa().finetune(self)

    @staticmethod
    def _qa():
        """The QA task (:mod:`xlviz.transfer.tasks.qa`), which owns QA fine-tuning on a corpus
        source and the judging of a QA model, whether or not the run scores it."""
        from xlviz.transfer.tasks import task_of

        return task_of("qa")

    # --- verdicts ----------------------------------------------------------------------
    def judged_mlm(self, stage: str) -> bool:
        """Pre-training stages from scratch are judged on their MLM loss, on every source (step 2,
        PPA and step 1b, a head on a pre-trained body, record theirs)."""
        return stage in self._stages and self._stages[stage].phase == "pretrain" and stage != "s1b_mlm_head"

    # --- hooks a QA fine-tuning on the world's L1 training set asks for (the QA task answers) --
    def judge_qa(self, stage: str, model, tokenizer) -> None:
        """Judge the fine-tuned QA model against the trivial baseline (:meth:`xlviz.transfer.tasks.qa.QA.judge`)."""
        self._qa().judge(self, stage, model, tokenizer)

    def dev_scorer(self, tok, stage: str):
        """``on_eval`` with dev EM/F1 during fine-tuning (:meth:`xlviz.transfer.tasks.qa.QA.dev_scorer`)."""
        return self._qa().dev_scorer(self, tok, stage)

    # --- data only some systems may read ------------------------------------------------
    def parallel_train(self, system: str, l2: str) -> list[dict]:
        """The source's parallel training pairs for ``l2`` (on a corpus source its parallel training
        files, scored lines left out), for a system that declares them (``uses()['parallel_pairs']``),
        cut to the number of pairs it declares."""
        n = method_of(system).uses(system, self.cfg)["parallel_pairs"]
        if not n:
            raise XlvizError(f"system {system!r} declares no parallel data (uses()['parallel_pairs'] is 0)", field="methods")
        return self.data.parallel_train(l2, n)

    def translate_train(self, system: str, l2: str) -> dict:
        """The L1 QA training set rendered in ``l2``, for a translate-train system only: a
        zero-shot system asking for it is a bug, and fails loudly."""
        if not method_of(system).uses(system, self.cfg)["l2_labels"]:
            raise XlvizError(f"system {system!r} is zero-shot (uses()['l2_labels'] is false): it may not read L2 QA labels", field="methods")
        return self.world.translate_train(l2)

    def test_translation(self, system: str, l2: str) -> dict:
        """The L1 version of ``l2``'s test set (the gold translation of every test context),
        for a translate-test system only: any other system asking for it is a bug."""
        if not method_of(system).uses(system, self.cfg).get("translate_test"):
            raise XlvizError(f"system {system!r} does not declare translate-test (uses()['translate_test'] is false): "
                             "it may not read the test set's translation", field="methods")
        return self.world.qa("test", self.world.l1)


def run_transfer(config: TransferConfig, run_dir: str | Path) -> list[dict]:
    return Pipeline(config, run_dir).run_all()


def resume_transfer(run_dir: str | Path) -> list[dict]:
    return Pipeline.resume(run_dir).run_all()
