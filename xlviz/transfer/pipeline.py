"""The MONOTRANS pipeline as a sequence of resumable stages writing a run folder.

world -> s1_pretrain -> s2_transfer-<l2>[-pos|-adapters] -> s3_finetune[-pos|-noise]
-> s4_<system> (zero-shot export, predictions, EM/F1 per language).

Each stage saves a ``save_pretrained`` folder atomically and is then recorded in
``status.json["stages_done"]``; ``resume`` skips recorded stages, so a killed run continues
from its last completed stage. Under ``accelerate launch`` every process trains on its shard
and the main process writes.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, BertForMaskedLM, BertForQuestionAnswering, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from xlviz.data.qa_features import prepare_train_features, to_tensors
from xlviz.data.squad import squad_examples
from xlviz.data.tokenization import train_tokenizer
from xlviz.data.vocabulary import translation_rows
from xlviz.data.world import World
from xlviz.errors import XlvizError
from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text
from xlviz.evaluation.squad_metric import evaluate_squad
from xlviz.io import atomic_dir, atomic_write_json
from xlviz.models.adapters import XlvizBertForMaskedLM
from xlviz.models.monotrans import (
    add_embedding_noise, bert_config, drop_cls_position_and_segment, fold_cls_position, freeze_for_step2,
    freeze_for_step3, make_l2_mlm, qa_from_mlm, zero_shot_model,
)
from xlviz.runs import Run, now_iso, package_versions
from xlviz.training.loop import LoopConfig, make_accelerator, train
from xlviz.training.mlm import MaskedOnlyMLM, iter_batches, iter_blocks, mask_tokens
from xlviz.training.qa_loss import QALoss
from xlviz.transfer.config import SYSTEMS, TransferConfig

hf_logging.disable_progress_bar()
hf_logging.set_verbosity_error()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Pipeline:
    """One run: ``Pipeline(cfg, run_dir).run()``; ``Pipeline.resume(run_dir).run()``."""

    def __init__(self, config: TransferConfig, run_dir: str | Path):
        self.cfg = config
        self.run = Run(Path(run_dir))
        self.acc = make_accelerator(config.mixed_precision, config.grad_accum)
        self.main = self.acc.is_main_process
        self.world = World(config.world)
        self.t0 = time.time()

    @classmethod
    def resume(cls, run_dir: str | Path) -> "Pipeline":
        run = Run(Path(run_dir))
        if not run.exists():
            raise XlvizError("not a run folder (no config.json)", path=run_dir)
        return cls(TransferConfig.from_dict(run.config(), path=str(run.config_path)), run_dir)

    # --- plan -------------------------------------------------------------------------
    def stages(self) -> list[str]:
        s2, s3 = [], []
        for system in self.cfg.systems:
            two, three = SYSTEMS[system]
            if two is not None:
                s2 += [f"s2_transfer-{l2}{two}" for l2 in self.world.l2s]
            s3.append(f"s3_finetune{three}")
        evals = [f"s4_{system}" for system in self.cfg.systems]
        return ["world", "s1_pretrain"] + list(dict.fromkeys(s2)) + list(dict.fromkeys(s3)) + evals

    def path(self, *parts: str) -> Path:
        return self.run.path.joinpath(*parts)

    # --- bookkeeping --------------------------------------------------------------------
    def _status(self, **fields) -> None:
        if self.main:
            self.run.update_status(**fields)

    def _log(self, msg: str) -> None:
        if self.main:
            self.run.log(msg)
            print(msg, flush=True)

    def _loop(self, stage: str, steps: int, lr: float) -> tuple[LoopConfig, callable]:
        cfg = LoopConfig(steps=steps, lr=lr, grad_accum=self.cfg.grad_accum, log_every=self.cfg.log_every)

        def on_log(step: int, loss: float, elapsed: float) -> None:
            self.run.log_metric(stage=stage, step=step, loss=round(loss, 5), elapsed=round(elapsed, 2))
            self.run.update_status(progress={"stage": stage, "step": step, "total": steps, "elapsed": round(elapsed, 2)})

        return cfg, on_log

    def tokenizer(self, lang: str) -> PreTrainedTokenizerFast:
        return AutoTokenizer.from_pretrained(self.path("world", "tokenizers", lang))

    # --- the run ----------------------------------------------------------------------
    def run_all(self) -> list[dict]:
        if self.main:
            self.run.path.mkdir(parents=True, exist_ok=True)
            if not self.run.exists():
                self.run.write_config({**self.cfg.to_dict(), "versions": package_versions()})
            plan = self.stages()
            self._status(state="running", started=self.run.status().get("started") or now_iso(), stages=plan, error=None,
                         device=str(self.acc.device), mixed_precision=str(self.acc.mixed_precision))
        self.acc.wait_for_everyone()
        plan = self.stages()
        try:
            for i, stage in enumerate(plan):
                if self.run.stage_done(stage):
                    continue
                self._status(stage=stage, stage_index=i, n_stages=len(plan))
                self._log(f"stage {i + 1}/{len(plan)}: {stage}")
                seed_everything(self.cfg.seed * 7919 + i)
                self._run_stage(stage)
                self.acc.wait_for_everyone()
                if self.main:
                    self.run.mark_stage_done(stage)
            self._status(state="completed", stage=None, finished=now_iso())
            self._log(f"completed in {time.time() - self.t0:.0f} s")
        except BaseException as e:
            state = "cancelled" if isinstance(e, KeyboardInterrupt) else "failed"
            self._status(state=state, error=f"{type(e).__name__}: {e}")
            self._log(f"{state}: {type(e).__name__}: {e}")
            raise
        return self.run.results()

    def _run_stage(self, stage: str) -> None:
        if stage == "world":
            return self.stage_world()
        if stage == "s1_pretrain":
            return self.stage_pretrain()
        if stage.startswith("s2_transfer-"):
            lang, _, variant = stage[len("s2_transfer-"):].partition("-")
            return self.stage_transfer(lang, variant)
        if stage.startswith("s3_finetune"):
            return self.stage_finetune(stage[len("s3_finetune"):].lstrip("-"))
        if stage.startswith("s4_"):
            return self.stage_evaluate(stage[3:])
        raise XlvizError(f"unknown stage {stage!r}")

    # --- stages -----------------------------------------------------------------------
    def stage_world(self) -> None:
        """Generate the world's files and learn one vocabulary per language on its own corpus."""
        if self.main:
            self.world.save(self.path("world"))
            for lang in self.world.languages:
                tok = train_tokenizer(self.world.corpus(lang), self.cfg.vocab_size, algorithm=self.cfg.tokenizer, model_max_length=max(self.cfg.block_size, self.cfg.qa_max_length))
                with atomic_dir(self.path("world", "tokenizers", lang)) as tmp:
                    tok.save_pretrained(tmp)
                self._log(f"  {lang}: vocabulary of {len(tok)} subwords")

    def _mlm(self, model: BertForMaskedLM, lang: str, stage: str, steps: int, lr: float) -> BertForMaskedLM:
        tok = self.tokenizer(lang)
        corpus = self.world.corpus(lang)
        blocks = iter_blocks(lambda: corpus, tok, self.cfg.block_size, seed=self.cfg.seed, rank=self.acc.process_index, world_size=self.acc.num_processes)
        gen = torch.Generator().manual_seed(self.cfg.seed * 31 + self.acc.process_index)
        vocab = model.config.vocab_size

        def batches():
            for ids in iter_batches(blocks, self.cfg.mlm_batch_size):
                inputs, labels = mask_tokens(ids, mask_id=tok.mask_token_id, vocab_size=vocab, prob=self.cfg.mlm_probability, generator=gen)
                yield {"input_ids": inputs, "labels": labels}

        loop, on_log = self._loop(stage, steps, lr)
        wrapped = train(MaskedOnlyMLM(model), batches(), loop, self.acc, on_log=on_log, desc=stage)
        self.acc.free_memory()
        return wrapped.model

    def _save(self, model, stage_dir: Path, tokenizer: PreTrainedTokenizerFast | None = None) -> None:
        if not self.main:
            return
        with atomic_dir(stage_dir) as tmp:
            model.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)

    def stage_pretrain(self) -> None:
        """Step 1: masked-LM pre-training of a small BERT on the L1 corpus."""
        tok = self.tokenizer(self.world.l1)
        model = BertForMaskedLM(bert_config(len(tok), self.cfg.model_size, max_position_embeddings=max(self.cfg.block_size, self.cfg.qa_max_length)))
        model = self._mlm(model, self.world.l1, "s1_pretrain", self.cfg.pretrain_steps, self.cfg.pretrain_lr)
        self._save(model, self.path("s1_pretrain"), tok)

    def l2_init_model(self, l1: BertForMaskedLM, vocab_size: int, adapter_size: int = 0) -> BertForMaskedLM:
        """Step 2's starting point, and (untrained) the floor: same seed, same init."""
        return make_l2_mlm(l1, vocab_size, seed=self.cfg.seed + 1, adapter_size=adapter_size, init_std=self.cfg.l2_init_std)

    def stage_transfer(self, lang: str, variant: str) -> None:
        """Step 2: freeze the body, learn L2 token embeddings (and, per variant, L2 position
        embeddings or adapters) with MLM on the L2 corpus."""
        l1 = BertForMaskedLM.from_pretrained(self.path("s1_pretrain"), use_safetensors=True)
        tok = self.tokenizer(lang)
        adapters = self.cfg.adapter_size if variant == "adapters" else 0
        model = self.l2_init_model(l1, len(tok), adapter_size=adapters)
        hooks = drop_cls_position_and_segment(model) if variant == "pos" else []
        freeze_for_step2(model, l2_positions=variant == "pos")
        stage = f"s2_transfer-{lang}" + (f"-{variant}" if variant else "")
        model = self._mlm(model, lang, stage, self.cfg.transfer_steps, self.cfg.transfer_lr)
        for h in hooks:
            h.remove()
        if variant == "pos":
            fold_cls_position(model)
        self._save(model, self.path(stage), tok)

    def stage_finetune(self, variant: str) -> None:
        """Step 3: fine-tune for extractive QA on L1 with the L1 token embeddings frozen."""
        mlm = BertForMaskedLM.from_pretrained(self.path("s1_pretrain"), use_safetensors=True)
        model = qa_from_mlm(mlm, seed=self.cfg.seed + 3)
        hooks = []
        if variant == "pos":
            hooks += drop_cls_position_and_segment(model)
        if variant == "noise":
            hooks += add_embedding_noise(model, std=self.cfg.noise_std)
        freeze_for_step3(model, freeze_positions=variant == "pos")
        tok = self.tokenizer(self.world.l1)
        examples = squad_examples(self.world.qa("train"))
        feats = to_tensors(prepare_train_features(tok, examples, self.cfg.qa_max_length, self.cfg.doc_stride))
        n = len(feats["input_ids"])
        rank, world_size = self.acc.process_index, self.acc.num_processes
        if n // world_size < self.cfg.batch_size:  # else the batch loop below never yields
            raise XlvizError(f"only {n} training windows for a batch of {self.cfg.batch_size} per process; lower batch_size", field="batch_size")
        gen = torch.Generator().manual_seed(self.cfg.seed + 5)

        def batches():
            while True:
                order = torch.randperm(n, generator=gen)[rank::world_size]
                for i in range(0, len(order) - self.cfg.batch_size + 1, self.cfg.batch_size):
                    idx = order[i: i + self.cfg.batch_size]
                    yield trim_padding({k: v[idx] for k, v in feats.items()})

        stage = "s3_finetune" + (f"-{variant}" if variant else "")
        loop, on_log = self._loop(stage, self.cfg.finetune_steps, self.cfg.finetune_lr)
        model = train(QALoss(model), batches(), loop, self.acc, on_log=on_log, desc=stage).model
        self.acc.free_memory()
        for h in hooks:
            h.remove()
        if variant == "pos":
            fold_cls_position(model)
        self._save(model, self.path(stage), tok)

    def zero_shot(self, system: str, lang: str) -> tuple[BertForQuestionAnswering, PreTrainedTokenizerFast]:
        """Step 4: the fine-tuned model of ``system`` with ``lang``'s embeddings swapped in."""
        two, three = SYSTEMS[system]
        qa = BertForQuestionAnswering.from_pretrained(self.path(f"s3_finetune{three}"), use_safetensors=True)
        tok = self.tokenizer(lang)
        if lang == self.world.l1:
            return qa, tok
        if two is None:  # the floor: step 2 skipped, untrained L2 embeddings
            l1 = BertForMaskedLM.from_pretrained(self.path("s1_pretrain"), use_safetensors=True)
            l2 = self.l2_init_model(l1, len(tok))
        else:
            cls = XlvizBertForMaskedLM if two == "-adapters" else BertForMaskedLM
            l2 = cls.from_pretrained(self.path(f"s2_transfer-{lang}{two}"), use_safetensors=True)
        adapters = self.cfg.adapter_size if two == "-adapters" else 0
        rows = None
        if system == "dictionary-oracle":
            pairs = [(r[self.world.l1], r[lang]) for r in self.world.dictionary(lang)] + [(p, p) for p in ".?"]
            rows = translation_rows(pairs, self.tokenizer(self.world.l1), tok)
        return zero_shot_model(qa, l2, l2_positions=two == "-pos", adapter_size=adapters, dictionary_rows=rows), tok

    def stage_evaluate(self, system: str) -> None:
        """Export each language's zero-shot model and score it on that language's test set."""
        if not self.main:
            return
        rows = []
        for lang in self.world.languages:
            model, tok = self.zero_shot(system, lang)
            data = self.world.qa("test", lang)
            preds = predictions_to_text(predict_qa(model, tok, squad_examples(data), max_length=self.cfg.qa_max_length, doc_stride=self.cfg.doc_stride, batch_size=64, max_answer_length=self.cfg.max_answer_length))
            # Each language's own articles are stripped (MLQA-style), so L2/L1 compares like
            # with like; the official v1.1 numbers (English articles only) are kept beside them.
            scores = evaluate_squad(data, preds, articles=self.world.articles(lang))
            v11 = evaluate_squad(data, preds)
            atomic_write_json(self.path("predictions", f"{system}-{lang}.json"), preds)
            self._save(model, self.path("export", f"{system}-{lang}"), tok)
            rows.append({"system": system, "language": lang, "exact_match": round(scores["exact_match"], 2), "f1": round(scores["f1"], 2),
                         "exact_match_v11": round(v11["exact_match"], 2), "f1_v11": round(v11["f1"], 2)})
            self._log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} (v1.1: EM {v11['exact_match']:.1f} F1 {v11['f1']:.1f})")
        self.run.add_results(rows)


def trim_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut a right-padded batch to its longest sequence (features are padded to max_length)."""
    width = int(batch["attention_mask"].sum(1).max())
    return {k: (v[:, :width] if v.ndim == 2 else v) for k, v in batch.items()}


def run_transfer(config: TransferConfig, run_dir: str | Path) -> list[dict]:
    return Pipeline(config, run_dir).run_all()


def resume_transfer(run_dir: str | Path) -> list[dict]:
    return Pipeline.resume(run_dir).run_all()
