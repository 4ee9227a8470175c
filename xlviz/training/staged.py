"""The generic staged run: a list of named stages writing one run folder, with status,
resume, per-stage seeding, metrics, atomic stage folders and one accelerator.

Why: every long job of xlviz (the generated-world bench of methods, MONOTRANS on real corpora,
QA fine-tuning of any encoder) is the same loop: write the config once, then for each stage not
yet in ``status.json["stages_done"]`` seed, run it, record it. A killed run resumes from its
last completed stage. This class knows nothing of worlds, corpora or methods: a user supplies a
config class, ``plan()`` (the stage names) and ``run_stage(name)``.

Scale-out contract (``accelerate launch --num_processes N -m xlviz ...``): only the main
process writes files; every process runs every stage (training is sharded inside a stage) and
waits for the others at stage boundaries.

Stages at once (``workers`` > 1 in the config, one process): stages whose ``needs()`` are done
run side by side in worker processes (:mod:`xlviz.training.stage_workers`), for small models
gain almost nothing from a second thread but a lot from a second core running another stage.
The process holding the run's writer lock stays its only writer of status, metrics, log and
results; a worker writes only the folders of the stage it runs.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from accelerate.utils import DataLoaderConfiguration

from xlviz.errors import XlvizError, shown_keys
from xlviz.io import atomic_dir
from xlviz.names import check_config
from xlviz.runs import Run, now_iso, package_versions
from xlviz.training.loop import LoopConfig, make_accelerator, run_precision
from xlviz.training.masking import masking
from xlviz.training.verdicts import DEGENERATE, MLM_MARGIN, UNJUDGED, StageMonitor, mlm_verdict


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class ConfigMixin:
    """``from_dict`` (unknown keys named), ``from_file``, ``to_dict`` for run configs (dataclasses)."""

    @classmethod
    def from_dict(cls, d: dict, *, path: str | None = None):
        if not isinstance(d, dict):
            raise XlvizError("a run config must be a JSON object", path=path)
        d = {k: v for k, v in d.items() if k not in ("versions", "_comment", "_doc") and not k.startswith("//")}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise XlvizError(f"unknown setting(s) {shown_keys(unknown)}; known: {sorted(known)}", path=path, field=unknown[0])
        try:
            cfg = cls(**d)
        except TypeError as e:
            raise XlvizError(f"bad config: {e}", path=path) from None
        cfg.validate(path=path)
        check_config(cfg, path=path)
        return cfg

    @classmethod
    def from_file(cls, path: str | Path):
        from xlviz.io import read_json

        return cls.from_dict(read_json(path, what="run config"), path=str(path))

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self, *, path: str | None = None) -> None:  # overridden
        return None


def check_positive(cfg, names: Sequence[str], path: str | None, *, number: bool = False) -> None:
    for name in names:
        v = getattr(cfg, name)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 if number else isinstance(v, int) and not isinstance(v, bool) and v > 0
        if not ok:
            raise XlvizError(f"must be a positive {'number' if number else 'integer'}, got {v!r}", path=path, field=name)


def make_global_batch_accelerator(mixed_precision: str = "no", grad_accum: int = 1, **kwargs):
    """An Accelerator whose LR scheduler steps once per optimizer step whatever the number of
    processes. (accelerate's default, ``split_batches=False``, assumes the batch grows with the
    processes and steps a prepared scheduler ``num_processes`` times per step, so with N
    processes a linear schedule would reach zero after steps / N. Here batches are global.)
    No dataloader is prepared, so ``split_batches`` changes nothing else."""
    return make_accelerator(mixed_precision, grad_accum, dataloader_config=DataLoaderConfiguration(split_batches=True), **kwargs)


class StagedRun:
    """``MyRun(config, run_dir).run_all()``; ``MyRun.resume(run_dir).run_all()``.

    Subclasses set ``config_class`` and implement ``plan()`` and ``run_stage(stage)``.
    ``config`` needs ``seed``, ``mixed_precision``, ``grad_accum`` and ``log_every``.
    """

    config_class: type = ConfigMixin
    stop_after: str | None = None  # run the plan up to and including this stage (then state "cancelled": resume continues)

    def __init__(self, config, run_dir: str | Path):
        self.cfg = config
        self.run = Run(Path(run_dir))
        self._tracking: bool | None = None  # None: trackers not started yet; False: none (or failed)
        self.acc = self.make_accelerator()
        self.main = self.acc.is_main_process
        self.t0 = time.time()

    def make_accelerator(self):
        return make_global_batch_accelerator(run_precision(self.cfg.mixed_precision), self.cfg.grad_accum, **self.tracker_kwargs())

    # --- trackers (xlviz.training.tracking) ----------------------------------------------
    def trackers(self) -> tuple[list[str], list[str]]:
        """(the config's ``log_with`` trackers installed here, those that are not)."""
        from xlviz.training.tracking import DEFAULT, available, parse_log_with

        return available(parse_log_with(getattr(self.cfg, "log_with", DEFAULT)))

    def tracker_kwargs(self) -> dict:
        """``Accelerator`` arguments for the run's trackers: their files go under the run folder."""
        names, _ = self.trackers()
        return {"log_with": names, "project_dir": str(self.run.path)} if names else {}

    def check_trackers(self) -> None:
        """Refuse, before the run writes anything, a tracker folder that would carry the
        trackers' files out of the run (:func:`xlviz.training.tracking.check_tracker_folder`)."""
        if self.main and self.trackers()[0]:
            from xlviz.training.tracking import check_tracker_folder

            check_tracker_folder(self.run.path)

    def record_metric(self, metric: dict) -> None:
        """One metrics row: to ``metrics.jsonl`` and to the run's trackers (same values). Called
        only by the process that writes the run (stage workers send their rows to it)."""
        self.run.log_metric(**metric)
        if self._tracking is None:
            self._start_tracking()
        if self._tracking:
            from xlviz.training.tracking import scalars

            try:
                self.acc.log(scalars(metric), step=int(metric.get("step", 0)))
            except Exception as e:  # noqa: BLE001 - a tracker's failure must not fail the run
                self._tracking = False
                self.run.log(f"trackers stopped: {type(e).__name__}: {e}")

    def _start_tracking(self) -> None:
        from xlviz.training.tracking import PROJECT, check_tracker_folder, flat_config

        names, missing = self.trackers()
        self._tracking = False
        if missing:
            self.run.log(f"tracker(s) {', '.join(missing)} not installed here: skipped (metrics.jsonl has every value)")
        if not names or not self.main:
            return
        check_tracker_folder(self.run.path)  # a linked tensorboard/ fails the run, never written through
        try:
            self.acc.init_trackers(PROJECT, config=flat_config(self.cfg.to_dict()))
            self._tracking = True
        except Exception as e:  # noqa: BLE001
            self.run.log(f"trackers not started: {type(e).__name__}: {e}")

    def end_tracking(self) -> None:
        if self._tracking:
            try:
                self.acc.end_training()
            except Exception as e:  # noqa: BLE001
                self.run.log(f"trackers did not close cleanly: {type(e).__name__}: {e}")
        self._tracking = None

    @classmethod
    def resume(cls, run_dir: str | Path):
        run = Run(Path(run_dir))
        if not run.exists():
            raise XlvizError("not a run folder (no config.json)", path=run_dir)
        return cls(cls.config_class.from_dict(run.config(), path=str(run.config_path)), run_dir)

    # --- plan -------------------------------------------------------------------------
    def plan(self) -> list[str]:  # overridden: every stage of the run
        raise NotImplementedError

    def run_stage(self, stage: str) -> None:  # overridden
        raise NotImplementedError

    def stages(self) -> list[str]:
        plan = self.plan()
        if self.stop_after is None:
            return plan
        if self.stop_after not in plan:
            raise XlvizError(f"unknown stage {self.stop_after!r}; the stages are {plan}", field="stop_after")
        return plan[: plan.index(self.stop_after) + 1]

    def stage_seed(self, stage: str, index: int) -> int:
        """The seed set before ``stage`` (its index in the plan)."""
        return self.cfg.seed * 7919 + index

    def needs(self, stage: str) -> set[str]:
        """The stages that must be done before ``stage`` starts: by default every stage before
        it in the plan (one at a time); runs whose stages are independent override this."""
        plan = self.plan()
        return set(plan[: plan.index(stage)])

    def workers(self) -> int:
        """How many stages run at once: the config's ``workers`` (0: one per CPU core this
        process may use, at most 4); 1 under ``accelerate launch`` with several processes,
        which share each stage instead."""
        n = int(getattr(self.cfg, "workers", 1) or 0)
        if n == 0:
            n = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 4)
        return 1 if self.acc.num_processes > 1 else max(n, 1)

    def config_record(self) -> dict:
        """What ``config.json`` holds: the config and the package versions."""
        return {**self.cfg.to_dict(), "versions": package_versions()}

    # --- helpers for stages ----------------------------------------------------------------
    _current: str | None = None  # the stage running in this process
    _channel: Any = None  # in a stage worker: messages to the process that owns the run

    def path(self, *parts: str) -> Path:
        """A path in the run folder. While a stage runs, reading another stage's folder that
        it does not (transitively) wait for is a bug in the stage's ``needs``: it fails here,
        whether or not the run executes stages at once."""
        if parts and self._current is not None and parts[0] != self._current and parts[0] in self._plan_set():
            if parts[0] not in self.all_needs(self._current):
                raise RuntimeError(f"stage {self._current!r} reads {parts[0]!r}, which it does not wait for: declare it in the stage's needs")
        return self.run.path.joinpath(*parts)

    def _plan_set(self) -> frozenset[str]:
        if getattr(self, "_plan_cache", None) is None:
            self._plan_cache = frozenset(self.plan())
        return self._plan_cache

    def all_needs(self, stage: str) -> set[str]:
        """``needs`` of ``stage``, transitively."""
        seen: set[str] = set()
        todo = [stage]
        while todo:
            for n in self.needs(todo.pop()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    def stage_dependencies(self, stage: str) -> list[str]:
        """What a stage folder's manifest entry records as ``depends_on``: every stage it
        (transitively) waits for, sorted, then itself."""
        return [*sorted(self.all_needs(stage)), stage]

    def send(self, **message: Any) -> None:
        """In a stage worker: one message (a JSON line) to the run's owner."""
        import json

        self._channel.write(json.dumps(message, ensure_ascii=False) + "\n")
        self._channel.flush()

    def world_file(self, kind: str, **fields: str) -> Path:
        """One of the files the world stage wrote (:func:`xlviz.runs.world_path`: its manifest
        entry, else its conventional place), through :meth:`path`: a stage reading it must wait
        for the stage that wrote it."""
        from xlviz.runs import world_path

        return self.path(*world_path(self.run, kind, **fields).relative_to(self.run.path).parts)

    def tokenizer(self, lang: str):
        """The run's tokenizer of ``lang`` (written by its first stage, ``world``)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.world_file("tokenizer", language=lang))

    def _status(self, **fields: Any) -> None:
        if self.main and self._channel is None:
            self.run.update_status(**fields)

    def log(self, msg: str) -> None:
        if self._channel is not None:
            return self.send(log=msg)
        if self.main:
            self.run.log(msg)
            print(msg, flush=True)

    def loop(self, stage: str, steps: int, lr: float, *, pretraining: bool | str = False) -> tuple[LoopConfig, Callable]:
        """A loop config and an ``on_log`` writing metrics and progress for ``stage``; the
        config's monitor collects what the stage's verdict is judged on (:meth:`judge`).
        ``pretraining``: a masked-LM pre-training from scratch, warmed up over
        ``pretrain_warmup_ratio`` of its updates, ``"joint"`` (a model pre-trained on several
        languages at once) over ``joint_warmup_ratio`` (the plateau fix, docs/methods.md), or
        ``"l2_body"`` (an L2's own body) over ``l2_body_warmup_ratio``; other stages over
        ``warmup_ratio``."""
        warmup = {"joint": "joint_warmup_ratio", "l2_body": "l2_body_warmup_ratio",
                  True: "pretrain_warmup_ratio"}.get(pretraining, "warmup_ratio")
        monitor = StageMonitor()
        self.__dict__.setdefault("_monitors", {})[stage] = monitor
        cfg = LoopConfig(steps=steps, lr=lr, grad_accum=self.cfg.grad_accum, log_every=self.cfg.log_every,
                         eval_every=int(getattr(self.cfg, "eval_every", 0) or 0), monitor=monitor,
                         warmup_ratio=float(getattr(self.cfg, warmup, LoopConfig.warmup_ratio)),
                         adam_beta2=float(getattr(self.cfg, "adam_beta2", LoopConfig.adam_beta2)))

        def on_log(step: int, loss: float, elapsed: float, **dev: float) -> None:
            metric = {"stage": stage, "step": step, "loss": round(loss, 5), "elapsed": round(elapsed, 2),
                      **{k: round(float(v), 4) for k, v in dev.items()}}
            progress = {"stage": stage, "step": step, "total": steps, "elapsed": round(elapsed, 2)}
            if self._channel is not None:
                return self.send(metric=metric, progress=progress)
            self.record_metric(metric)
            self.run.update_status(progress=progress)

        return cfg, on_log

    def save(self, model, stage_dir: Path, tokenizer=None, *, language: str | None = None, role: str | None = None,
             variant: str | None = None, record: dict | None = None) -> None:
        """``save_pretrained`` (safetensors) into ``stage_dir`` atomically, main process only. A
        folder directly in the run (a stage's own) is recorded in the run's manifest as a
        ``stage`` entry with what it is (``language``, ``role``: pretrained / transferred /
        finetuned, ``variant``), so readers never parse its name. ``record``: the
        folder's ``xlviz.json`` (:mod:`xlviz.models.export_record`), written with it."""
        if not self.main:
            return
        with atomic_dir(stage_dir) as tmp:
            model.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
            if record is not None:
                from xlviz.models.export_record import write_record

                write_record(tmp, record)
        if Path(stage_dir).parent == self.run.path:
            # a stage's weights come from itself and every stage it waits for
            deps = None if self._current is None else self.stage_dependencies(self._current)
            self.record_artefact("stage", Path(stage_dir), language=language, role=role, variant=variant, depends_on=deps)

    # --- the artefact manifest (xlviz.runs) ---------------------------------------------
    def record_artefact(self, kind: str, path: Path, *, shared: bool = False, depends_on: list[str] | None = None,
                        **fields: str | None) -> None:
        """Record ``path`` (inside the run) in ``manifest.json`` with the stage writing it: by
        the run's writer (as results.json), sent to it from a stage worker. ``shared``: a file
        several stages may write alike (stored encodings, named by their content), recorded
        without the stage, so the manifest reads the same whichever stage wrote it first.
        ``depends_on``: the training stages its weights come from (readers refuse an artefact
        built on a degenerate stage)."""
        if not self.main:
            return
        entry = {"kind": kind, "path": Path(path).relative_to(self.run.path).as_posix(),
                 "stage": None if shared else self._current, **{k: v for k, v in fields.items() if v is not None}}
        if depends_on is not None:
            entry["depends_on"] = list(depends_on)
        if entry["stage"] is None:
            del entry["stage"]
        if self._channel is not None:
            return self.send(artefacts=[entry])
        self.run.record_artefacts([entry])

    def save_artefact(self, model, tokenizer, kind: str, system: str, language: str, *, pair: str | None = None,
                      role: str | None = None, setting: str | None = None, depends_on: list[str] | None = None) -> Path:
        """Save an export or encoder where :func:`xlviz.runs.artefact_relpath` puts it and record it
        (``depends_on``: the training stages its weights come from), with an ``xlviz.json`` saying
        which system and language it is and which tokenizer it was saved with (checked when
        it is loaded, :func:`xlviz.models.loading.load_model`)."""
        from xlviz.models.export_record import make_record
        from xlviz.runs import artefact_relpath

        folder = self.run.path.joinpath(*artefact_relpath(kind, system, language, pair=pair).split("/"))
        record = make_record(model, tokenizer, kind=kind, system=system, language=language)
        self.save(model, folder, tokenizer, record=record)
        self.record_artefact(kind, folder, system=system, language=language, pair=pair, role=role, setting=setting,
                             depends_on=depends_on)
        return folder

    def write_predictions(self, system: str, language: str, predictions: dict, *, setting: str | None = None) -> Path:
        """Write a system's ``{id: answer}`` on a language's test set and record it (main process only)."""
        from xlviz.io import atomic_write_json
        from xlviz.runs import artefact_relpath

        file = self.run.path.joinpath(*artefact_relpath("predictions", system, language).split("/"))
        if self.main:
            atomic_write_json(file, predictions, root=self.run.path)
            self.record_artefact("predictions", file, system=system, language=language, role="predictions", setting=setting)
        return file

    _log, _loop, _save = log, loop, save  # the names the real-corpus and QA runs use

    def micro_batch(self, global_batch: int) -> int:
        """Rows per process per forward pass for a global batch of ``global_batch``."""
        parts = self.acc.num_processes * self.cfg.grad_accum
        if global_batch % parts:
            raise XlvizError(
                f"the global batch size {global_batch} must be divisible by processes x grad_accum = "
                f"{self.acc.num_processes} x {self.cfg.grad_accum}",
                field="batch_size",
            )
        return global_batch // parts

    def add_result_fields(self, rows: list[dict]) -> None:
        """Merge rows into results.json by (system, language), updating fields of an existing row
        (so retrieval and QA scores of one system and language share a row)."""
        if not self.main:
            return
        if self._channel is not None:
            return self.send(result_fields=rows)
        merged = {(r["system"], r["language"]): dict(r) for r in self.run.results()}
        for r in rows:
            merged.setdefault((r["system"], r["language"]), {}).update(r)
        self.run.write_results(list(merged.values()))

    def add_results(self, rows: list[dict]) -> None:
        """Merge rows into results.json by (system, language), replacing older rows."""
        if not self.main:
            return
        if self._channel is not None:
            return self.send(results=rows)
        self.run.add_results(rows)

    # --- verdicts ----------------------------------------------------------------------
    def judged_mlm(self, stage: str) -> bool:
        """Whether ``stage``'s masked-LM loss is judged against its unigram entropy (runs
        override: pre-training stages); other masked-LM stages record their numbers only."""
        return False

    def judge(self, stage: str) -> None:
        """After ``stage`` ran here: the verdict of its masked-LM training, if it had one
        (QA stages judge themselves: :meth:`add_verdict`)."""
        monitor = self.__dict__.get("_monitors", {}).pop(stage, None)
        if monitor is None or not monitor.mlm or not monitor.targets or monitor.final_loss() is None:
            return
        margin = getattr(self.cfg, "verdict_mlm_margin", MLM_MARGIN)
        record = mlm_verdict(monitor.final_loss(), monitor.unigram_entropy(), monitor.bigram_entropy(), margin,
                             random_share=masking(self.cfg)["random_share"])
        if not self.judged_mlm(stage):
            record.update(verdict=UNJUDGED, reason=record["reason"] + "; recorded, not judged")
        self.add_verdict(stage, record)

    def add_verdict(self, stage: str, record: dict) -> None:
        """Record ``stage``'s verdict: in ``verdicts.json`` by the run's writer, sent to it from a
        stage worker; kept here too for ``strict``."""
        self.__dict__.setdefault("_verdicts", {})[stage] = record
        if not self.main:
            return
        if record.get("verdict") != UNJUDGED:
            self.log(f"  {stage}: {record['verdict']} ({record.get('reason', '')})")
        if self._channel is not None:
            return self.send(verdict={"stage": stage, **record})
        self.run.record_verdict(stage, record)

    def execute(self, stage: str, index: int) -> None:
        """Seed and run one stage (in this process), then judge it; with ``strict`` a
        degenerate stage stops the run (not marked done: a resume re-runs it)."""
        seed_everything(self.stage_seed(stage, index))
        self._current = stage
        try:
            self.run_stage(stage)
        finally:
            self._current = None
        self.judge(stage)
        verdict = self.__dict__.get("_verdicts", {}).get(stage)
        if verdict and verdict.get("verdict") == DEGENERATE and getattr(self.cfg, "strict", False):
            raise XlvizError(f"stage {stage} is degenerate: {verdict.get('reason', '')}; strict mode stops the run here "
                             "(change its settings in the run's config.json and resume, or run without --strict)", field="strict")

    # --- the run ----------------------------------------------------------------------
    def run_all(self) -> list[dict]:
        plan = self.stages()
        if self.main:
            self.check_trackers()
            self.run.path.mkdir(parents=True, exist_ok=True)
            if not self.run.exists():
                self.run.write_config(self.config_record())
            self._status(state="running", started=self.run.status().get("started") or now_iso(), stages=self.plan(), error=None,
                         num_processes=self.acc.num_processes, device=str(self.acc.device),
                         mixed_precision=str(self.acc.mixed_precision), note=None)
        self.acc.wait_for_everyone()
        try:
            workers = self.workers()
            if workers > 1:
                from xlviz.training.stage_workers import run_stages

                run_stages(self, plan, workers)
            for i, stage in enumerate(plan):
                if self.run.stage_done(stage):
                    continue
                self._status(stage=stage, stage_index=i, n_stages=len(plan))
                self._log(f"stage {i + 1}/{len(plan)}: {stage}")
                started = time.time()
                self.execute(stage, i)
                self.acc.wait_for_everyone()
                if self.main:
                    seconds = time.time() - started
                    self.run.mark_stage_done(stage, seconds)
                    self._log(f"  {stage} done in {seconds:.0f} s")
            if self.stop_after is not None and plan != self.plan():
                self._status(state="cancelled", stage=None,
                             note=f"stopped after {self.stop_after} as asked; resume to run the remaining stages")
            else:
                self._status(state="completed", stage=None, finished=now_iso())
                self._log(f"completed in {time.time() - self.t0:.0f} s")
        except BaseException as e:
            state = "cancelled" if isinstance(e, KeyboardInterrupt) else "failed"
            named = None
            if isinstance(e, XlvizError) and e.path is None and e.field and hasattr(e, "message"):
                # a setting found wrong mid-run (block_size past what the corpus yields): name
                # the file that holds it, the run's config.json
                named = XlvizError(e.message, path=self.run.config_path, field=e.field)
            self._status(state=state, error=f"{type(e).__name__}: {named or e}")
            self._log(f"{state}: {type(e).__name__}: {named or e}")
            if named is not None:
                raise named from None
            raise
        finally:
            self.end_tracking()
        return self.run.results()


__all__ = ["StagedRun", "ConfigMixin", "check_positive", "make_global_batch_accelerator", "seed_everything"]
