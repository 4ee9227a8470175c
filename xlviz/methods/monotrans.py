"""MONOTRANS (Artetxe, Ruder & Yogatama 2020, §2) and its variants on the generated world, and
MONOTRANS and its floor on a corpus source (:func:`corpus_stages`, below).

1. ``s1_pretrain``: a small BERT pre-trained with MLM on L1 (shared with other methods).
2. ``s2_transfer-<l2>[-pos][-adapters]``: the body frozen, new L2 token embeddings learned with
   MLM on the L2 corpus (and, per variant, L2 position embeddings with [CLS] carrying no
   position/segment embedding, or Houlsby adapters).
3. ``s3_finetune[-pos][-noise]``: fine-tuned for QA on L1 with the L1 token embeddings frozen
   (but the shared special rows); ``-pos`` freezes L1's positions too, ``-noise`` adds Gaussian
   noise to the embeddings.
4. zero-shot: the fine-tuned model with the L2 embeddings (and positions / adapters) swapped in.

Systems: ``monotrans``; the single variants ``monotrans+pos``, ``monotrans+noise``,
``monotrans+adapters``; the paper's cumulative Table 3 rows ``monotrans+pos+noise`` and
``monotrans+pos+noise+adapters``; ``floor`` (step 2 skipped: untrained L2 embeddings) and
``dictionary-oracle`` (step 2's embeddings with every whole-word row set to its gold
translation's L1 row: what a perfectly aligned step 2 would reach).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import BertForMaskedLM, BertForQuestionAnswering

from xlviz.data.vocabulary import special_ids_of, translation_rows
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.methods import corpus
from xlviz.methods.base import Context, Method, Stage
from xlviz.methods.common import WORLD, finetune_qa, load_mlm, new_body_config, on_corpus, pretrain_stage, run_l1, train_mlm
from xlviz.methods.corpus import VOCABULARIES, needs_mlm_head, stream_mlm
from xlviz.methods.options import MethodOptions, option
from xlviz.models.adapters import XlvizBertForMaskedLM
from xlviz.models.floor import EMBEDDING_INITS, floor_model
from xlviz.models.monotrans import (
    NOISE_RULES, NOISE_STD, add_embedding_noise, drop_cls_position_and_segment, fold_cls_position, freeze_for_step2, freeze_for_step3,
    embedding_norm, init_norm, noise_std_for, qa_from_mlm, zero_shot_model,
)
from xlviz.models.surgery import word_embeddings


@dataclass
class MonotransOptions(MethodOptions):
    """MONOTRANS's settings (its variants' and those of its stages on a corpus source, :func:`corpus_stages`)."""

    adapter_size: int = option(32, "bottleneck width of the Houlsby adapters learned in step 2 (monotrans+adapters)", low=1)
    # "scaled": sigma = noise_std x the model's word-embedding row norm at initialisation
    # (init std x sqrt(width)) / BERT-base's (0.02 x sqrt(768)): the paper's noise-to-norm ratio,
    # 0.031 for the 128-wide small model; "absolute": noise_std as is (models.monotrans.noise_std_for).
    noise_std: float = option(NOISE_STD, "noised fine-tuning's Gaussian std (Appendix A, sized for BERT-base)", low=0, low_open=True)
    noise_rule: str = option("scaled", "scaled: sigma = noise_std x the model's embedding row norm at init / BERT-base's "
                             "(the paper's noise-to-norm ratio); absolute: noise_std as is", choices=NOISE_RULES)
    dropout: float = option(0.0, "corpus sources: dropout of the BERT pre-trained on the L1 corpus", low=0, high=1, high_open=True)
    embedding_init: str = option("random", "corpus sources: step 2's new rows: random (the paper) or l1_stats (Gaussian "
                                 "with the L1 rows' mean and std)", choices=EMBEDDING_INITS)
    mlm_head_steps: int = option(300, "step 1b (only when init_model has no MLM head): training steps of the new head", low=1)
    mlm_head_lr: float = option(1e-3, "step 1b's learning rate", low=0, low_open=True)
    mlm_head_mask_row: bool = option(True, "step 1b also learns the [MASK] input row (a sentence encoder never read it)")
    mlm_head_top_layers: int = option(0, "step 1b also trains the body's last K layers (a deviation from the paper)", low=0)


@dataclass(frozen=True)
class Variant:
    """What a MONOTRANS system changes: step 2 (None: skipped), L2 positions, adapters, noise;
    whether it has stages on corpus sources too (:func:`corpus_stages`), and its one-line description."""

    step2: bool = True
    pos: bool = False
    adapters: bool = False
    noise: bool = False
    oracle: bool = False
    corpus: bool = False
    description: str = ""

    @property
    def s2_suffix(self) -> str:
        return ("-pos" if self.pos else "") + ("-adapters" if self.adapters else "")

    @property
    def s3_suffix(self) -> str:
        return ("-pos" if self.pos else "") + ("-noise" if self.noise else "")


VARIANTS: dict[str, Variant] = {
    "monotrans": Variant(corpus=True, description="MONOTRANS: L1 BERT, L2 token embeddings learned under the frozen body, QA on L1, swap"),
    "floor": Variant(step2=False, corpus=True, description="lower bound: MONOTRANS without step 2 (untrained L2 embeddings)"),
    "monotrans+pos": Variant(pos=True, description="+ language-specific position embeddings"),
    "monotrans+noise": Variant(noise=True, description="+ noised fine-tuning"),
    "monotrans+adapters": Variant(adapters=True, description="+ adapters learned in step 2"),
    "monotrans+pos+noise": Variant(pos=True, noise=True, description="+ position embeddings + noised fine-tuning (Table 3, cumulative)"),
    "monotrans+pos+noise+adapters": Variant(pos=True, noise=True, adapters=True,
                                            description="+ position embeddings + noising + adapters (Table 3, cumulative)"),
    "dictionary-oracle": Variant(oracle=True, description="upper bound on step 2: gold translations' L1 rows"),
}
# The former --variants names (config files and runs written before the method registry).
LEGACY_VARIANTS = {"base": "monotrans", "floor": "floor", "pos": "monotrans+pos", "noise": "monotrans+noise",
                   "adapters": "monotrans+adapters", "oracle": "dictionary-oracle"}


def l2_init_model(ctx: Context, l1: BertForMaskedLM, lang: str, adapter_size: int = 0) -> BertForMaskedLM:
    """Step 2's starting point for ``lang`` on the generated world, and (untrained) the floor:
    :func:`xlviz.models.floor.floor_model` with the run's seed + 1 and ``l2_init_std``."""
    return floor_model(l1, ctx.tokenizer(run_l1(ctx)), ctx.tokenizer(lang), seed=ctx.cfg.seed + 1, init_std=ctx.cfg.l2_init_std,
                       adapter_size=adapter_size)


