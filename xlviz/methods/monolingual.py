"""``mono-l2``: a BERT pre-trained on one L2's corpus alone (MONOTRANS's step 1 in the L2),
and ``mono-l2-supervised``: that model fine-tuned on the L2's translate-train QA set.

``mono-l2`` is the reference the analyses need: Artetxe et al. (App. D) probe transferred
models next to models trained on the language directly, and with the L1 model (``s1_pretrain``)
it is Wu et al.'s pair of independently trained monolingual models, aligned post hoc on the
Alignment page. It never saw QA labels, so it yields encoders only.

``mono-l2-supervised`` is the supervised ceiling the parallel-data methods are set against
(VECO's and PPA's translate-train columns): the L1 training set rendered in the L2 (same facts
and question ids), so it uses L2 labels (``l2_labels``) and is never a zero-shot row. Its L1
row is the L1 model fine-tuned on the L1 set (MONOTRANS's step 3 model).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import BertForQuestionAnswering

from xlviz.methods.base import Context, Method, Stage, unit_stages
from xlviz.methods.common import WORLD, finetune_qa, load_mlm, pretrain_stage
from xlviz.models.monotrans import qa_from_mlm

SUPERVISED = "mono-l2-supervised"


@dataclass(frozen=True)
class MonoVariant:
    """One monolingual-L2 system: each L2's own BERT, fine-tuned on its translate-train QA set or not."""

    supervised: bool
    description: str


VARIANTS: dict[str, MonoVariant] = {
    "mono-l2": MonoVariant(supervised=False,
                           description="a BERT pre-trained on each L2 alone (reference for probing; Wu et al.'s independent pair)"),
    SUPERVISED: MonoVariant(supervised=True,
                            description="each L2's own BERT fine-tuned on translate-train QA (supervised ceiling, uses L2 labels)"),
}


def supervised_stage(l2: str) -> Stage:
    name = f"s3_supervised-{l2}"

    def build(ctx: Context):
        return qa_from_mlm(load_mlm(ctx, f"s1_pretrain-{l2}"), ctx.cfg.seed)

    def run_train(ctx: Context, model) -> None:
        model = finetune_qa(ctx, model, name, ctx.tokenizer(l2), data=ctx.translate_train(SUPERVISED, l2))
        ctx.save(model, ctx.path(name), ctx.tokenizer(l2))

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",),
                 note=f"every parameter: QA on the {l2} translate-train set (L2 labels)")


class MonoL2(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [WORLD, pretrain_stage()] + [pretrain_stage(l2) for l2 in ctx.data.l2s]
        if VARIANTS[system].supervised:
            out += [supervised_stage(l2) for l2 in ctx.data.l2s]
        return out

    def describe(self, system: str) -> str:
        return VARIANTS[system].description

    def uses(self, system: str, cfg=None) -> dict:
        return {"parallel_pairs": 0, "l2_labels": VARIANTS[system].supervised}

    def qa_model(self, ctx: Context, system: str, lang: str):
        if not VARIANTS[system].supervised or lang == ctx.data.l1:
            return None
        return BertForQuestionAnswering.from_pretrained(ctx.path(f"s3_supervised-{lang}"), use_safetensors=True), ctx.tokenizer(lang)

    def probe_role(self, system: str) -> str:
        # trained on the L2 directly, never transferred: the reference the transferred rows face
        return "reference"

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        """An L2's row depends on that L2's own model only."""
        return unit_stages(self.stages(ctx, system), lang)

    def encoder(self, ctx: Context, system: str, lang: str):
        stage = "s1_pretrain" if lang == ctx.data.l1 else f"s1_pretrain-{lang}"
        return load_mlm(ctx, stage), ctx.tokenizer(lang)


METHOD = MonoL2("mono-l2", VARIANTS.keys(), description="monolingual L2 models (reference, supervised ceiling)", order=30)
