"""``mono-l2``: a BERT pre-trained on one L2's corpus alone (MONOTRANS's step 1 in the L2).

It is the reference the analyses need: Artetxe et al. (App. D) probe transferred models next
to models trained on the language directly, and with the L1 model (``s1_pretrain``) it is Wu et
al.'s pair of independently trained monolingual models, aligned post hoc on the Alignment page.
It has no zero-shot QA model (it never saw L1 QA data, and the world has no L2 QA training
set): it yields encoders only.
"""

from __future__ import annotations

from xlviz.methods.base import Context, Method, Stage
from xlviz.methods.common import WORLD, load_mlm, pretrain_stage


class MonoL2(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        return [WORLD, pretrain_stage()] + [pretrain_stage(l2) for l2 in ctx.world.l2s]

    def describe(self, system: str) -> str:
        return "a BERT pre-trained on each L2 alone (reference for probing; Wu et al.'s independent pair)"

    def encoder(self, ctx: Context, system: str, lang: str):
        stage = "s1_pretrain" if lang == ctx.world.l1 else f"s1_pretrain-{lang}"
        return load_mlm(ctx, stage), ctx.tokenizer(lang)


METHOD = MonoL2("mono-l2", ("mono-l2",), description="monolingual L2 models (reference)", order=30)
