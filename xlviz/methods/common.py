"""Stages and training steps that several methods share on the generated world: the world and
its tokenizers, masked-LM pre-training of a small BERT on one language (MONOTRANS's step 1,
``mono-l2``), masked-LM training of any model on one language's corpus, and extractive-QA
fine-tuning on the L1 training set.

Shared stages are declared here once so that every method asking for ``s1_pretrain`` gets the
same stage (same name, same function), which the run then executes once.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable

import torch
from transformers import BertForMaskedLM

from xlviz.data.squad import squad_examples
from xlviz.data.tokenization import train_tokenizer
from xlviz.io import atomic_dir
from xlviz.methods import corpus as corpus_source
from xlviz.methods.base import Context, Stage, record_world_file, world_target
from xlviz.models.monotrans import bert_config
from xlviz.training.loop import train
from xlviz.training.masking import masking
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens, mlm_batches
from xlviz.training.qa import finetune_qa as train_qa


# --------------------------------------------------------------------------- the world
def run_world(ctx: Context) -> None:
    """Generate the world's files and learn one vocabulary per language on its own corpus;
    record the files readers open (the world, its QA sets and parallel pairs, the tokenizers)."""
    if not ctx.main:
        return
    ctx.world.save(world_target(ctx, "world").parent)
    for lang in ctx.world.languages:
        tok = train_tokenizer(ctx.world.corpus(lang), ctx.cfg.vocab_size, algorithm=ctx.cfg.tokenizer,
                              model_max_length=max_length(ctx))
        with atomic_dir(world_target(ctx, "tokenizer", language=lang)) as tmp:
            tok.save_pretrained(tmp)
        ctx.log(f"  {lang}: vocabulary of {len(tok)} subwords")
    for entry in ctx.world.read_back():
        record_world_file(ctx, **entry)
    for lang in ctx.world.languages:
        record_world_file(ctx, "tokenizer", language=lang)


WORLD = Stage("world", "data", run=run_world, note="the generated world's data and one vocabulary per language")


def max_length(ctx: Context) -> int:
    """Positions every model of the run needs: MLM blocks and QA windows (on a corpus source
    also the retrieval task's sentences), as the run's data says (``ctx.data.positions``)."""
    return ctx.data.positions(ctx.cfg)


# --------------------------------------------------------------------------- the run's languages and text
# One stage implementation per method reads its data through ctx.data, whichever the source
# (xlviz.data.sources.RunData): the generated world (in memory) or a corpus source (text files
# streamed line by line). on_corpus is left to the few stages whose premise differs there.
def on_corpus(ctx: Context) -> bool:
    """Whether the run's source is a corpus source (streamed text files) rather than the world."""
    return getattr(ctx, "source_kind", "world") == "corpus"


def run_l1(ctx: Context) -> str:
    return ctx.data.l1


def run_l2s(ctx: Context) -> list[str]:
    return list(ctx.data.l2s)


def run_languages(ctx: Context) -> list[str]:
    return [run_l1(ctx), *run_l2s(ctx)]


def corpus_texts(ctx: Context, lang: str) -> Callable[[], Iterable[str]]:
    """A callable giving a fresh pass over ``lang``'s corpus: the world's list, or a corpus
    source's files streamed (``max_lines`` per pass)."""
    return ctx.data.corpus(lang)


def corpus_sample(ctx: Context, lang: str) -> list[str]:
    """The lines of ``lang``'s corpus a vocabulary (or CLWE's skip-gram) is learned on: the
    world's whole corpus, or a corpus source's first ``tokenizer_lines``, capped by the run's
    budget (:func:`xlviz.methods.budget.sample_lines`, as MONOTRANS's vocabularies there)."""
    from xlviz.methods.budget import sample_lines

    lines = ctx.data.tokenizer_lines
    return ctx.data.sample(lang, None if lines is None else sample_lines(ctx.cfg, lines))


def corpus_head(ctx: Context, lang: str, n: int) -> list[str]:
    """The first ``n`` lines of ``lang``'s corpus."""
    return list(itertools.islice(corpus_texts(ctx, lang)(), n))


def lowercase(ctx: Context) -> bool:
    """Whether the run's vocabularies lowercase (a corpus source's ``lowercase``; the world's: yes)."""
    return ctx.data.lowercase


def data_stage(ctx: Context) -> Stage:
    """The run's first stage, ``world``: the generated world and its vocabularies, or on a
    corpus source one vocabulary per language learned on its corpus (:data:`xlviz.methods.corpus.VOCABULARIES`)."""
    if on_corpus(ctx):
        return corpus_source.VOCABULARIES
    return WORLD


def new_body_config(ctx: Context, vocab_size: int):
    """The config of a BERT pre-trained from scratch in this run: the same for every system
    (on a corpus source with the run's ``dropout``, as MONOTRANS's step 1 there)."""
    extra = {"dropout": ctx.cfg.dropout} if on_corpus(ctx) else {}
    return bert_config(vocab_size, ctx.cfg.model_size, max_position_embeddings=max_length(ctx), **extra)


# --------------------------------------------------------------------------- masked LM
def train_mlm(ctx: Context, model, lang: str, stage: str, steps: int, lr: float, after_step=None, *, pretraining: bool = False):
    """Masked-LM training of ``model`` on ``lang``'s corpus (masked-only loss, bf16 where the
    CPU has native bf16); returns the trained model. ``after_step`` goes to
    :func:`xlviz.training.loop.train` (its parameter names start with ``model.``)."""
    if on_corpus(ctx):  # the corpus streamed, as MONOTRANS's stages read it there (same data and batches)
        return corpus_source.stream_mlm(ctx, model, ctx.tokenizer(lang), lang, stage, steps, lr, after_step=after_step, pretraining=pretraining)
    cfg = ctx.cfg
    tok = ctx.tokenizer(lang)
    blocks = mlm_batches(ctx.data.corpus(lang), tok, cfg.block_size, cfg.mlm_batch_size, long_block_size=max_length(ctx),
                         long_share=cfg.long_block_share, seed=cfg.seed, rank=ctx.acc.process_index, world_size=ctx.acc.num_processes)
    gen = torch.Generator().manual_seed(cfg.seed * 31 + ctx.acc.process_index)
    vocab = model.config.vocab_size

    def batches():
        for ids in blocks:
            inputs, labels = mask_tokens(ids, mask_id=tok.mask_token_id, vocab_size=vocab, generator=gen, **masking(cfg))
            yield {"input_ids": inputs, "labels": labels}

    loop, on_log = ctx.loop(stage, steps, lr, pretraining=pretraining)
    extra = {"after_step": after_step} if after_step is not None else {}
    wrapped = train(MaskedOnlyMLM(model), batches(), loop, ctx.acc, on_log=on_log, desc=stage, **extra)
    ctx.acc.free_memory()
    return wrapped.model


def new_bert(ctx: Context, lang: str) -> BertForMaskedLM:
    """A fresh small BERT masked LM for ``lang``'s vocabulary (seeded by the stage)."""
    return BertForMaskedLM(new_body_config(ctx, len(ctx.tokenizer(lang))))


def pretrain_stage(lang: str | None = None) -> Stage:
    """Masked-LM pre-training of a small BERT on one language's corpus: ``s1_pretrain`` on L1
    (MONOTRANS's step 1), ``s1_pretrain-<lang>`` on an L2 (``mono-l2``)."""
    name = "s1_pretrain" if lang is None else f"s1_pretrain-{lang}"

    def build(ctx: Context) -> BertForMaskedLM:
        return new_bert(ctx, lang or ctx.data.l1)

    def run_train(ctx: Context, model) -> None:
        target = lang or ctx.data.l1
        model = train_mlm(ctx, model, target, name, ctx.cfg.pretrain_steps, ctx.cfg.pretrain_lr,
                          pretraining=True if lang is None else "l2_body")
        ctx.save(model, ctx.path(name), ctx.tokenizer(target), language=target, role="pretrained")

    return Stage(name, "pretrain", build=build, train=run_train, trains=(r".*",),
                 note=f"every parameter: masked LM on the {'L1' if lang is None else lang} corpus")


def load_mlm(ctx: Context, stage: str) -> BertForMaskedLM:
    return BertForMaskedLM.from_pretrained(ctx.path(stage), use_safetensors=True)


# --------------------------------------------------------------------------- QA
def finetune_qa(ctx: Context, model, stage: str, tokenizer=None, data: dict | None = None):
    """Fine-tune ``model`` for extractive QA on the L1 training set, or on ``data`` (SQuAD
    JSON), read with ``tokenizer`` (default the L1 vocabulary); returns the trained model.
    On the L1 training set, dev EM/F1 join the metrics every ``eval_every`` steps. The training
    itself is every QA stage's (:func:`xlviz.training.qa.finetune_qa`), batched per process."""
    cfg = ctx.cfg
    tok = tokenizer or ctx.tokenizer(ctx.data.l1)
    loop, on_log = ctx.loop(stage, cfg.finetune_steps, cfg.finetune_lr)
    # dev EM/F1 during fine-tuning: the run scores (the evaluation layer sits above the methods)
    scorer = getattr(ctx, "dev_scorer", None)
    on_eval = scorer(tok, stage) if scorer is not None and data is None and getattr(cfg, "eval_every", 0) else None
    examples = squad_examples(data if data is not None else ctx.data.qa("train"))
    model = train_qa(model, tok, examples, accelerator=ctx.acc, loop=loop, batch_size=cfg.batch_size, max_length=cfg.qa_max_length,
                     doc_stride=cfg.doc_stride, seed=cfg.seed + 5, global_batch=False, on_log=on_log, on_eval=on_eval, desc=stage)
    judge = getattr(ctx, "judge_qa", None)
    if judge is not None and data is None:  # trained on the L1 set: judged on the L1 dev split
        judge(stage, model, tok)
    return model


__all__ = ["WORLD", "run_world", "on_corpus", "run_l1", "run_l2s", "run_languages", "corpus_texts", "corpus_sample",
           "corpus_head", "lowercase", "data_stage", "new_body_config", "train_mlm", "new_bert", "pretrain_stage", "load_mlm", "finetune_qa",
           "max_length"]
