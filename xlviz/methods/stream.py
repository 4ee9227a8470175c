"""MONOTRANS's stages on a corpus source (:mod:`xlviz.data.sources.files`, ``multi30k``): text
files streamed line by line instead of the generated world.

- ``world``: one vocabulary per language learned on its own corpus (``world/tokenizers/<lang>``;
  the L2 vocabulary is shaped like the L1 tokenizer, :mod:`xlviz.data.vocabulary`) and the
  parallel evaluation pairs (``world/parallel/<l1>-<l2>.jsonl``, read by the analysis pages).
  With ``init_model`` the L1 tokenizer is that model's.
- ``s1_pretrain``: masked-LM pre-training of a small BERT on the L1 corpus; with ``init_model``
  nothing: step 1 *is* that model.
- ``s1b_mlm_head`` (only when ``init_model`` has no masked-LM head, e.g. all-MiniLM-L6-v2): an
  MLM head and the ``[MASK]`` row learned on the L1 corpus, body frozen, output layer tied
  (:mod:`xlviz.models.mlm_head`), saved as the run's ``s1_pretrain/``.
- ``s2_transfer-<l2>``: the L1 body frozen, new L2 token embeddings learned with MLM on the L2
  corpus (never on parallel text). ``floor`` skips it: the same body with untrained L2 rows.
- ``s3_finetune`` (with QA data): QA fine-tuning on L1 with the L1 token embeddings frozen;
  the run provides it (``ctx.finetune_corpus_qa``: QA training lives above this layer).

Corpora are never held in memory (:func:`xlviz.training.mlm.iter_blocks`); under ``accelerate
launch`` every process reads the same stream and trains on its slice of each global batch
(:mod:`xlviz.training.streamed`).
"""

from __future__ import annotations

import json
from typing import Iterator

from xlviz.data.vocabulary import special_ids_of, train_tokenizer_like
from xlviz.errors import XlvizError
from xlviz.io import atomic_dir, atomic_write_text
from xlviz.methods.base import Context, Stage
from xlviz.methods.monotrans import VARIANTS
from xlviz.models.floor import floor_model



def _streamed(blocks: Iterator[list[int]], lang: str) -> Iterator[list[int]]:
    try:
        yield from blocks
    except ValueError as e:  # iter_blocks: corpus too small for one block (of block_size tokens)
        raise XlvizError(f"{lang} corpus: {getattr(e, 'message', e)}", field=f"{lang}_corpus") from None


def max_length(cfg) -> int:
    return max(cfg.block_size, cfg.qa_max_length, cfg.eval_max_length)


def needs_mlm_head(cfg) -> bool:
    """Step 1b: ``init_model`` is a local BERT folder whose weights have no masked-LM head."""
    from xlviz.models.mlm_head import learns_mlm_head

    return bool(cfg.init_model) and learns_mlm_head(cfg.init_model)


def l1_dir(ctx: Context):
    cfg = ctx.cfg
    return cfg.init_model if cfg.init_model and not needs_mlm_head(cfg) else ctx.path("s1_pretrain")


def load_l1(ctx: Context):
    """(L1 masked LM, L1 tokenizer) in eval mode on CPU."""
    from xlviz.models.loading import load_model

    return load_model(l1_dir(ctx), task="mlm", attn_implementation="sdpa", tokenizer=ctx.path("world", "tokenizers", ctx.data.l1))


def new_l2_model(ctx: Context, l1, l1_tok, l2_tok):
    """Step 2's starting point on a corpus source, and (untrained) the floor:
    :func:`xlviz.models.floor.floor_model` with the run's seed + 1 and ``embedding_init``. The
    random rows are drawn at the model's ``initializer_range`` (0.02 for xlviz's BERTs), not at
    the world's ``l2_init_std``: the corpus runs were measured so (docs/real-models.md: "The
    German rows start at std 0.02")."""
    return floor_model(l1, l1_tok, l2_tok, seed=ctx.cfg.seed + 1, init=ctx.cfg.embedding_init)


def l2_model(ctx: Context, system: str, l1, l1_tok):
    """(``system``'s L2 masked LM, the L2 tokenizer): step 2's model, or the floor's untrained rows."""
    from xlviz.models.loading import load_model

    l2_tok = ctx.tokenizer(ctx.data.l2)
    if not VARIANTS[system].step2:  # the floor: step 2's untrained rows
        return new_l2_model(ctx, l1, l1_tok, l2_tok).eval(), l2_tok
    mono, _ = load_model(ctx.path(f"s2_transfer-{ctx.data.l2}"), task="mlm", attn_implementation="sdpa")
    return mono, l2_tok


def stream_mlm(ctx: Context, model, tok, lang: str, stage: str, steps: int, lr: float, after_step=None, *,
               pretraining: bool = False):
    """Masked-LM training of ``model`` on ``lang``'s corpus, streamed; returns the model
    (every method's masked-LM training on one language there: :func:`xlviz.methods.common.train_mlm`)."""
    from xlviz.models.surgery import MaskedOnlyLoss
    from xlviz.training.loop import train
    from xlviz.training.mlm import iter_blocks
    from xlviz.training.streamed import masked_lm_batches

    cfg, data = ctx.cfg, ctx.data
    salt = 0 if lang == data.l1 else 1
    blocks = _streamed(iter_blocks(data.texts(lang, data.o.max_lines), tok, cfg.block_size, seed=cfg.seed * 2 + salt,
                                   shuffle_buffer=data.o.shuffle_buffer), lang)
    batches = masked_lm_batches(
        blocks, batch_size=cfg.mlm_batch_size, rank=ctx.acc.process_index, world_size=ctx.acc.num_processes,
        grad_accum=cfg.grad_accum, mask_id=tok.mask_token_id, vocab_size=min(len(tok), model.config.vocab_size),
        special_ids=special_ids_of(tok), seed=cfg.seed * 2 + salt, prob=cfg.mlm_probability, random_share=cfg.mlm_random_share,
    )
    loop, on_log = ctx.loop(stage, steps, lr, pretraining=pretraining)
    extra = {"after_step": after_step} if after_step is not None else {}
    wrapped = train(MaskedOnlyLoss(model), batches, loop, ctx.acc, on_log=on_log, desc=stage, **extra)
    ctx.acc.free_memory()
    return wrapped.model


