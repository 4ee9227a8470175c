"""Extractive QA fine-tuning of any encoder on SQuAD-format data, and XQuAD-style evaluation
per language, as a resumable run folder (``xlviz finetune-qa``).

Why: the demo fine-tunes its own BERT on generated QA; real experiments fine-tune a real
encoder (mBERT, XLM-R, a MONOTRANS export, ...) on SQuAD and test it zero-shot on XQuAD's
languages. Features come from :mod:`xlviz.data.qa_features` (offset mapping, doc stride, any
fast tokenizer), answers from :func:`xlviz.evaluation.qa_predict.predict_qa`, scores from the
official v1.1 metric, and the rows written to ``results.json`` are the demo's
``{"system", "language", "exact_match", "f1"}`` (plus ``n_questions``).

Stages: ``s3_finetune`` (the fine-tuned model + tokenizer, a plain HF folder) and one
scoring stage per evaluation language (``s4_<lang>``, :func:`xlviz.runs.scoring_stage`:
``predictions/<system>-<lang>.json`` + a results row).
Training runs unchanged under ``accelerate launch``: the batch size is global, each process
trains on its slice of every batch, evaluation examples are sharded over processes and the
predictions gathered before scoring on the main process.

A small CPU slice (``train_paragraphs``): fine-tune on some paragraphs of one file and
evaluate on the *other* paragraphs in every language: XQuAD question ids are shared across
languages, so ids used in training are left out of every evaluation file
(``exclude_train_ids``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from xlviz.data.squad import check_answer_starts, language_of_file, read_squad_json, squad_examples
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.runs import scoring_stage
from xlviz.training.loop import LoopConfig
from xlviz.training.qa import finetune_qa, train_features  # noqa: F401 (train_features re-exported)
from xlviz.training.qa_loss import QALoss  # noqa: F401 (re-exported)
from xlviz.transfer.config import MIXED_PRECISION
from xlviz.transfer.runner import ConfigMixin, StagedRun, check_positive


# --------------------------------------------------------------------------- data
def squad_subset(data: dict, keep: Callable[[str], bool]) -> dict:
    """A copy of a SQuAD dict with only the questions whose id passes ``keep`` (empty
    paragraphs and articles dropped)."""
    articles = []
    for article in data["data"]:
        paragraphs = []
        for p in article["paragraphs"]:
            qas = [qa for qa in p["qas"] if keep(qa["id"])]
            if qas:
                paragraphs.append({**p, "qas": qas})
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    return {**{k: v for k, v in data.items() if k != "data"}, "data": articles}


def paragraph_split(data: dict, n_train: int | None, seed: int) -> tuple[dict, set[str]]:
    """(training SQuAD dict, its question ids): ``n_train`` paragraphs drawn with ``seed``
    (all when None). Splitting by paragraph keeps every context out of the evaluation."""
    paragraphs = [(i, j) for i, a in enumerate(data["data"]) for j in range(len(a["paragraphs"]))]
    if n_train is not None:
        if not 0 < n_train < len(paragraphs):
            raise XlvizError(f"must be between 1 and {len(paragraphs) - 1} (the file has {len(paragraphs)} paragraphs)", field="train_paragraphs")
        chosen = set(random.Random(seed).sample(paragraphs, n_train))
    else:
        chosen = set(paragraphs)
    ids = {qa["id"] for i, a in enumerate(data["data"]) for j, p in enumerate(a["paragraphs"]) if (i, j) in chosen for qa in p["qas"]}
    return squad_subset(data, lambda qid: qid in ids), ids


def repair_answer_starts(data: dict) -> tuple[dict, int, int]:
    """Training data with wrong ``answer_start`` offsets moved to the nearest occurrence of the
    answer text, and questions whose answer text is not in the context dropped.
    Returns (data, n_repaired, n_dropped). (Evaluation never uses offsets.)"""
    mismatches = check_answer_starts(data)
    if not mismatches:
        return data, 0, 0
    fixes = {m.field: m.nearest_start for m in mismatches}
    drop = set()
    import copy

    data = copy.deepcopy(data)
    for i, a in enumerate(data["data"]):
        for j, p in enumerate(a["paragraphs"]):
            for k, qa in enumerate(p["qas"]):
                for m, ans in enumerate(qa["answers"]):
                    key = f"data[{i}].paragraphs[{j}].qas[{k}].answers[{m}].answer_start"
                    if key in fixes:
                        if fixes[key] is None:
                            drop.add(qa["id"])
                        else:
                            ans["answer_start"] = fixes[key]
    n_repaired = sum(1 for v in fixes.values() if v is not None)
    return squad_subset(data, lambda qid: qid not in drop), n_repaired, len(drop)


def qa_files(specs: Sequence[str], languages: Sequence[str] | None = None) -> dict[str, Path]:
    """``{lang: file}`` from folders (every ``<name>.<lang>.json``) and files, optionally
    restricted to ``languages``; each file's language comes from its name."""
    files: dict[str, Path] = {}
    for spec in specs:
        p = Path(spec).expanduser()
        found = sorted(p.glob("*.json")) if p.is_dir() else [p]
        if not p.exists():
            raise XlvizError("QA evaluation file or folder not found", path=p)
        for f in found:
            lang = language_of_file(f)
            if lang is None:
                if p.is_dir():
                    continue
                raise XlvizError("cannot tell the language from the file name (expected <name>.<lang>.json)", path=f)
            if lang in files and files[lang] != f:
                raise XlvizError(f"two evaluation files for language '{lang}': {files[lang]} and {f}", path=f)
            files[lang] = f
    if languages:
        absent = [lang for lang in languages if lang not in files]
        if absent:
            raise XlvizError(f"no evaluation file for {absent}; found {sorted(files)}", field="languages")
        files = {lang: files[lang] for lang in languages}
    if not files:
        raise XlvizError(f"no <name>.<lang>.json evaluation files in {list(specs)}", field="eval")
    return files


