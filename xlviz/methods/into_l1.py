"""``monotrans-into-l1``: MONOTRANS run the other way round, for probing (Artetxe et al. 2020,
App. D, Table 4: "xx→en").

The paper probes models transferred *into English*: a BERT pre-trained on language xx, whose
step 2 learns English token embeddings under the frozen xx body; the probes (agreement, WiC,
similarity) then run on English data, beside the English monolingual model. In the world this
is, for each L2:

1. ``s1_pretrain-<l2>``: a BERT pre-trained on the L2 alone (the stage ``mono-l2`` trains).
2. ``s2_into_l1-<l2>``: its body frozen, new L1 token embeddings learned with MLM on the L1
   corpus (MONOTRANS's step 2 with the languages swapped: same initialisation rule, budget and
   learning rate as ``s2_transfer-<l2>``).

Why English-side probes: in the generated world a homonym's two senses are two different L2
words, so on the L2 side word-in-context and similarity only test whether two words are
identical; in L1 one word carries both senses and the probe tests the context. The system has
no QA model (it never sees QA labels): it yields encoders for the analyses.
"""

from __future__ import annotations

from transformers import BertForMaskedLM

from xlviz.methods.base import Context, Method, Stage, unit_stages
from xlviz.methods.common import WORLD, load_mlm, pretrain_stage, train_mlm
from xlviz.models.floor import floor_model
from xlviz.models.monotrans import freeze_for_step2

SYSTEM = "monotrans-into-l1"


def into_l1_stage(l2: str) -> Stage:
    """Step 2 into L1 for the body pre-trained on ``l2``: only the L1 token embeddings (not the
    special rows, which stay the L2 model's) and the MLM output bias train."""
    name = f"s2_into_l1-{l2}"

    def build(ctx: Context):
        body = load_mlm(ctx, f"s1_pretrain-{l2}")
        # step 2's starting point with the languages' roles swapped: the L2 body, new L1 rows
        model = floor_model(body, ctx.tokenizer(l2), ctx.tokenizer(ctx.data.l1), seed=ctx.cfg.seed + 1, init_std=ctx.cfg.l2_init_std)
        freeze_for_step2(model)
        return model

    def run_train(ctx: Context, model) -> None:
        l1 = ctx.data.l1
        model = train_mlm(ctx, model, l1, name, ctx.cfg.transfer_steps, ctx.cfg.transfer_lr)
        ctx.save(model, ctx.path(name), ctx.tokenizer(l1))

    return Stage(name, "transfer", build=build, train=run_train,
                 trains=(r"(.*\.)?word_embeddings\.weight", r"cls\.predictions\.(decoder\.)?bias"), rows="all but special",
                 note=f"L1 token embeddings under the frozen body pre-trained on {l2} (xx→en)")


class IntoL1(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [WORLD, pretrain_stage()]  # the L1 model: the reference the xx→en rows are probed beside
        for l2 in ctx.data.l2s:
            out += [pretrain_stage(l2), into_l1_stage(l2)]
        return out

    def describe(self, system: str) -> str:
        return "an L2's BERT with L1 embeddings learned under its frozen body, probed on L1 data (xx→en, App. D)"

    def uses(self, system: str, cfg=None) -> dict:
        return {"parallel_pairs": 0, "l2_labels": False}

    def probe_role(self, system: str) -> str:
        return "transferred"

    def probe_side(self, system: str) -> str:
        # the transferred model reads L1: its probes run on L1 data (its L2 side is mono-l2's model)
        return "l1"

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        return unit_stages(self.stages(ctx, system), lang)

    def encoder_stages(self, ctx: Context, system: str, lang: str, pair: str | None = None) -> list[str]:
        """L1 (a pair's, else the first L2's): that L2's body and the L1 embeddings learned under
        it; an L2: its own body alone."""
        stages = self.stages(ctx, system)
        if lang == ctx.data.l1:
            return unit_stages(stages, pair or ctx.data.l2s[0])
        return [s for s in unit_stages(stages, lang) if s != into_l1_stage(lang).name]

    def encoder(self, ctx: Context, system: str, lang: str):
        """L1: the first L2's body with learned L1 embeddings; an L2: its own BERT, the same body
        with the embeddings it was pre-trained with (so an alignment pair is one body's two
        embedding sets, as MONOTRANS's is)."""
        l1 = ctx.data.l1
        if lang == l1:
            return self.pair_l1_encoder(ctx, system, ctx.data.l2s[0])
        return load_mlm(ctx, f"s1_pretrain-{lang}"), ctx.tokenizer(lang)

    def pair_l1_encoder(self, ctx: Context, system: str, l2: str):
        return BertForMaskedLM.from_pretrained(ctx.path(f"s2_into_l1-{l2}"), use_safetensors=True), ctx.tokenizer(ctx.data.l1)


METHOD = IntoL1(SYSTEM, (SYSTEM,), description="MONOTRANS into L1 (xx→en probing, Artetxe et al. App. D)", order=31)