# --- stages -----------------------------------------------------------------------------
def stage_vocabularies(ctx: Context) -> None:
    """Learn one vocabulary per language on its own corpus; write the parallel pairs."""
    if not ctx.main:
        return
    from xlviz.methods.budget import sample_lines

    cfg, data = ctx.cfg, ctx.data
    size = max_length(cfg)
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
        with atomic_dir(ctx.path("world", "tokenizers", lang)) as tmp:
            tok.save_pretrained(tmp)
        ctx.log(f"  {lang}: vocabulary of {len(tok)} subwords")
    if data.o.parallel:
        pairs = data.parallel_pairs()
        lines = "".join(json.dumps({"id": str(i), "src": a, "tgt": b}, ensure_ascii=False) + "\n" for i, (a, b) in enumerate(pairs))
        atomic_write_text(ctx.path("world", "parallel", f"{data.l1}-{data.l2}.jsonl"), lines)
        ctx.log(f"  {len(pairs)} parallel {data.l1}-{data.l2} pairs for evaluation")


def stage_pretrain(ctx: Context) -> None:
    """Step 1: MLM pre-training of a small BERT on the L1 corpus (nothing with init_model)."""
    cfg = ctx.cfg
    if cfg.init_model:
        ctx.log(f"  step 1 taken from {cfg.init_model}")
        return
    from transformers import BertForMaskedLM

    from xlviz.methods.common import new_body_config

    tok = ctx.tokenizer(ctx.data.l1)
    model = BertForMaskedLM(new_body_config(ctx, len(tok)))  # the same body as every system's pre-trained here
    model = stream_mlm(ctx, model, tok, ctx.data.l1, "s1_pretrain", cfg.pretrain_steps, cfg.pretrain_lr, pretraining=True)
    ctx.save(model, ctx.path("s1_pretrain"), tok, language=ctx.data.l1, role="pretrained")


def stage_mlm_head(ctx: Context) -> None:
    """Step 1b: learn an MLM head for ``init_model`` on the L1 corpus, body and embeddings
    frozen, output layer tied to the embeddings; the result is the run's step-1 model."""
    from xlviz.models.mlm_head import freeze_for_head, mlm_from_encoder

    cfg, data = ctx.cfg, ctx.data
    if not data.o.l1_corpus:
        raise XlvizError(f"{cfg.init_model} has no masked-LM head: step 1b learns one on an L1 corpus; give l1_corpus",
                         field="data.l1_corpus")
    model, tok = mlm_from_encoder(cfg.init_model, tokenizer=ctx.path("world", "tokenizers", data.l1))
    trainable = freeze_for_head(model, mask_id=tok.mask_token_id if cfg.mlm_head_mask_row else None, top_layers=cfg.mlm_head_top_layers)
    ctx.log(f"  step 1b: training {', '.join(trainable)} (the rest of the body and the tied output layer frozen)")
    model = stream_mlm(ctx, model, tok, data.l1, "s1b_mlm_head", cfg.mlm_head_steps, cfg.mlm_head_lr)
    ctx.save(model, ctx.path("s1_pretrain"), tok, language=data.l1, role="pretrained")


def stage_transfer(ctx: Context) -> None:
    """Step 2: freeze the L1 body, learn L2 token embeddings with MLM on the L2 corpus."""
    from xlviz.models.monotrans import freeze_for_step2

    lang = ctx.data.l2
    l1, l1_tok = load_l1(ctx)
    l2_tok = ctx.tokenizer(lang)
    model = new_l2_model(ctx, l1, l1_tok, l2_tok)
    del l1
    trainable = freeze_for_step2(model, special_ids=special_ids_of(l2_tok))
    ctx.log(f"  training {', '.join(trainable)}")
    stage = f"s2_transfer-{lang}"
    model = stream_mlm(ctx, model, l2_tok, lang, stage, ctx.cfg.transfer_steps, ctx.cfg.transfer_lr)
    ctx.save(model, ctx.path(stage), l2_tok, language=lang, role="transferred")


VOCABULARIES = Stage("world", "data", run=stage_vocabularies, note="one vocabulary per language, learned on its corpus")


def stages(ctx: Context, system: str) -> list[Stage]:
    """MONOTRANS (``monotrans``) or its floor (``floor``) on a corpus source."""
    out = [VOCABULARIES, Stage("s1_pretrain", "pretrain", run=stage_pretrain)]
    if needs_mlm_head(ctx.cfg):
        out.append(Stage("s1b_mlm_head", "pretrain", run=stage_mlm_head, needs=("s1_pretrain",)))
    if VARIANTS[system].step2:
        out.append(Stage(f"s2_transfer-{ctx.data.l2}", "transfer", run=stage_transfer))
    if "qa_train" in ctx.offers:
        out.append(Stage("s3_finetune", "finetune", run=lambda c: c.finetune_corpus_qa()))
    return out