# --------------------------------------------------------------------------- train / evaluate
def train_qa(
    model, tokenizer, examples, *, accelerator, steps: int, lr: float, batch_size: int, grad_accum: int = 1,
    max_length: int = 384, doc_stride: int = 128, seed: int = 0, warmup_ratio: float = 0.1, log_every: int = 10,
    on_log: Callable[[int, float, float], None] | None = None, desc: str = "qa",
):
    """Fine-tune ``model`` (any ``*ForQuestionAnswering``) for ``steps`` optimizer steps of
    ``batch_size`` windows (global); returns the unwrapped model. The loop's settings are these
    arguments (not a transfer run's: its warm-up and Adam betas are not read here); the training
    is every QA stage's (:func:`xlviz.training.qa.finetune_qa`)."""
    loop = LoopConfig(steps=steps, lr=lr, grad_accum=grad_accum, log_every=log_every, warmup_ratio=warmup_ratio)
    return finetune_qa(model, tokenizer, examples, accelerator=accelerator, loop=loop, batch_size=batch_size, max_length=max_length,
                       doc_stride=doc_stride, seed=seed, global_batch=True, on_log=on_log, desc=desc)


def predict_answers(model, tokenizer, data: dict, *, accelerator=None, max_length: int = 384, doc_stride: int = 128,
                    batch_size: int = 64, max_answer_length: int = 30) -> dict[str, str]:
    """``{id: answer}`` of ``model`` on a SQuAD dict: with an accelerator of several processes,
    examples are sharded and the predictions gathered (every process gets them all)."""
    from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text

    examples = squad_examples(data)
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator is not None else (0, 1)
    mine = examples[rank::world]
    preds = predictions_to_text(predict_qa(model, tokenizer, mine, max_length=max_length, doc_stride=doc_stride,
                                           batch_size=batch_size, max_answer_length=max_answer_length)) if mine else {}
    if world > 1:
        from accelerate.utils import gather_object

        preds = dict(gather_object(list(preds.items())))
    return preds


