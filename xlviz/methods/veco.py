"""VECO (Luo et al. 2021): an encoder pre-trained with a plug-and-play cross-attention module
(:mod:`xlviz.models.veco`) on monolingual text and the world's parallel training corpus
(CA-MLM + TLM, :mod:`xlviz.training.veco`), fine-tuned two ways (§3.1):

- ``veco``: plug-out fine-tuning. The cross-attention is removed, the plain encoder is
  fine-tuned on L1 QA and tested zero-shot on every L2; exported as a plain BERT.
- ``veco-plugin``: plug-in fine-tuning, translate-train with bilingual inputs: each L2
  training window is read with its L1 version (and each L1 window with its L2 version, both
  labelled: the paper's plug-in predicts the labels of x and y), the span head over
  [h ; s]; at test time the L2 context is read with its gold L1 version. Uses L2 labels and
  the test set's translation: setting ``translate-test``, a table of its own (never beside
  zero-shot or translate-train rows). Exported as the registered ``xlviz_veco`` type.
- ``veco-plugin-out``: the same plug-in fine-tuned model with the cross-attention unplugged
  at test time (:func:`xlviz.models.veco.plug_out_qa`): it reads the L2 test context alone,
  so it is the translate-train row comparable with ``mono-l2-supervised`` and
  ``ppa-codeswitch`` (it still trained on L2 labels: not zero-shot). Exported as a plain BERT.

Like ``jointpair-disjoint``, one model per L2 on L1 + that L2, each language its own
vocabulary side by side (:class:`xlviz.methods.joint.Reader`), so the two are compared at
the same model size, vocabulary, batch tokens and number of steps. Deviations, and why:

- A VECO step runs two streams (and TLM on parallel steps), so it costs more than an MLM step
  at the same step count (bench/bench_veco.py); the budget is kept in steps, as for the
  other systems.
- ``veco_init: jointpair-disjoint`` starts from that system's pre-trained pair model, as the
  paper starts from XLM-R: the cross-attention alone for ``veco_ca_steps``, then everything
  for ``pretrain_steps`` (continued pre-training: more steps than the scratch model).
- Plug-in fine-tuning batches hold ``batch_size`` windows, half each direction.
- The QA model for L1 (``veco``'s English row) is the first pair's, as for the pair models.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AutoTokenizer, BertForQuestionAnswering

from xlviz.io import atomic_dir
from xlviz.methods.base import Context, Method, Stage, unit_stages
from xlviz.methods.common import data_stage, finetune_qa, max_length, on_corpus, run_l1, run_l2s
from xlviz.methods.joint import Reader, block_batches, language_groups
from xlviz.methods.joint import pretrain_stage as joint_pretrain_stage
from xlviz.methods.options import MethodOptions, option
from xlviz.models.monotrans import bert_config, qa_from_mlm, zero_shot_model
from xlviz.models.veco import (CROSS, VecoForMaskedLM, VecoForQuestionAnswering, plug_in, plug_out, plug_out_qa, plugin_qa,
                               veco_config)
from xlviz.models.vocab_slice import slice_to_language
from xlviz.training.loop import train
from xlviz.training.masking import masking
from xlviz.training.qa_loss import QALoss
from xlviz.training.veco import PairedQA, VecoPretraining, paired_qa_features, pretrain_batches, trim

PLUGIN = "veco-plugin"
PLUGIN_OUT = "veco-plugin-out"  # plug-in fine-tuning, cross-attention unplugged at test time
PAIR = "jointpair-disjoint"  # how VECO reads its languages (and the model veco_init may start from)


@dataclass
class VecoOptions(MethodOptions):
    veco_init: str = option("scratch", "scratch: pre-train the cross-attention model on the world from scratch; "
                            "jointpair-disjoint: start from that system's pair model (as the paper starts from XLM-R), the new "
                            "cross-attention trained alone for veco_ca_steps, then everything for pretrain_steps",
                            choices=("scratch", PAIR))
    veco_ca_steps: int = option(200, "steps of the cross-attention trained alone (veco_init jointpair-disjoint)", low=1)


@dataclass(frozen=True)
class VecoVariant:
    """One VECO system: plug-in fine-tuning on translate-train (else plug-out on L1), and
    whether the test reads each L2 context with its gold L1 translation (plugged in) or alone."""

    plugin: bool
    plugged_test: bool
    description: str


VARIANTS: dict[str, VecoVariant] = {
    "veco": VecoVariant(plugin=False, plugged_test=False,
                        description="VECO (cross-attention MLM + TLM on parallel pairs), plug-out fine-tuning on L1, zero-shot"),
    PLUGIN: VecoVariant(plugin=True, plugged_test=True,
                        description="VECO, plug-in fine-tuning on translate-train, tested translate-test: each L2 test context read "
                                    "with its gold L1 translation (uses L2 labels and the test translation)"),
    PLUGIN_OUT: VecoVariant(plugin=True, plugged_test=False,
                            description="VECO, plug-in fine-tuning on translate-train, cross-attention unplugged at test time: "
                                        "reads the L2 test context alone (uses L2 labels)"),
}
SYSTEMS = tuple(VARIANTS)


def s1_name(ctx: Context, l2: str) -> str:
    return f"s1_veco-{l2}" if ctx.cfg.veco_init == "scratch" else f"s1_veco-from-{PAIR}-{l2}"


def ca_name(l2: str) -> str:
    return f"s1_veco-ca-from-{PAIR}-{l2}"


def load_veco(ctx: Context, stage: str, lang: str = "joint") -> VecoForMaskedLM:
    return VecoForMaskedLM.from_pretrained(ctx.path(stage, lang), use_safetensors=True)


# --------------------------------------------------------------------------- pre-training
def pretrain(ctx: Context, model: VecoForMaskedLM, l2: str, stage: str, steps: int, lr: float) -> VecoForMaskedLM:
    """CA-MLM on adjacent monolingual segments and TLM + CA-MLM on parallel pairs, in turn."""
    cfg = ctx.cfg
    reader = Reader(ctx, PAIR, l2)
    rank, n = ctx.acc.process_index, ctx.acc.num_processes
    pair_batch = max(1, cfg.mlm_batch_size // 2)
    mono = (ids for _, ids in block_batches(ctx, reader, 2 * cfg.block_size - 2, pair_batch))
    l1 = run_l1(ctx)
    data = ctx.parallel_train("veco", l2)[rank::n]
    src = reader.toks[l1]([p["src"] for p in data])["input_ids"]
    tgt = reader.toks[l2]([p["tgt"] for p in data])["input_ids"]
    pairs = [(reader.to_joint(l1, a), reader.to_joint(l2, b)) for a, b in zip(src, tgt)]
    tok = reader.toks[l1]
    batches = pretrain_batches(mono, pairs, pair_batch, mask_id=tok.mask_token_id,
                               vocab_size=reader.size, seed=cfg.seed * 31 + rank, **masking(cfg))
    loop, on_log = ctx.loop(stage, steps, lr, pretraining="joint")
    if loop.monitor is not None:  # judged per language, as the pair models are
        loop.monitor.id_groups = language_groups(reader, ctx)
    model = train(VecoPretraining(model), batches, loop, ctx.acc, on_log=on_log, desc=stage).model
    ctx.acc.free_memory()
    return model


def save_veco(ctx: Context, model: VecoForMaskedLM, l2: str, stage: str) -> None:
    """The joint VECO model and one VECO slice per language with its tokenizer."""
    if not ctx.main:
        return
    with atomic_dir(ctx.path(stage)) as tmp:
        Reader(ctx, PAIR, l2).save(model, tmp)


def ca_stage(l2: str) -> Stage:
    """From jointpair-disjoint's pair model: the new cross-attention trained alone."""
    name = ca_name(l2)

    def build(ctx: Context):
        from transformers import BertForMaskedLM

        model = plug_in(BertForMaskedLM.from_pretrained(ctx.path(f"s1_{PAIR}-{l2}", "joint"), use_safetensors=True), seed=ctx.cfg.seed)
        for n, p in model.named_parameters():
            p.requires_grad_(CROSS in n)
        return model

    def run_train(ctx: Context, model) -> None:
        model = pretrain(ctx, model, l2, name, ctx.cfg.veco_ca_steps, ctx.cfg.pretrain_lr)
        model.requires_grad_(True)
        save_veco(ctx, model, l2, name)

    return Stage(name, "pretrain", build=build, train=run_train, trains=(rf".*\.{CROSS}\..*",),
                 note=f"the cross-attention alone (rest of {PAIR} frozen): CA-MLM + TLM on en + {l2}", needs=(f"s1_{PAIR}-{l2}",))