def transfer_stage(lang: str, v: Variant) -> Stage:
    """Step 2 for one L2: freeze the body, learn L2 token embeddings (+ positions / adapters)."""
    name = f"s2_transfer-{lang}{v.s2_suffix}"

    def build(ctx: Context):
        l1 = load_mlm(ctx, "s1_pretrain")
        model = l2_init_model(ctx, l1, lang, adapter_size=ctx.cfg.adapter_size if v.adapters else 0)
        model._xlviz_hooks = drop_cls_position_and_segment(model) if v.pos else []
        freeze_for_step2(model, l2_positions=v.pos)
        return model

    def run_train(ctx: Context, model) -> None:
        hooks = model.__dict__.pop("_xlviz_hooks", [])
        model = train_mlm(ctx, model, lang, name, ctx.cfg.transfer_steps, ctx.cfg.transfer_lr)
        for h in hooks:
            h.remove()
        if v.pos:
            fold_cls_position(model)
        ctx.save(model, ctx.path(name), ctx.tokenizer(lang), language=lang, role="transferred", variant=v.s2_suffix.lstrip("-") or None)

    trains = [r"(.*\.)?word_embeddings\.weight", r"cls\.predictions\.(decoder\.)?bias"]
    trains += [r".*position_embeddings\.weight"] if v.pos else []
    trains += [r".*\.adapter\..*"] if v.adapters else []
    return Stage(name, "transfer", build=build, train=run_train, trains=tuple(trains), rows="all but special",
                 note=f"{lang} token embeddings{' and positions' if v.pos else ''}{' and adapters' if v.adapters else ''}; "
                      "body frozen")


