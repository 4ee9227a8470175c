"""Active forgetting (Chen et al., NeurIPS 2023) on MONOTRANS's recipe: ``monotrans+forgetting``.

1. ``s1_forgetting``: the small BERT pre-trained with MLM on L1 as MONOTRANS's step 1, its
   token embeddings (and their AdamW state) re-drawn every ``forget_every`` updates
   (:class:`xlviz.training.forgetting.EmbeddingReset`; 0: the paper's K / steps ratio).
2. ``s2_forgetting-<l2>``: MONOTRANS's step 2 on that body: frozen, new L2 token embeddings
   learned with MLM on the L2 corpus.
3. ``s3_forgetting``: QA on L1 with the L1 token embeddings frozen (special rows train).
4. zero-shot: the fine-tuned model with the L2 embeddings swapped in.

The stage builders here take the step-1 stage and the L2 initialisation as arguments, so
:mod:`xlviz.methods.wechsel` builds its step 2 on either body with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from transformers import BertForMaskedLM, BertForQuestionAnswering

from xlviz.methods.base import Context, Method, Stage
from xlviz.methods.common import WORLD, finetune_qa, load_mlm, new_bert, train_mlm
from xlviz.methods.options import MethodOptions, option
from xlviz.methods.monotrans import l2_init_model
from xlviz.models.monotrans import freeze_for_step2, freeze_for_step3, qa_from_mlm, zero_shot_model
from xlviz.models.surgery import word_embeddings
from xlviz.training.forgetting import EmbeddingReset

SYSTEM = "monotrans+forgetting"
S1, S3 = "s1_forgetting", "s3_forgetting"

# An L2 initialisation: (ctx, step 1's masked LM, L2) -> step 2's starting model.
Init = Callable[[Context, BertForMaskedLM, str], BertForMaskedLM]


def random_init(ctx: Context, l1: BertForMaskedLM, lang: str) -> BertForMaskedLM:
    """MONOTRANS's: new rows N(0, l2_init_std^2), special rows L1's."""
    return l2_init_model(ctx, l1, lang)


def forget_every(ctx: Context) -> int:
    """K of this run: ``forget_every``, or (0) the L2's step-2 budget, ``transfer_steps``: the
    body learns to work with embeddings that have had as many updates as a new language's
    step 2 gives them. The paper's ratio (``scaled_every``: 8 of 1,000 updates here) leaves
    the embeddings too few updates to learn anything at this size: step 1 then ends above the
    unigram entropy (docs/methods.md, "Active forgetting")."""
    return ctx.cfg.forget_every or ctx.cfg.transfer_steps


def embedding_reset(model: BertForMaskedLM, every: int, steps: int, seed: int, prefix: str = "model.") -> EmbeddingReset:
    """The reset callback for ``model``'s token embeddings, named as :func:`train_mlm`'s loop
    sees them (``prefix``: its wrapper), re-drawn with the model's own initialisation
    (N(0, initializer_range^2), the padding row zero)."""
    emb = word_embeddings(model)
    name = next(n for n, p in model.named_parameters() if p is emb.weight)
    zero = (emb.padding_idx,) if emb.padding_idx is not None else ()
    return EmbeddingReset(prefix + name, every, steps, std=model.config.initializer_range, seed=seed, zero_rows=zero)


def run_pretrain(ctx: Context, model) -> None:
    steps, every = ctx.cfg.pretrain_steps, forget_every(ctx)
    reset = embedding_reset(model, every, steps, seed=ctx.cfg.seed)
    model = train_mlm(ctx, model, ctx.data.l1, S1, steps, ctx.cfg.pretrain_lr, after_step=reset, pretraining=True)
    ctx.log(f"  token embeddings re-drawn after {len(reset.done)} of {steps} updates (every {every})")
    ctx.save(model, ctx.path(S1), ctx.tokenizer(ctx.data.l1))


PRETRAIN = Stage(S1, "pretrain", build=lambda ctx: new_bert(ctx, ctx.data.l1), train=run_pretrain, trains=(r".*",),
                 note="every parameter: masked LM on the L1 corpus, the token embeddings re-drawn every K updates")

TRANSFER_TRAINS = (r"(.*\.)?word_embeddings\.weight", r"cls\.predictions\.(decoder\.)?bias")


def transfer_stage(name: str, s1: str, lang: str, init: Init, note: str) -> Stage:
    """MONOTRANS's step 2 on ``s1``'s body for ``lang``, from the rows ``init`` gives."""

    def build(ctx: Context):
        model = init(ctx, load_mlm(ctx, s1), lang)
        freeze_for_step2(model)
        return model

    def run_train(ctx: Context, model) -> None:
        model = train_mlm(ctx, model, lang, name, ctx.cfg.transfer_steps, ctx.cfg.transfer_lr)
        ctx.save(model, ctx.path(name), ctx.tokenizer(lang))

    return Stage(name, "transfer", build=build, train=run_train, trains=TRANSFER_TRAINS, rows="all but special",
                 note=f"{lang} token embeddings {note}; body frozen")


def build_finetune(ctx: Context):
    model = qa_from_mlm(load_mlm(ctx, S1), seed=ctx.cfg.seed + 3)
    freeze_for_step3(model)
    return model


def run_finetune(ctx: Context, model) -> None:
    model = finetune_qa(ctx, model, S3)
    ctx.save(model, ctx.path(S3), ctx.tokenizer(ctx.data.l1))


FINETUNE = Stage(S3, "finetune", build=build_finetune, train=run_finetune, trains=(r".*",), rows="special",
                 note="QA on L1 over the forgetting body: everything but the L1 token embeddings (special rows train)")


def swap(ctx: Context, s3: str, l2_model, lang: str):
    """Step 4: ``s3``'s fine-tuned model with ``l2_model``'s embeddings swapped in."""
    qa = BertForQuestionAnswering.from_pretrained(ctx.path(s3), use_safetensors=True)
    if lang == ctx.data.l1:
        return qa, ctx.tokenizer(lang)
    return zero_shot_model(qa, l2_model), ctx.tokenizer(lang)


class Forgetting(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        return [WORLD, PRETRAIN] + [transfer_stage(f"s2_forgetting-{lang}", S1, lang, random_init, "from random rows")
                                    for lang in ctx.data.l2s] + [FINETUNE]

    def describe(self, system: str) -> str:
        return "MONOTRANS on a body pre-trained with active forgetting (embeddings re-drawn every K updates; Chen et al. 2023)"

    def _l2(self, ctx: Context, lang: str):
        return BertForMaskedLM.from_pretrained(ctx.path(f"s2_forgetting-{lang}"), use_safetensors=True)

    def qa_model(self, ctx: Context, system: str, lang: str):
        return swap(ctx, S3, None if lang == ctx.data.l1 else self._l2(ctx, lang), lang)

    def encoder(self, ctx: Context, system: str, lang: str):
        return (load_mlm(ctx, S1) if lang == ctx.data.l1 else self._l2(ctx, lang)), ctx.tokenizer(lang)


@dataclass
class ForgettingOptions(MethodOptions):
    # The paper re-draws every 1,000 of 125,000 updates; here every transfer_steps (docs/methods.md).
    forget_every: int = option(0, "re-draw step 1's token embeddings every K updates (never in the last K); "
                               "0: K = transfer_steps, the updates a new language's embeddings get in step 2", low=0)


METHOD = Forgetting("forgetting", (SYSTEM,), description="active forgetting in step 1, then MONOTRANS (Chen et al. 2023)", order=5,
                    options=ForgettingOptions)
