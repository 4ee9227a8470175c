"""The bench of methods on the generated world: one run trains several systems (MONOTRANS,
its variants and floor, the joint multilingual baselines, ...) on the same world, corpora, QA
sets, model size and step budget, and scores each zero-shot in every language.

The stages come from the methods (:mod:`xlviz.methods`): each system lists its stages, stages
of the same name run once (the world, the tokenizers, MONOTRANS's step 1), and the plan orders
them by phase (data, pre-training, transfer, fine-tuning) and then by first appearance; then one
``s4_<system>`` per system exports its QA model and its encoder per language, writes the
predictions and the result rows. This class is a plain user of the generic
:class:`~xlviz.training.staged.StagedRun` (status, resume, seeding, accelerate).

Run folder: ``world/``, one ``save_pretrained`` folder per training stage, the QA export of each
system and language (QA model + tokenizer, plain Hugging Face), its encoder (the masked LM that
reads that language in that system, for the analysis pages), predictions, ``results.json``; each
export, encoder and predictions file is recorded in ``manifest.json`` (:mod:`xlviz.runs`), where
every reader finds it.
"""

from __future__ import annotations

import functools
import zlib
from pathlib import Path

from transformers.utils import logging as hf_logging

from xlviz.data.squad import squad_examples
from xlviz.data.world import World
from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text
from xlviz.errors import XlvizError
from xlviz.evaluation.squad_metric import evaluate_squad, per_question_scores
from xlviz.evaluation.uncertainty import paragraph_ids, score_intervals
from xlviz.methods import method_of
from xlviz.methods.base import PHASES, Stage, setting_of
from xlviz.methods.common import run_l1, run_l2s, run_languages
from xlviz.training.loop import make_accelerator, run_precision
from xlviz.training.staged import StagedRun
from xlviz.training.verdicts import DEGENERATE, OK, degenerate_reason, degenerate_stages, qa_verdict
from xlviz.transfer.config import TransferConfig