def finetune_stage(v: Variant) -> Stage:
    """Step 3: QA on L1 with the L1 token embeddings frozen (special rows train)."""
    name = f"s3_finetune{v.s3_suffix}"

    def build(ctx: Context):
        model = qa_from_mlm(load_mlm(ctx, "s1_pretrain"), seed=ctx.cfg.seed + 3)
        hooks = drop_cls_position_and_segment(model) if v.pos else []
        if v.noise:
            sigma = noise_std_for(model, ctx.cfg.noise_std, ctx.cfg.noise_rule)
            hooks += add_embedding_noise(model, std=sigma)
            model._xlviz_noise = {"noise_rule": ctx.cfg.noise_rule, "noise_std": ctx.cfg.noise_std, "sigma": sigma,
                                  "init_norm": init_norm(model), "embedding_norm": embedding_norm(model)}
        model._xlviz_hooks = hooks
        freeze_for_step3(model, freeze_positions=v.pos)
        return model

    def run_train(ctx: Context, model) -> None:
        hooks = model.__dict__.pop("_xlviz_hooks", [])
        noise = model.__dict__.pop("_xlviz_noise", None)
        if noise is not None:
            ctx.log(f"  noised fine-tuning: sigma {noise['sigma']:.4f} ({noise['noise_rule']} rule, noise_std {noise['noise_std']}; "
                    f"embedding row norm {noise['embedding_norm']:.3f}, {noise['init_norm']:.3f} at init)")
        model = finetune_qa(ctx, model, name)
        for h in hooks:
            h.remove()
        if v.pos:
            fold_cls_position(model)
        ctx.save(model, ctx.path(name), ctx.tokenizer(ctx.data.l1), language=ctx.data.l1, role="finetuned",
                 variant=v.s3_suffix.lstrip("-") or None)
        if noise is not None and ctx.main:
            atomic_write_json(ctx.path(name, "noise.json"), noise, root=ctx.path(name))

    trains = (r"^(?!.*position_embeddings).*$",) if v.pos else (r".*",)
    return Stage(name, "finetune", build=build, train=run_train, trains=trains, rows="special",
                 note="QA on L1: everything but the L1 token embeddings (special rows train)"
                      + ("; L1 positions frozen" if v.pos else "") + ("; Gaussian noise on the embeddings" if v.noise else ""))