def pretrain_stage(ctx: Context, l2: str) -> Stage:
    name = s1_name(ctx, l2)

    def build(ctx: Context) -> VecoForMaskedLM:
        if ctx.cfg.veco_init == "scratch":
            reader = Reader(ctx, PAIR, l2)
            return VecoForMaskedLM(veco_config(bert_config(reader.size, ctx.cfg.model_size, max_position_embeddings=max_length(ctx))))
        return load_veco(ctx, ca_name(l2))

    def run_train(ctx: Context, model) -> None:
        model = pretrain(ctx, model, l2, name, ctx.cfg.pretrain_steps, ctx.cfg.pretrain_lr)
        save_veco(ctx, model, l2, name)

    start = "from scratch" if ctx.cfg.veco_init == "scratch" else f"from {PAIR} after the cross-attention alone"
    return Stage(name, "pretrain", build=build, train=run_train, trains=(r".*",),
                 note=f"every parameter {start}: CA-MLM on monolingual segments, TLM + CA-MLM on en-{l2} pairs",
                 needs=() if ctx.cfg.veco_init == "scratch" else (ca_name(l2),))


# --------------------------------------------------------------------------- fine-tuning
def plugout_stage(ctx: Context, l2: str) -> Stage:
    """Plug-out: the cross-attention removed, QA on L1 (the L1 slice), every parameter."""
    name, s1 = f"s3_veco-{l2}", s1_name(ctx, l2)
    if ctx.cfg.veco_init != "scratch":
        name = f"s3_veco-from-{PAIR}-{l2}"

    def build(ctx: Context):
        return qa_from_mlm(plug_out(load_veco(ctx, s1, ctx.data.l1)), seed=ctx.cfg.seed + 3)

    def run_train(ctx: Context, model) -> None:
        tok = AutoTokenizer.from_pretrained(ctx.path(s1, ctx.data.l1))
        ctx.save(finetune_qa(ctx, model, name, tokenizer=tok), ctx.path(name), tok)

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",), note="plug-out: QA on L1, every parameter")