def evaluate_qa(model, tokenizer, data: dict, *, accelerator=None, max_length: int = 384, doc_stride: int = 128,
                batch_size: int = 64, max_answer_length: int = 30, language: str | None = None) -> tuple[dict, dict[str, str]]:
    """(``{"exact_match", "f1", "n_questions"}``, ``{id: answer}``) of ``model`` on a SQuAD dict
    (:func:`predict_answers`: sharded over an accelerator's processes, every process gets the
    scores). ``language``: a real language's MLQA normalisation for ``exact_match``/``f1``, with
    the official v1.1 scores beside them (``*_v11``)."""
    from xlviz.evaluation.squad_metric import evaluate_squad

    preds = predict_answers(model, tokenizer, data, accelerator=accelerator, max_length=max_length, doc_stride=doc_stride,
                            batch_size=batch_size, max_answer_length=max_answer_length)
    scores = evaluate_squad(data["data"], preds, language=language)
    if language is not None:
        v11 = evaluate_squad(data["data"], preds)
        scores.update(exact_match_v11=v11["exact_match"], f1_v11=v11["f1"], normalisation=f"mlqa-{language}")
    return {**scores, "n_questions": len(squad_examples(data))}, preds


# --------------------------------------------------------------------------- the run
@dataclass
class QAConfig(ConfigMixin):
    """One QA fine-tuning + evaluation run (``xlviz finetune-qa``)."""

    name: str = "finetune-qa"
    seed: int = 0
    model: str = ""  # folder or hub id of any supported encoder (an MLM or QA checkpoint)
    tokenizer: str | None = None  # tokenizer folder when the model folder has none
    system: str | None = None  # name in results rows (default: the model folder's name)
    train: str = ""  # SQuAD-format training file
    train_paragraphs: int | None = None  # fine-tune on this many paragraphs of it (seeded); None = all
    eval: list[str] = field(default_factory=list)  # SQuAD-format files and/or folders of <name>.<lang>.json
    languages: list[str] | None = None  # evaluation languages (default: every file found)
    exclude_train_ids: bool = True  # leave question ids used in training out of the evaluation
    freeze_token_embeddings: bool = False  # MONOTRANS step 3: keep token embeddings (but special rows) fixed
    steps: int = 300
    lr: float = 5e-5
    warmup_ratio: float = 0.1
    batch_size: int = 32  # global, per optimizer step
    max_length: int = 384
    doc_stride: int = 128
    max_answer_length: int = 30
    eval_batch_size: int = 64
    mixed_precision: str = "no"
    grad_accum: int = 1
    log_every: int = 10

    def validate(self, *, path: str | None = None) -> None:
        check_positive(self, ("steps", "batch_size", "max_length", "doc_stride", "max_answer_length", "eval_batch_size", "grad_accum", "log_every"), path)
        check_positive(self, ("lr",), path, number=True)
        if not self.model:
            raise XlvizError("no model given", path=path, field="model")
        if not self.train:
            raise XlvizError("no training file given", path=path, field="train")
        if not self.eval:
            raise XlvizError("no evaluation files given", path=path, field="eval")
        if isinstance(self.eval, str):
            self.eval = [self.eval]
        if isinstance(self.languages, str):
            self.languages = [s.strip() for s in self.languages.split(",") if s.strip()]
        if self.doc_stride >= self.max_length:
            raise XlvizError("must be smaller than max_length", path=path, field="doc_stride")
        if self.mixed_precision not in MIXED_PRECISION:
            raise XlvizError(f"choose from {list(MIXED_PRECISION)}", path=path, field="mixed_precision")
        if self.train_paragraphs is not None:
            check_positive(self, ("train_paragraphs",), path)

    @property
    def system_name(self) -> str:
        return self.system or Path(str(self.model).rstrip("/")).name or "model"