class Monotrans(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        if on_corpus(ctx):
            return corpus_stages(ctx, VARIANTS[system].step2)
        v = VARIANTS[system]
        out = [WORLD, pretrain_stage()]
        if v.step2:
            out += [transfer_stage(lang, v) for lang in ctx.data.l2s]
        out.append(finetune_stage(v))
        return out

    def encoder_stages(self, ctx: Context, system: str, lang: str, pair: str | None = None) -> list[str]:
        """Step 1 (and the data), and step 2 for ``lang`` alone: another L2's transfer does not
        touch this language's encoder (fine-tuning never does)."""
        if on_corpus(ctx):
            return super().encoder_stages(ctx, system, lang, pair)
        own = {transfer_stage(lang, VARIANTS[system]).name} if lang != ctx.data.l1 and VARIANTS[system].step2 else set()
        return [s.name for s in self.stages(ctx, system) if s.phase in ("data", "pretrain") or s.name in own]

    def describe(self, system: str) -> str:
        return VARIANTS[system].description

    def default_systems(self, every: bool = False, layers: int = 4) -> tuple[str, ...]:
        return self.systems if every else ("monotrans",)

    def qa_model(self, ctx: Context, system: str, lang: str):
        """Step 4: the fine-tuned model of ``system`` with ``lang``'s embeddings swapped in."""
        v = VARIANTS[system]
        qa = BertForQuestionAnswering.from_pretrained(ctx.path(f"s3_finetune{v.s3_suffix}"), use_safetensors=True)
        tok = ctx.tokenizer(lang)
        if lang == ctx.data.l1:
            return qa, tok
        l2 = self._l2_mlm(ctx, v, lang)  # zero_shot_model copies the oracle's rows from the fine-tuned L1 model
        rows = oracle_rows(ctx, lang) if v.oracle else None
        adapters = ctx.cfg.adapter_size if v.adapters else 0
        return zero_shot_model(qa, l2, l2_positions=v.pos, adapter_size=adapters, dictionary_rows=rows), tok

    def dictionary(self, system: str, cfg=None, ctx: Context | None = None, lang: str | None = None) -> dict | None:
        """The dictionary oracle reads the world's whole gold dictionary (held-out part included:
        an upper bound, not a method)."""
        if not VARIANTS[system].oracle:
            return None
        size = None
        if ctx is not None and getattr(ctx, "world", None) is not None:
            world = ctx.world
            l2 = lang if lang in world.l2s else world.l2s[0]
            size = len({(r[world.l1], r[l2]) for r in world.dictionary(l2)})
        return {"size": size, "source": "gold", "split": "all"}

    def probe_role(self, system: str) -> str:
        return "transferred" if VARIANTS[system].step2 else "floor"

    def needs(self, system: str, cfg=None) -> frozenset[str]:
        """MONOTRANS and its floor need an L1 model (pre-trained here or given) and an L2 corpus;
        QA data only to be scored on QA (without it a corpus run scores retrieval). The other
        variants change QA fine-tuning or read the dictionary, so they need those too."""
        if VARIANTS[system].corpus:
            return frozenset({"l1_model", "l2_corpus"})
        extra = {"dictionary"} if VARIANTS[system].oracle else set()
        return frozenset({"l1_model", "l2_corpus", "qa_train", "qa_test"} | extra)

    def runs_on(self, system: str) -> tuple[str, ...]:
        return ("world", "corpus") if VARIANTS[system].corpus else ("world",)

    def starts_from_l1_model(self, system: str) -> bool:
        return True  # every variant transfers (or, the floor, keeps) the L1 model's body

    def corpus_qa(self, system: str) -> bool:
        return VARIANTS[system].corpus

    def seeds_by_place(self, system: str) -> bool:
        return True

    def encoder(self, ctx: Context, system: str, lang: str):
        """The masked LM reading ``lang``: step 1's model for L1, step 2's (or the floor's
        untrained) L2 embeddings under the same body for an L2; the oracle's with its gold
        translations' L1 rows (step 1's), as its QA model reads."""
        if on_corpus(ctx):  # step 1's model (or init_model) and step 2's, as the corpus stages wrote them
            l1, l1_tok = corpus.load_l1(ctx)
            return (l1, l1_tok) if lang == ctx.data.l1 else l2_model(ctx, VARIANTS[system].step2, l1, l1_tok)
        v = VARIANTS[system]
        tok = ctx.tokenizer(lang)
        if lang == ctx.data.l1:
            return load_mlm(ctx, "s1_pretrain"), tok
        model = self._l2_mlm(ctx, v, lang)
        if v.oracle:
            l1, l2 = word_embeddings(load_mlm(ctx, "s1_pretrain")).weight, word_embeddings(model).weight
            with torch.no_grad():
                for l2_id, l1_id in oracle_rows(ctx, lang).items():
                    l2[l2_id] = l1[l1_id]
        return model, tok

    @staticmethod
    def _l2_mlm(ctx: Context, v: Variant, lang: str):
        """Step 2's masked LM for ``lang`` (the floor: the untrained L2 embeddings under step 1's body)."""
        if not v.step2:
            return l2_init_model(ctx, load_mlm(ctx, "s1_pretrain"), lang)
        cls = XlvizBertForMaskedLM if v.adapters else BertForMaskedLM
        return cls.from_pretrained(ctx.path(f"s2_transfer-{lang}{v.s2_suffix}"), use_safetensors=True)


def oracle_rows(ctx: Context, lang: str) -> dict[int, int]:
    """``{lang id: L1 id}`` of the dictionary oracle: gold translations that are whole tokens in
    both vocabularies, and the sentence punctuation."""
    pairs = [(r[ctx.data.l1], r[lang]) for r in ctx.data.dictionary(lang)] + [(p, p) for p in ".?"]
    return translation_rows(pairs, ctx.tokenizer(ctx.data.l1), ctx.tokenizer(lang))


# --- MONOTRANS and its floor on a corpus source -------------------------------------------
# Text files streamed line by line (xlviz.methods.corpus) instead of the generated world:
# - ``world``: the vocabularies and parallel pairs every method's run there starts from
#   (:data:`xlviz.methods.corpus.VOCABULARIES`).
# - ``s1_pretrain``: masked-LM pre-training of a small BERT on the L1 corpus; with ``init_model``
#   nothing: step 1 *is* that model.
# - ``s1b_mlm_head`` (only when ``init_model`` has no masked-LM head, e.g. all-MiniLM-L6-v2): an
#   MLM head and the ``[MASK]`` row learned on the L1 corpus, body frozen, output layer tied
#   (:mod:`xlviz.models.mlm_head`), saved as the run's ``s1_pretrain/``.
# - ``s2_transfer-<l2>``: the L1 body frozen, new L2 token embeddings learned with MLM on the L2
#   corpus (never on parallel text). ``floor`` skips it: the same body with untrained L2 rows.
# - ``s3_finetune`` (with QA data): QA fine-tuning on L1 with the L1 token embeddings frozen;
#   the run provides it (``ctx.finetune_corpus_qa``: QA training lives above this layer).


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


def corpus_pretrain(ctx: Context) -> None:
    """Step 1: MLM pre-training of a small BERT on the L1 corpus (nothing with init_model)."""
    cfg = ctx.cfg
    if cfg.init_model:
        ctx.log(f"  step 1 taken from {cfg.init_model}")
        return
    tok = ctx.tokenizer(ctx.data.l1)
    model = BertForMaskedLM(new_body_config(ctx, len(tok)))  # the same body as every system's pre-trained here
    model = stream_mlm(ctx, model, tok, ctx.data.l1, "s1_pretrain", cfg.pretrain_steps, cfg.pretrain_lr, pretraining=True)
    ctx.save(model, ctx.path("s1_pretrain"), tok, language=ctx.data.l1, role="pretrained")


def corpus_mlm_head(ctx: Context) -> None:
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


def corpus_transfer(ctx: Context) -> None:
    """Step 2: freeze the L1 body, learn L2 token embeddings with MLM on the L2 corpus."""
    lang = ctx.data.l2
    l1, l1_tok = corpus.load_l1(ctx)
    l2_tok = ctx.tokenizer(lang)
    model = new_l2_model(ctx, l1, l1_tok, l2_tok)
    del l1
    trainable = freeze_for_step2(model, special_ids=special_ids_of(l2_tok))
    ctx.log(f"  training {', '.join(trainable)}")
    stage = f"s2_transfer-{lang}"
    model = stream_mlm(ctx, model, l2_tok, lang, stage, ctx.cfg.transfer_steps, ctx.cfg.transfer_lr)
    ctx.save(model, ctx.path(stage), l2_tok, language=lang, role="transferred")


def corpus_stages(ctx: Context, step2: bool) -> list[Stage]:
    """MONOTRANS (``monotrans``) or, without ``step2``, its floor (``floor``) on a corpus source."""
    out = [VOCABULARIES, Stage("s1_pretrain", "pretrain", run=corpus_pretrain)]
    if needs_mlm_head(ctx.cfg):
        out.append(Stage("s1b_mlm_head", "pretrain", run=corpus_mlm_head, needs=("s1_pretrain",)))
    if step2:
        out.append(Stage(f"s2_transfer-{ctx.data.l2}", "transfer", run=corpus_transfer))
    if "qa_train" in ctx.offers:
        out.append(Stage("s3_finetune", "finetune", run=lambda c: c.finetune_corpus_qa()))
    return out


METHOD = Monotrans("monotrans", VARIANTS.keys(), description="MONOTRANS and its variants (Artetxe et al. 2020)", order=0,
                   options=MonotransOptions)
