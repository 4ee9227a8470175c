"""MONOTRANS's stages on a corpus source (:mod:`xlviz.data.sources.files`, ``multi30k``): text
files streamed line by line instead of the generated world.

- ``world``: the vocabularies and parallel pairs every method's run there starts from
  (:data:`xlviz.methods.corpus.VOCABULARIES`).
- ``s1_pretrain``: masked-LM pre-training of a small BERT on the L1 corpus; with ``init_model``
  nothing: step 1 *is* that model.
- ``s1b_mlm_head`` (only when ``init_model`` has no masked-LM head, e.g. all-MiniLM-L6-v2): an
  MLM head and the ``[MASK]`` row learned on the L1 corpus, body frozen, output layer tied
  (:mod:`xlviz.models.mlm_head`), saved as the run's ``s1_pretrain/``.
- ``s2_transfer-<l2>``: the L1 body frozen, new L2 token embeddings learned with MLM on the L2
  corpus (never on parallel text). ``floor`` skips it: the same body with untrained L2 rows.
- ``s3_finetune`` (with QA data): QA fine-tuning on L1 with the L1 token embeddings frozen;
  the run provides it (``ctx.finetune_corpus_qa``: QA training lives above this layer).

Which system skips step 2 is MONOTRANS's table (:data:`xlviz.methods.monotrans.VARIANTS`):
the functions here are told ``step2``, so this module sits below :mod:`xlviz.methods.monotrans`.
"""

from __future__ import annotations

from transformers import BertForMaskedLM

from xlviz.data.vocabulary import special_ids_of
from xlviz.errors import XlvizError
from xlviz.methods.base import Context, Stage
from xlviz.methods.common import new_body_config
from xlviz.methods.corpus import VOCABULARIES, needs_mlm_head, stream_mlm
from xlviz.models.floor import floor_model
from xlviz.models.monotrans import freeze_for_step2


def l1_dir(ctx: Context):
    """Step 1's model folder: ``init_model`` itself, or ``s1_pretrain`` (pre-trained here, or
    ``init_model`` with the MLM head step 1b learned)."""
    cfg = ctx.cfg
    return cfg.init_model if cfg.init_model and not needs_mlm_head(cfg) else ctx.path("s1_pretrain")


def load_l1(ctx: Context):
    """(L1 masked LM, L1 tokenizer) in eval mode on CPU."""
    from xlviz.models.loading import load_model

    return load_model(l1_dir(ctx), task="mlm", attn_implementation="sdpa", tokenizer=ctx.world_file("tokenizer", language=ctx.data.l1))


def new_l2_model(ctx: Context, l1, l1_tok, l2_tok):
    """Step 2's starting point on a corpus source, and (untrained) the floor:
    :func:`xlviz.models.floor.floor_model` with the run's seed + 1 and ``embedding_init``. The
    random rows are drawn at the model's ``initializer_range`` (0.02 for xlviz's BERTs), not at
    the world's ``l2_init_std``: the corpus runs were measured so (docs/real-models.md: "The
    German rows start at std 0.02")."""
    return floor_model(l1, l1_tok, l2_tok, seed=ctx.cfg.seed + 1, init=ctx.cfg.embedding_init)


def l2_model(ctx: Context, step2: bool, l1, l1_tok):
    """(The L2 masked LM, the L2 tokenizer): step 2's model, or without ``step2`` (the floor)
    its untrained starting point."""
    from xlviz.models.loading import load_model

    l2_tok = ctx.tokenizer(ctx.data.l2)
    if not step2:  # the floor: step 2's untrained rows
        return new_l2_model(ctx, l1, l1_tok, l2_tok).eval(), l2_tok
    mono, _ = load_model(ctx.path(f"s2_transfer-{ctx.data.l2}"), task="mlm", attn_implementation="sdpa")
    return mono, l2_tok


# --- stages -----------------------------------------------------------------------------
def stage_pretrain(ctx: Context) -> None:
    """Step 1: MLM pre-training of a small BERT on the L1 corpus (nothing with init_model)."""
    cfg = ctx.cfg
    if cfg.init_model:
        ctx.log(f"  step 1 taken from {cfg.init_model}")
        return
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
    model, tok = mlm_from_encoder(cfg.init_model, tokenizer=ctx.world_file("tokenizer", language=data.l1))
    trainable = freeze_for_head(model, mask_id=tok.mask_token_id if cfg.mlm_head_mask_row else None, top_layers=cfg.mlm_head_top_layers)
    ctx.log(f"  step 1b: training {', '.join(trainable)} (the rest of the body and the tied output layer frozen)")
    model = stream_mlm(ctx, model, tok, data.l1, "s1b_mlm_head", cfg.mlm_head_steps, cfg.mlm_head_lr)
    ctx.save(model, ctx.path("s1_pretrain"), tok, language=data.l1, role="pretrained")


def stage_transfer(ctx: Context) -> None:
    """Step 2: freeze the L1 body, learn L2 token embeddings with MLM on the L2 corpus."""
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


def stages(ctx: Context, step2: bool) -> list[Stage]:
    """MONOTRANS (``monotrans``) or, without ``step2``, its floor (``floor``) on a corpus source."""
    out = [VOCABULARIES, Stage("s1_pretrain", "pretrain", run=stage_pretrain)]
    if needs_mlm_head(ctx.cfg):
        out.append(Stage("s1b_mlm_head", "pretrain", run=stage_mlm_head, needs=("s1_pretrain",)))
    if step2:
        out.append(Stage(f"s2_transfer-{ctx.data.l2}", "transfer", run=stage_transfer))
    if "qa_train" in ctx.offers:
        out.append(Stage("s3_finetune", "finetune", run=lambda c: c.finetune_corpus_qa()))
    return out
