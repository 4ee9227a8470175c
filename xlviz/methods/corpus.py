"""What every method's stages on a corpus source share (:mod:`xlviz.data.sources.files`,
``multi30k``: text files streamed line by line instead of the generated world): the run's
vocabularies (stage ``world``), step 1's model, and masked-LM training on one language's
corpus, streamed (the positions its models need: ``ctx.data.positions``).

- ``world``: one vocabulary per language learned on its own corpus (``world/tokenizers/<lang>``;
  the L2 vocabulary is shaped like the L1 tokenizer, :mod:`xlviz.data.vocabulary`) and the
  parallel evaluation pairs (``world/parallel/<l1>-<l2>.jsonl``, read by the analysis pages).
  With ``init_model`` the L1 tokenizer is that model's.

Corpora are never held in memory (:func:`xlviz.training.mlm.iter_blocks`); under ``accelerate
launch`` every process reads the same stream and trains on its slice of each global batch
(:mod:`xlviz.training.streamed`). MONOTRANS's own stages there are in :mod:`xlviz.methods.monotrans`
(``corpus_stages``); its step-1 model, which the QA task also reads, is :func:`load_l1`.
"""

from __future__ import annotations

import json
from typing import Iterator

from xlviz.data.vocabulary import special_ids_of, train_tokenizer_like
from xlviz.errors import XlvizError
from xlviz.io import atomic_dir, atomic_write_text
from xlviz.methods.base import Context, Stage, record_world_file, world_target


def _streamed(blocks: Iterator[list[int]], lang: str) -> Iterator[list[int]]:
    try:
        yield from blocks
    except ValueError as e:  # iter_blocks: corpus too small for one block (of block_size tokens)
        raise XlvizError(f"{lang} corpus: {getattr(e, 'message', e)}", field=f"{lang}_corpus") from None


def needs_mlm_head(cfg) -> bool:
    """Step 1b: ``init_model`` is a local BERT folder whose weights have no masked-LM head."""
    from xlviz.models.mlm_head import learns_mlm_head

    return bool(cfg.init_model) and learns_mlm_head(cfg.init_model)


def l1_dir(ctx: Context):
    """Step 1's model folder: ``init_model`` itself, or ``s1_pretrain`` (pre-trained here, or
    ``init_model`` with the MLM head step 1b learned)."""
    cfg = ctx.cfg
    return cfg.init_model if cfg.init_model and not needs_mlm_head(cfg) else ctx.path("s1_pretrain")


def load_l1(ctx: Context):
    """(L1 masked LM, L1 tokenizer) in eval mode on CPU."""
    from xlviz.models.loading import load_model

    return load_model(l1_dir(ctx), task="mlm", attn_implementation="sdpa", tokenizer=ctx.world_file("tokenizer", language=ctx.data.l1))


def stream_mlm(ctx: Context, model, tok, lang: str, stage: str, steps: int, lr: float, after_step=None, *,
               pretraining: bool = False):
    """Masked-LM training of ``model`` on ``lang``'s corpus, streamed; returns the model
    (every method's masked-LM training on one language there: :func:`xlviz.methods.common.train_mlm`)."""
    from xlviz.models.surgery import MaskedOnlyLoss
    from xlviz.training.loop import train
    from xlviz.training.masking import masking
    from xlviz.training.mlm import iter_blocks
    from xlviz.training.streamed import masked_lm_batches

    cfg, data = ctx.cfg, ctx.data
    salt = 0 if lang == data.l1 else 1
    blocks = _streamed(iter_blocks(data.texts(lang, data.o.max_lines), tok, cfg.block_size, seed=cfg.seed * 2 + salt,
                                   shuffle_buffer=data.o.shuffle_buffer), lang)
    batches = masked_lm_batches(
        blocks, batch_size=cfg.mlm_batch_size, rank=ctx.acc.process_index, world_size=ctx.acc.num_processes,
        grad_accum=cfg.grad_accum, mask_id=tok.mask_token_id, vocab_size=min(len(tok), model.config.vocab_size),
        special_ids=special_ids_of(tok), seed=cfg.seed * 2 + salt, **masking(cfg),
    )
    loop, on_log = ctx.loop(stage, steps, lr, pretraining=pretraining)
    extra = {"after_step": after_step} if after_step is not None else {}
    wrapped = train(MaskedOnlyLoss(model), batches, loop, ctx.acc, on_log=on_log, desc=stage, **extra)
    ctx.acc.free_memory()
    return wrapped.model


# --- the data stage ---------------------------------------------------------------------
def stage_vocabularies(ctx: Context) -> None:
    """Learn one vocabulary per language on its own corpus; write the parallel pairs."""
    if not ctx.main:
        return
    from xlviz.methods.budget import sample_lines

    cfg, data = ctx.cfg, ctx.data
    size = data.positions(cfg)
    lines = sample_lines(cfg, data.o.tokenizer_lines)
    if lines < data.o.tokenizer_lines:
        ctx.log(f"  vocabularies learned on the first {lines} lines of each corpus (the run's budget; tokenizer_lines {data.o.tokenizer_lines})")
    if cfg.init_model:
        from xlviz.models.loading import load_model

        # refuses models without an MLM head here, not later (unless step 1b learns one)
        model, l1_tok = load_model(cfg.init_model, task="base" if needs_mlm_head(cfg) else "mlm")
        ctx.log(f"  step 1 is {cfg.init_model} ({type(model).__name__}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)")
        del model
    else:
        from xlviz.data.tokenization import train_tokenizer

        l1_tok = train_tokenizer(data.texts(data.l1, lines)(), cfg.vocab_size, algorithm=cfg.tokenizer,
                                 lowercase=data.o.lowercase, model_max_length=size)
    l2_tok = train_tokenizer_like(data.texts(data.l2, lines)(), data.o.l2_vocab_size or cfg.vocab_size, l1_tok,
                                  algorithm=cfg.tokenizer, lowercase=data.o.lowercase,
                                  model_max_length=min(size, l1_tok.model_max_length or size))
    for lang, tok in ((data.l1, l1_tok), (data.l2, l2_tok)):
        with atomic_dir(world_target(ctx, "tokenizer", language=lang)) as tmp:
            tok.save_pretrained(tmp)
        ctx.log(f"  {lang}: vocabulary of {len(tok)} subwords")
    if data.o.parallel:
        pairs = data.parallel_pairs()
        lines = "".join(json.dumps({"id": str(i), "src": a, "tgt": b}, ensure_ascii=False) + "\n" for i, (a, b) in enumerate(pairs))
        atomic_write_text(world_target(ctx, "parallel", language=data.l2, pair=data.l1), lines)
        ctx.log(f"  {len(pairs)} parallel {data.l1}-{data.l2} pairs for evaluation")
        record_world_file(ctx, "parallel", language=data.l2, pair=data.l1)
    for lang in (data.l1, data.l2):
        record_world_file(ctx, "tokenizer", language=lang)


VOCABULARIES = Stage("world", "data", run=stage_vocabularies, note="one vocabulary per language, learned on its corpus")