hf_logging.disable_progress_bar()
hf_logging.set_verbosity_error()


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
        if self.source_kind == "world":
            self.world = World(config.world)
            self.data = None
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
        own = {system: {s.name for s in self._lists[system]} | {f"s4_{system}"} for system in self.cfg.systems}
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

    def plan(self) -> list[str]:
        """The training stages by phase; the tasks' own stages (sentence retrieval) once the
        encoders exist, before QA fine-tuning; then one ``s4_<system>`` per system that scores
        the per-system tasks (a corpus run without QA data has none)."""
        train = [n for n, s in self._stages.items() if s.phase != "finetune"]
        finetune = [n for n, s in self._stages.items() if s.phase == "finetune"]
        per_system = self.per_system_tasks()
        # a corpus run's s4 stages also export each system's encoders (the pages open every system)
        scored = [f"s4_{system}" for system in self.cfg.systems] if per_system or self.source_kind == "corpus" else []
        return train + list(self._task_stages()) + finetune + scored

    def per_system_tasks(self) -> list[str]:
        """The run's tasks scored inside each system's ``s4_`` stage (no stage of their own)."""
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
        ``s4_`` stages did not score runs those stages again: a done stage is skipped, so the
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
        redo = [f"s4_{system}" for system in self.cfg.systems if f"s4_{system}" in done]
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
        stages it names (``Stage.needs``); ``s4_<system>`` waits for the system's stages.
        A stage that reads a folder outside these fails (``StagedRun.path``)."""
        if self.source_kind == "corpus":  # one stage after the other, as planned
            plan = self.plan()
            return set(plan[: plan.index(stage)])
        if stage.startswith("s4_") and stage[3:] in self.cfg.systems:
            own = {s.name for s in self._lists[stage[3:]]}
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
        if stage.startswith("s4_") and stage[3:] in self.cfg.systems:
            from xlviz.transfer.tasks import task_of

            for task in map(task_of, self.task_names):
                if not task.stage:
                    task.score(self, stage[3:])
            if self.source_kind == "corpus":  # the world's QA task exports them with its rows (stage_evaluate)
                self.export_encoders(stage[3:])
            return
        if stage in self._task_stages():
            return self._task_stages()[stage].run(self)
        self._stages[stage].execute(self)

    def finetune_corpus_qa(self) -> None:
        """MONOTRANS's step 3 on a corpus source (its stage, :mod:`xlviz.methods.stream`, asks the run)."""
        from xlviz.transfer.tasks.qa import finetune

        finetune(self)

    # --- verdicts ----------------------------------------------------------------------
    def judged_mlm(self, stage: str) -> bool:
        """Pre-training stages from scratch are judged on their MLM loss, on every source (step 2,
        PPA and step 1b, a head on a pre-trained body, record theirs)."""
        return stage in self._stages and self._stages[stage].phase == "pretrain" and stage != "s1b_mlm_head"

    def judge_qa(self, stage: str, model, tokenizer) -> None:
        """A QA model fine-tuned on the L1 training set against the trivial baseline on the
        world's L1 dev split (:func:`first_words_baseline`); records the stage's verdict."""
        if not self.main:
            return
        data = self.world.qa("dev", self.world.l1)
        articles = self.world.articles(self.world.l1)
        preds = predictions_to_text(predict_qa(model, tokenizer, squad_examples(data), max_length=self.cfg.qa_max_length,
                                               doc_stride=self.cfg.doc_stride, batch_size=64, max_answer_length=self.cfg.max_answer_length))
        f1 = evaluate_squad(data, preds, articles=articles)["f1"]
        baseline, k = first_words_baseline(data, self.cfg.max_answer_length, articles)
        self.add_verdict(stage, qa_verdict(f1, baseline, self.cfg.verdict_qa_margin, baseline=f"the first {k} word{'s' * (k > 1)} of the context"))

    def dev_scorer(self, tok, stage: str):
        """``on_eval`` for a QA fine-tuning on the L1 training set (:func:`xlviz.methods.common.finetune_qa`
        asks the run for it): EM/F1 (percent, official v1.1) of the model being trained on the
        world's L1 dev set, logged as ``dev_exact_match`` / ``dev_f1`` every ``eval_every``
        steps. A model the plain QA decoder cannot read (one that needs a language or a pair
        input) is noted once in the log and not evaluated again."""
        dev = self.world.qa("dev")
        examples = squad_examples(dev)
        state = {"on": bool(examples)}

        def on_eval(step: int, module) -> dict:
            if not state["on"]:
                return {}
            try:
                preds = predict_qa(module.model, tok, examples, max_length=self.cfg.qa_max_length, doc_stride=self.cfg.doc_stride,
                                   batch_size=64, max_answer_length=self.cfg.max_answer_length)
            except Exception as e:  # noqa: BLE001 - a dev score is a convenience; the run goes on
                state["on"] = False
                self.log(f"  {stage}: no dev scores during fine-tuning ({type(e).__name__}: {str(e)[:120]})")
                return {}
            scores = evaluate_squad(dev, {k: v["text"] for k, v in preds.items()})
            return {"dev_exact_match": scores["exact_match"], "dev_f1": scores["f1"]}

        return on_eval

    # --- data only some systems may read ------------------------------------------------
    def parallel_train(self, system: str, l2: str) -> list[dict]:
        """The world's parallel training corpus for ``l2``, for a system that declares it
        (``uses()['parallel_pairs']``), cut to the number of pairs it declares."""
        n = method_of(system).uses(system, self.cfg)["parallel_pairs"]
        if not n:
            raise XlvizError(f"system {system!r} declares no parallel data (uses()['parallel_pairs'] is 0)", field="methods")
        if self.source_kind == "corpus":  # the source's parallel training files, scored lines left out
            pairs, _ = self.data.parallel_train_pairs()
            if not pairs:
                raise XlvizError("no parallel training pairs", path=self.data.parallel_train_files()[0], field="data.parallel_train")
            return [{"id": f"train-{i}", "src": a, "tgt": b} for i, (a, b) in enumerate(pairs[:n])]
        return self.world.parallel_train(l2, n)

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

    # --- step 4 ----------------------------------------------------------------------
    def zero_shot(self, system: str, lang: str):
        """The QA model ``system`` uses for ``lang`` and its tokenizer (None if it has none)."""
        return method_of(system).qa_model(self, system, lang)

    def score(self, model, tok, lang: str) -> tuple[dict, dict, dict]:
        """(scores with ``lang``'s articles stripped and their paragraph-bootstrap intervals,
        official v1.1 scores, predictions) on ``lang``'s test set."""
        data = self.world.qa("test", lang)
        preds = predictions_to_text(predict_qa(model, tok, squad_examples(data), max_length=self.cfg.qa_max_length, doc_stride=self.cfg.doc_stride, batch_size=64, max_answer_length=self.cfg.max_answer_length))
        # Each language's own articles are stripped (MLQA-style), so L2/L1 compares like
        # with like; the official v1.1 numbers (English articles only) are kept beside them.
        scores = evaluate_squad(data, preds, articles=self.world.articles(lang))
        # questions share paragraphs: the interval resamples whole paragraphs (fixed seed, so a
        # resumed run writes the same results.json)
        per_question = per_question_scores(data, preds, articles=self.world.articles(lang))
        scores.update(score_intervals(per_question, paragraph_ids(data)))
        return scores, evaluate_squad(data, preds), preds

    def slice_rows(self, lang: str, preds: dict[str, str]) -> list[dict]:
        """The results row's ``slices``: EM/F1 of ``preds`` on ``lang``'s test set per slice of
        the world's questions (what each asks about, where its answer lies, its paragraph's size;
        :func:`xlviz.evaluation.slices.world_slices`), each with its paragraph-bootstrap interval,
        scored as the row (the language's own articles stripped): ``xlviz report --slices``'s
        rows of this system and language, without its ``all`` row (the results row)."""
        from xlviz.evaluation.slices import WORLD_DIMENSIONS, row_slices, world_slices

        data = self.world.qa("test", lang)
        per_question = per_question_scores(data, preds, articles=self.world.articles(lang))
        return row_slices(per_question, paragraph_ids(data), world_slices(self.world, lang), order=WORLD_DIMENSIONS)

    def stage_evaluate(self, system: str) -> None:
        """Export each language's QA model and encoder and score the QA model on that
        language's test set (pair models: also their own L1 scores, ``l1_f1`` and ``l1_exact_match``)."""
        if not self.main:
            return
        method = method_of(system)
        verdicts = self.run.verdicts()
        rows = []
        uses = {"translate_test": False, **method.uses(system, self.cfg)}
        encoders: dict[str, Path] = {}  # language -> the encoder folder written
        pair_l1: dict[str, Path] = {}  # l2 -> a pair model's L1 encoder folder
        for lang in self.world.languages:
            self.export_encoder(system, lang, encoders, pair_l1)
            qa = method.qa_model(self, system, lang)
            if qa is None:
                continue
            model, tok = qa
            scores, v11, preds = self.score(model, tok, lang)
            self.write_predictions(system, lang, preds, setting=setting_of(uses))
            self.save_artefact(model, tok, "export", system, lang, role="qa", setting=setting_of(uses),
                               depends_on=method.row_stages(self, system, lang))
            # four decimals: tables print one, and two stored decimals rounded twice (7.4499 -> 7.45 -> 7.5)
            row = {"system": system, "method": method.name, "language": lang, "setting": setting_of(uses),
                   "exact_match": round(scores["exact_match"], 4), "f1": round(scores["f1"], 4),
                   **{k: v for k, v in scores.items() if k not in ("exact_match", "f1")},
                   "exact_match_v11": round(v11["exact_match"], 4), "f1_v11": round(v11["f1"], 4), **uses,
                   "resources": method.resources(system, self.cfg, self, lang)}
            bad = degenerate_stages(method.row_stages(self, system, lang), verdicts)
            row["verdict"] = DEGENERATE if bad else OK
            if bad:  # no result: every table shows it as degenerate and leaves it out of ratios and means
                row["degenerate_stages"] = bad
            own = method.own_l1_model(self, system, lang)
            if own is not None:  # its own L1 model's scores: the ratios divide by them (EM beside F1)
                l1_scores = self.score(*own, self.world.l1)[0]
                row["l1_f1"] = round(l1_scores["f1"], 4)
                row["l1_exact_match"] = round(l1_scores["exact_match"], 4)
            row["tasks"] = ["qa"]
            # last, so every other field keeps its place: EM/F1 per slice of the world's questions
            row["slices"] = self.slice_rows(lang, preds)
            rows.append(row)
            self._log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} (v1.1: EM {v11['exact_match']:.1f} F1 {v11['f1']:.1f})"
                      + (f"; its own {self.world.l1} model: F1 {row['l1_f1']:.1f}" if "l1_f1" in row else "")
                      + (f"; DEGENERATE ({degenerate_reason(row)}): not a result" if bad else ""))
        self.add_results(rows)
        self.store_encodings(system, encoders, pair_l1)

    def export_encoder(self, system: str, lang: str, encoders: dict[str, Path], pair_l1: dict[str, Path]) -> None:
        """Save ``system``'s encoder of ``lang`` (and, for an L2 after the first, a pair model's
        own L1 side) and record it with the stages its weights come from; adds the folders
        written to ``encoders`` (by language) and ``pair_l1`` (by L2). What the Alignment and
        Probing pages and the CLI analyses read (:meth:`xlviz.analysis.reports.RunInfo.system_encoders`)."""
        method = method_of(system)
        l1, l2s = run_l1(self), run_l2s(self)
        encoder = method.encoder(self, system, lang)
        if encoder is not None:
            encoders[lang] = self.save_artefact(encoder[0], encoder[1], "encoder", system, lang,
                                                role="l1-encoder" if lang == l1 else "l2-encoder",
                                                depends_on=method.encoder_stages(self, system, lang))
        if lang != l1 and lang != l2s[0]:  # the first pair's L1 is the system's L1 encoder
            pair = method.pair_l1_encoder(self, system, lang)
            if pair is not None:
                pair_l1[lang] = self.save_artefact(pair[0], pair[1], "encoder", system, l1, pair=lang, role="l1-encoder",
                                                   depends_on=method.encoder_stages(self, system, l1, pair=lang))

    def export_encoders(self, system: str) -> None:
        """A corpus run's encoders of ``system``, one per language (its ``s4_<system>`` stage)."""
        if not self.main:
            return
        encoders: dict[str, Path] = {}
        for lang in run_languages(self):
            self.export_encoder(system, lang, encoders, {})
        self._log(f"  {system}: encoders of {', '.join(encoders)} exported for the Alignment and Probing pages")

    def store_encodings(self, system: str, encoders: dict[str, Path], pair_l1: dict[str, Path]) -> None:
        """Store the Alignment page's encodings of the system's encoders just exported, for each
        L2 (:mod:`xlviz.analysis.encodings`): the page then reads them instead of loading the
        models. Which encoder reads which side is what the page pairs up
        (:meth:`xlviz.analysis.reports.RunInfo.system_encoders`). Systems sharing an encoder
        share its file, recorded without a system or stage (stages at once may both write it;
        the manifest reads the same either way). They save the page time and nothing else, so a
        failure is logged and the run goes on (``xlviz analyse encodings`` writes them later)."""
        from xlviz.analysis.encodings import write_encodings
        from xlviz.analysis.reports import System
        from xlviz.models.reference import ModelSpec

        l1 = self.world.l1

        def record(entries: list[dict]) -> None:
            for e in entries:
                e = dict(e)
                self.record_artefact(e.pop("kind"), self.run.path / e.pop("path"), shared=True, **e)

        for l2 in self.world.l2s:
            a, b = pair_l1.get(l2, encoders.get(l1)), encoders.get(l2)
            if a is None or b is None:
                continue
            try:
                write_encodings(self.run.path, l2, [System(system, l1, l2, ModelSpec(str(a)), ModelSpec(str(b)))], record,
                                log=self._log)
            except XlvizError as e:
                self._log(f"  {system} {l2}: no encodings stored for the Alignment page ({e})")


def first_words_baseline(data: dict, max_words: int, articles: list[str] | None = None) -> tuple[float, int]:
    """(F1, k) of the best trivial answer "the first k words of the context", k = 1 ..
    ``max_words``, on a SQuAD dict: what a model that never read the question scores."""
    best = (0.0, 1)
    for k in range(1, max(1, max_words) + 1):
        preds = {qa["id"]: " ".join(p["context"].split()[:k]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]}
        f1 = evaluate_squad(data, preds, articles=articles)["f1"]
        if f1 > best[0]:
            best = (f1, k)
    return best


def run_transfer(config: TransferConfig, run_dir: str | Path) -> list[dict]:
    return Pipeline(config, run_dir).run_all()


def resume_transfer(run_dir: str | Path) -> list[dict]:
    return Pipeline.resume(run_dir).run_all()
