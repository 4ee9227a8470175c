"""CLWE (Artetxe et al. 2020, §3.1): cross-lingual word embeddings under a BERT.

1. ``clwe_vectors``: skip-gram embeddings (gensim) of each language's subwords on its own
   corpus, of the BERT's hidden size; each L2's mapped into L1's space with an orthogonal map
   as VecMap does (unit-center-unit normalisation, self-learning; initialised from the
   intra-lingual similarity distributions, or from identical strings: ``clwe_init``).
2. ``s1_clwe``: a BERT pre-trained with MLM on L1 on top of the frozen (normalised) L1 vectors.
3. ``s3_clwe``: QA on L1 with them still frozen.
4. zero-shot: the mapped L2 vectors plugged in for the L1 ones.

On a corpus source (text files) the same stages read the corpora through the source (skip-gram
on each language's first ``tokenizer_lines`` lines, at most the run's budget of them:
:mod:`xlviz.methods.budget`; masked LM on the L1 corpus streamed as
MONOTRANS's step 1 reads it); without QA fine-tuning there, the run's tasks (sentence retrieval
per layer) score its L1 and L2 encoders.

Only the special tokens' rows (which have no skip-gram vector) train, as in MONOTRANS's step 3;
the L2's special rows are L1's. The front end is :func:`xlviz.models.clwe.clwe_matrices`
(vectors scaled to BERT's initialisation std, one scale for both languages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from safetensors.torch import load_file, save_file
from transformers import BertForMaskedLM, BertForQuestionAnswering

from xlviz.io import atomic_dir, atomic_write_json
from xlviz.methods.base import Context, Method, Stage
from xlviz.methods.common import (
    corpus_sample, data_stage, finetune_qa, load_mlm, new_bert, on_corpus, run_l1, run_l2s, run_languages, train_mlm,
)
from xlviz.methods.options import MethodOptions, option
from xlviz.models.clwe import clwe_matrices
from xlviz.models.floor import make_l2_mlm
from xlviz.models.monotrans import N_SPECIAL, freeze_for_step3, qa_from_mlm, zero_shot_model
from xlviz.models.surgery import word_embeddings


def run_vectors(ctx: Context) -> None:
    if not ctx.main:
        return
    cfg, l1, l2s = ctx.cfg, run_l1(ctx), run_l2s(ctx)
    dim = new_bert(ctx, l1).config.hidden_size
    toks = {lang: ctx.tokenizer(lang) for lang in run_languages(ctx)}
    report = {"dim": dim, "init": cfg.clwe_init, "stochastic_initial": cfg.clwe_stochastic_initial, "languages": {}}
    mapping = {"stochastic_initial": cfg.clwe_stochastic_initial}
    if on_corpus(ctx):  # a corpus source: VecMap's loop follows the run's budget (the world's vocabularies are small)
        from xlviz.methods.budget import clwe_mapping

        capped = clwe_mapping(cfg)
        if capped:
            mapping.update(capped)
            report["budget"] = capped
            ctx.log(f"  mapping within the run's budget: {', '.join(f'{k} {v}' for k, v in capped.items())}")
    with atomic_dir(ctx.path("clwe")) as tmp:
        for lang in l2s:
            result = clwe_matrices(toks, {l1: corpus_sample(ctx, l1), lang: corpus_sample(ctx, lang)}, l1, lang, dim,
                                   init=cfg.clwe_init, seed=cfg.seed, mapping=mapping)
            if lang == l2s[0]:  # the L1 side is the same for every L2 (same corpus, seed, normalisation)
                save_file({"embeddings": result.l1_rows}, str(tmp / f"{l1}.safetensors"))
            save_file({"embeddings": result.l2_rows}, str(tmp / f"{lang}.safetensors"))
            m = result.mapping
            report["languages"][lang] = {"dictionary": int(len(m.src)), "iterations": len(m.objective),
                                         "objective": m.objective[-1] if m.objective else None, "coverage": result.coverage,
                                         "keep_prob": [m.keep_prob[0], m.keep_prob[-1]] if m.keep_prob else None}
            ctx.log(f"  {lang}: skip-gram vectors mapped into {l1}'s space (dictionary {len(m.src)}, "
                    f"{len(m.objective)} self-learning iterations, coverage {result.coverage[lang]:.0%})")
        atomic_write_json(tmp / "mapping.json", report)


VECTORS = Stage("clwe_vectors", "data", run=run_vectors, note="skip-gram vectors per language (on a corpus source its first "
                "tokenizer_lines lines, capped by the run's budget); L2 mapped into L1's space",
                needs=("world",))


def vectors(ctx: Context, lang: str) -> torch.Tensor:
    return load_file(str(ctx.path("clwe", f"{lang}.safetensors")))["embeddings"]


def with_rows(model, rows: torch.Tensor):
    """``model`` with its non-special token-embedding rows set to ``rows`` (the tied decoder follows)."""
    with torch.no_grad():
        word_embeddings(model).weight[N_SPECIAL:] = rows[N_SPECIAL:].to(word_embeddings(model).weight.dtype)
    return model


def build_pretrain(ctx: Context) -> BertForMaskedLM:
    model = with_rows(new_bert(ctx, run_l1(ctx)), vectors(ctx, run_l1(ctx)))
    freeze_for_step3(model)  # every parameter but the token rows (their special rows train)
    return model


def train_pretrain(ctx: Context, model) -> None:
    model = train_mlm(ctx, model, run_l1(ctx), "s1_clwe", ctx.cfg.pretrain_steps, ctx.cfg.pretrain_lr, pretraining=True)
    ctx.save(model, ctx.path("s1_clwe"), ctx.tokenizer(run_l1(ctx)))


def build_finetune(ctx: Context):
    model = qa_from_mlm(load_mlm(ctx, "s1_clwe"), seed=ctx.cfg.seed + 3)
    freeze_for_step3(model)
    return model


def train_finetune(ctx: Context, model) -> None:
    model = finetune_qa(ctx, model, "s3_clwe")
    ctx.save(model, ctx.path("s3_clwe"), ctx.tokenizer(run_l1(ctx)))


class Clwe(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [data_stage(ctx), VECTORS,
               Stage("s1_clwe", "pretrain", build=build_pretrain, train=train_pretrain, trains=(r".*",), rows="special",
                     note="masked LM on L1 over the frozen L1 skip-gram vectors")]
        if not on_corpus(ctx):  # a corpus source: scored by its tasks (retrieval), no QA fine-tuning
            out.append(Stage("s3_clwe", "finetune", build=build_finetune, train=train_finetune, trains=(r".*",), rows="special",
                             note="QA on L1, the L1 vectors still frozen"))
        return out

    def runs_on(self, system: str) -> tuple[str, ...]:
        return ("world", "corpus")

    def dictionary(self, system: str, cfg=None, ctx: Context | None = None, lang: str | None = None) -> dict | None:
        """No external dictionary: VecMap induces one from the two monolingual spaces (its final
        size, when the mapping's report is there to read, else None)."""
        size = None
        if ctx is not None and lang is not None:
            try:
                held = json.loads(ctx.path(VECTORS.name, "mapping.json").read_text(encoding="utf-8"))
                size = int(held["languages"][lang]["dictionary"])
            except (OSError, ValueError, KeyError, TypeError):
                size = None
        return {"size": size, "source": "induced", "split": "train"}

    def describe(self, system: str) -> str:
        return "skip-gram vectors mapped with VecMap under a BERT trained on L1 over them (frozen); swap in the L2 vectors"

    def encoder(self, ctx: Context, system: str, lang: str):
        l1 = load_mlm(ctx, "s1_clwe")
        tok = ctx.tokenizer(lang)
        if lang == run_l1(ctx):
            return l1, tok
        # the L1 body under an L2-sized matrix whose rows past the first N_SPECIAL are all the
        # mapped CLWE vectors (none stays untrained, so not floor_model's recipe)
        return with_rows(make_l2_mlm(l1, len(tok), seed=ctx.cfg.seed + 1), vectors(ctx, lang)), tok

    def qa_model(self, ctx: Context, system: str, lang: str):
        qa = BertForQuestionAnswering.from_pretrained(ctx.path("s3_clwe"), use_safetensors=True)
        if lang == run_l1(ctx):
            return qa, ctx.tokenizer(lang)
        l2, tok = self.encoder(ctx, system, lang)
        return zero_shot_model(qa, l2), tok


@dataclass
class ClweOptions(MethodOptions):
    # "identical" needs languages that share some strings, e.g. Latin-script subwords.
    clwe_init: str = option("unsupervised", "VecMap's initialisation: unsupervised (intra-lingual similarity distributions) or "
                            "identical (identical strings; needs languages that share some)", choices=("unsupervised", "identical"))
    # VecMap's stochastic dictionary induction keeps each similarity with this probability at
    # first and doubles it after 50 iterations without improvement; 1 turns it off (the loop
    # then is deterministic, as this bench's CLWE was before following VecMap).
    clwe_stochastic_initial: float = option(0.1, "VecMap's stochastic dictionary induction: the first keep probability "
                                            "(VecMap's 0.1; 1: no stochastic induction)", low=0, high=1, low_open=True)


METHOD = Clwe("clwe", ("clwe",), description="cross-lingual word embeddings under a BERT (Artetxe et al. 2020)", order=15,
              options=ClweOptions)