def plugin_batches(ctx: Context, l2: str):
    """Translate-train batches of bilingual windows, half L2 (read with L1), half L1 (read
    with L2), shuffled epoch after epoch (this process's share)."""
    cfg, l1 = ctx.cfg, ctx.data.l1
    reader = Reader(ctx, PAIR, l2)
    l2_data, l1_data = ctx.translate_train(PLUGIN, l2), ctx.data.qa("train")
    args = (reader.vocab, cfg.qa_max_length, cfg.doc_stride)
    sides = [paired_qa_features(l2_data, l1_data, reader.toks[l2], reader.toks[l1], args[0], l2, l1, *args[1:]),
             paired_qa_features(l1_data, l2_data, reader.toks[l1], reader.toks[l2], args[0], l1, l2, *args[1:])]
    half = max(1, cfg.batch_size // 2)
    rank, n = ctx.acc.process_index, ctx.acc.num_processes
    gen = torch.Generator().manual_seed(cfg.seed + 5)
    orders = [[], []]
    while True:
        parts = []
        for k, feats in enumerate(sides):
            if len(orders[k]) < half:
                orders[k] += torch.randperm(len(feats["input_ids"]), generator=gen)[rank::n].tolist()
            idx, orders[k] = orders[k][:half], orders[k][half:]
            parts.append({key: v[idx] for key, v in feats.items()})
        yield trim({key: torch.cat([p[key] for p in parts]) for key in parts[0]})


def plugin_stage(ctx: Context, l2: str) -> Stage:
    """Plug-in: translate-train with bilingual inputs, span head over [h ; s], every parameter."""
    s1 = s1_name(ctx, l2)
    name = f"s3_{PLUGIN}-{l2}" if ctx.cfg.veco_init == "scratch" else f"s3_{PLUGIN}-from-{PAIR}-{l2}"

    def build(ctx: Context) -> VecoForQuestionAnswering:
        return plugin_qa(load_veco(ctx, s1), seed=ctx.cfg.seed + 3)

    def run_train(ctx: Context, model) -> None:
        loop, on_log = ctx.loop(name, ctx.cfg.finetune_steps, ctx.cfg.finetune_lr)
        model = train(QALoss(model), plugin_batches(ctx, l2), loop, ctx.acc, on_log=on_log, desc=name).model
        ctx.acc.free_memory()
        ctx.save(model, ctx.path(name))

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",),
                 note=f"plug-in: QA on {l2} read with en and en read with {l2} (translate-train), every parameter")