class QAPipeline(StagedRun):
    """``QAPipeline(QAConfig(...), run_dir).run_all()``; ``QAPipeline.resume(run_dir)``."""

    config_class = QAConfig

    def eval_files(self) -> dict[str, Path]:
        return qa_files(self.cfg.eval, self.cfg.languages)

    def planned(self) -> dict[str, str | None]:
        """The stages by the names the run folder records, each with the language it scores:
        the fine-tuning (None), then one scoring stage per evaluation language."""
        return {"s3_finetune": None, **{scoring_stage(lang): lang for lang in self.eval_files()}}

    def plan(self) -> list[str]:
        return list(self.planned())

    def run_stage(self, stage: str) -> None:
        planned = self.planned()
        if stage not in planned:
            raise XlvizError(f"unknown stage {stage!r}")
        if planned[stage] is None:
            return self.stage_finetune_qa()
        return self.stage_evaluate_language(planned[stage])

    def training_data(self) -> tuple[dict, set[str]]:
        data = read_squad_json(self.cfg.train)
        return paragraph_split(data, self.cfg.train_paragraphs, self.cfg.seed)

    def stage_finetune_qa(self) -> None:
        from xlviz.data.vocabulary import special_ids_of
        from xlviz.models.loading import load_model
        from xlviz.models.monotrans import freeze_for_step3

        cfg = self.cfg
        model, tok = load_model(cfg.model, task="qa", attn_implementation="sdpa", new_head="ok", tokenizer=cfg.tokenizer)
        data, ids = self.training_data()
        data, repaired, dropped = repair_answer_starts(data)
        if repaired or dropped:
            self._log(f"  training data: {repaired} answer_start offsets repaired, {dropped} questions dropped (answer not in context)")
        examples = squad_examples(data)
        self._log(f"  fine-tuning {type(model).__name__} on {len(examples)} questions ({len(data['data'])} articles) of {cfg.train}")
        if self.main:
            atomic_write_json(self.path("qa_split.json"), {"train": str(cfg.train), "train_paragraphs": cfg.train_paragraphs,
                                                            "seed": cfg.seed, "train_ids": sorted(ids)})
        if cfg.freeze_token_embeddings:
            freeze_for_step3(model, special_ids=special_ids_of(tok))
        loop, on_log = self._loop("s3_finetune", cfg.steps, cfg.lr)
        model = train_qa(model, tok, examples, accelerator=self.acc, steps=cfg.steps, lr=cfg.lr, batch_size=cfg.batch_size,
                         grad_accum=cfg.grad_accum, max_length=cfg.max_length, doc_stride=cfg.doc_stride, seed=cfg.seed,
                         warmup_ratio=cfg.warmup_ratio, log_every=cfg.log_every, on_log=on_log, desc="s3_finetune")
        self._save(model, self.path("s3_finetune"), tok, role="finetuned")

    def stage_evaluate_language(self, lang: str) -> None:
        from xlviz.models.loading import load_model

        cfg = self.cfg
        model, tok = load_model(self.path("s3_finetune"), task="qa", attn_implementation="sdpa", device=str(self.acc.device))
        data = read_squad_json(self.eval_files()[lang])
        if cfg.exclude_train_ids:
            train_ids = set(self.training_data()[1])
            data = squad_subset(data, lambda qid: qid not in train_ids)
        if not data["data"]:
            raise XlvizError(f"no {lang} questions left after leaving out the training ids", field="exclude_train_ids")
        scores, preds = evaluate_qa(model, tok, data, accelerator=self.acc, max_length=cfg.max_length, doc_stride=cfg.doc_stride,
                                    batch_size=cfg.eval_batch_size, max_answer_length=cfg.max_answer_length)
        if self.main:
            system = cfg.system_name
            self.write_predictions(system, lang, preds)
            self.add_result_fields([{"system": system, "language": lang, "exact_match": round(scores["exact_match"], 4),
                                     "f1": round(scores["f1"], 4), "n_questions": scores["n_questions"]}])
            self._log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} ({scores['n_questions']} questions)")


def run_finetune_qa(config: QAConfig, run_dir: str | Path) -> list[dict]:
    return QAPipeline(config, run_dir).run_all()


__all__ = [
    "QAConfig", "QAPipeline", "QALoss", "train_qa", "predict_answers", "evaluate_qa", "train_features", "qa_files", "paragraph_split",
    "squad_subset", "repair_answer_starts", "run_finetune_qa",
]