# --------------------------------------------------------------------------- the method
class Veco(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [data_stage(ctx)]
        for l2 in run_l2s(ctx):
            if ctx.cfg.veco_init != "scratch":
                out += [joint_pretrain_stage(PAIR, l2), ca_stage(l2)]
            out.append(pretrain_stage(ctx, l2))
            if not on_corpus(ctx):  # a corpus source: scored by its tasks (retrieval), no QA fine-tuning
                out.append(plugin_stage(ctx, l2) if VARIANTS[system].plugin else plugout_stage(ctx, l2))
        return out

    def runs_on(self, system: str) -> tuple[str, ...]:
        # the zero-shot system pre-trains on two corpora and parallel training pairs, which a
        # corpus source can offer; the plug-in systems read translated QA training data
        return ("world", "corpus") if not VARIANTS[system].plugin else ("world",)

    def describe(self, system: str) -> str:
        return VARIANTS[system].description

    def uses(self, system: str, cfg=None) -> dict:
        pairs = cfg.world.parallel_train_pairs if cfg is not None else 0
        # plug-in fine-tuning (both plug-in systems) reads the translate-train set; only the
        # plugged-in test reads the gold L1 translation of each test context
        v = VARIANTS[system]
        return {"parallel_pairs": pairs, "l2_labels": v.plugin, "translate_test": v.plugged_test}

    def unit_for(self, ctx: Context, lang: str) -> str:
        return lang if lang != run_l1(ctx) else run_l2s(ctx)[0]

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        """One model per L2: a row depends on the stages of the model that scores it."""
        return unit_stages(self.stages(ctx, system), self.unit_for(ctx, lang))

    def encoder(self, ctx: Context, system: str, lang: str):
        folder = ctx.path(s1_name(ctx, self.unit_for(ctx, lang)), lang)
        model = VecoForMaskedLM.from_pretrained(folder, use_safetensors=True)
        return (model if VARIANTS[system].plugged_test else plug_out(model)), AutoTokenizer.from_pretrained(folder)

    def pair_l1_encoder(self, ctx: Context, system: str, l2: str):
        folder = ctx.path(s1_name(ctx, l2), run_l1(ctx))
        model = VecoForMaskedLM.from_pretrained(folder, use_safetensors=True)
        return (model if VARIANTS[system].plugged_test else plug_out(model)), AutoTokenizer.from_pretrained(folder)

    def _plugout_qa(self, ctx: Context, l2: str):
        stage = plugout_stage(ctx, l2).name
        return BertForQuestionAnswering.from_pretrained(ctx.path(stage), use_safetensors=True)

    def _plugin_out_qa(self, ctx: Context, l2: str, lang: str):
        """``l2``'s plug-in fine-tuned model unplugged, cut to ``lang``'s vocabulary rows."""
        model = VecoForQuestionAnswering.from_pretrained(ctx.path(plugin_stage(ctx, l2).name), use_safetensors=True)
        reader = Reader(ctx, PAIR, l2)
        return slice_to_language(plug_out_qa(model), reader.vocab, lang), reader.toks[lang]

    def own_l1_model(self, ctx: Context, system: str, lang: str):
        v = VARIANTS[system]
        if v.plugged_test or lang == ctx.data.l1:
            return None
        if v.plugin:
            return self._plugin_out_qa(ctx, lang, ctx.data.l1)
        return self._plugout_qa(ctx, lang), AutoTokenizer.from_pretrained(ctx.path(s1_name(ctx, lang), ctx.data.l1))

    def qa_model(self, ctx: Context, system: str, lang: str):
        l1, v = ctx.data.l1, VARIANTS[system]
        if v.plugged_test:
            if lang == l1:
                return None  # plug-in reads an example with its translation: L2 rows only
            model = VecoForQuestionAnswering.from_pretrained(ctx.path(plugin_stage(ctx, lang).name), use_safetensors=True)
            reader = Reader(ctx, PAIR, lang)
            cfg = ctx.cfg
            # the gold L1 translation of the test set: only a translate-test system may read it
            translation = ctx.test_translation(system, lang)
            wrapped = PairedQA.build(model, ctx.data.qa("test", lang), translation, reader.toks[lang], reader.toks[l1],
                                     reader.vocab, lang, l1, cfg.qa_max_length, cfg.doc_stride)
            return wrapped, reader.toks[lang]
        if v.plugin:
            return self._plugin_out_qa(ctx, self.unit_for(ctx, lang), lang)
        unit = self.unit_for(ctx, lang)
        qa = self._plugout_qa(ctx, unit)
        folder = ctx.path(s1_name(ctx, unit), lang)
        tok = AutoTokenizer.from_pretrained(folder)
        if lang == l1:
            return qa, tok
        return zero_shot_model(qa, plug_out(VecoForMaskedLM.from_pretrained(folder, use_safetensors=True))), tok


METHOD = Veco("veco", VARIANTS.keys(), options=VecoOptions, description="VECO: cross-attention MLM on parallel text, plug-out and plug-in fine-tuning "
                                           "(Luo et al. 2021)", order=40)
