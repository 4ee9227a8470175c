"""PPA: post-pretraining alignment of a multilingual encoder with parallel text (Pan et al.
2021), then QA fine-tuning.

- ``ppa``: the starting model (``ppa_base``: one of xlviz's joint systems, by default
  ``jointpair-disjoint``, or the folder of a Hugging Face multilingual masked LM) is aligned on
  the world's parallel training corpus with MoCo on [CLS] + TLM on the concatenated pair
  (:mod:`xlviz.training.ppa`), then fine-tuned for QA on L1 and tested zero-shot on every L2,
  exactly as its starting system is (disjoint vocabularies: the L1 slice fine-tunes, each L2's
  aligned rows are swapped in).
- ``ppa-codeswitch``: the same aligned model fine-tuned translate-train with sentence-level
  code-switching: the L1 training set plus, for every L2 example, (L2 question, L1 context)
  and (L1 question, L2 context), side by side in a batch (§2.3; :mod:`xlviz.data.codeswitch`).
  It reads L2 QA labels (``l2_labels``), so it is never a zero-shot row.

Pair bases (``jointpair-*``) give one aligned model per L2 on that L2's pairs; ``jointmulti``
and a model folder give one model aligned on every L2's pairs. Stages: the base's own
(shared with the base system in the same run), ``s2_ppa<u>`` (alignment), ``s3_ppa<u>`` and
``s3_ppa-codeswitch<u>`` (QA), ``<u>`` = ``-<l2>`` for a pair model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForQuestionAnswering, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from xlviz.data.codeswitch import codeswitch_examples, feature_tensors, mixed_train_features, monolingual_examples
from xlviz.data.world import WorldConfig
from xlviz.errors import XlvizError
from xlviz.io import atomic_dir
from xlviz.methods import joint
from xlviz.methods.base import Context, Method, Stage, on_corpus_config, unit_stages
from xlviz.methods.common import data_stage, max_length, on_corpus, run_l1, run_l2s, run_languages
from xlviz.methods.options import MethodOptions, option
from xlviz.models import register_model_types
from xlviz.models.monotrans import qa_from_mlm, zero_shot_model
from xlviz.models.vocab_slice import slice_to_language
from xlviz.training.loop import train
from xlviz.training.masking import masking
from xlviz.training.ppa import OBJECTIVES, PPALoss, PPAModel, Specials, pair_batches, parse_objective
from xlviz.training.qa import trim_padding
from xlviz.training.qa_loss import QALoss

# ppa_base may be any model folder, xlviz's adapter and VECO models too, and the stages here load
# it and what they save from it through the Auto classes: its model type must resolve
register_model_types()

ZERO_SHOT, CODESWITCH = "ppa", "ppa-codeswitch"
JOINT_BASES = joint.VARIANTS.keys()
PAIR_LIMIT = 128  # the paper's longest concatenated pair (WordPiece tokens)


@dataclass
class PpaOptions(MethodOptions):
    """PPA's settings, scaled to the world's budget (docs/methods.md, "PPA measured"): with the
    paper's ratios (300 steps, lr 5e-4, momentum 0.999) top-layer retrieval on en-sov reached
    2.5%; 1,000 steps at lr 1e-3 reached 36.5% at momentum 0.999 and 89.5% at 0.99 (2,000
    steps: 89.8%). ppa_base is never loaded with remote code."""

    ppa_base: str = option("jointpair-disjoint", "the model PPA aligns: a joint system (jointpair-disjoint, jointpair-joint, "
                           "jointmulti, jointmulti-large) or the folder of a Hugging Face multilingual masked LM")
    ppa_objective: str = option("moco+tlm", "Table 5's ablations: moco+tlm, moco, tlm, moco+mlm (TLM replaced by MLM)",
                                choices=OBJECTIVES)
    ppa_pairs: int = option(0, "parallel training pairs per L2", low=1, zero="all of the world's, world.parallel_train_pairs")
    ppa_steps: int = option(1000, "alignment steps", low=1)
    ppa_lr: float = option(1e-3, "alignment learning rate", low=0, low_open=True)
    ppa_batch_size: int = option(128, "pairs per step and process (the paper's 128)", low=1)
    # The paper's 32k for 250k-2M pairs is ~13% of its smallest corpus; 512 is a quarter of
    # the world's 2,000 pairs, 4 batches: a pair's own earlier key is rarely a false negative.
    ppa_queue_size: int = option(512, "negatives in the MoCo queue (smaller than the pairs per L2)", low=1)
    # 0.999 gives the key encoder a time constant of 1,000 steps, a small part of the paper's
    # ~20k-step runs; 0.99 keeps the paper's ratio (a tenth of the run).
    ppa_momentum: float = option(0.99, "momentum of the MoCo key encoder", low=0, high=1, high_open=True)
    ppa_temperature: float = option(0.05, "temperature of the contrastive loss", low=0, low_open=True)
    ppa_projection_dim: int = option(128, "d_k of the projection head (the paper: 300 for mBERT's 768)", low=1)

    def check_run(self, cfg) -> None:
        if not on_corpus_config(cfg) and self.ppa_pairs > cfg.world.parallel_train_pairs:
            raise XlvizError(f"the world has {cfg.world.parallel_train_pairs} parallel training pairs per L2 "
                             f"(world.parallel_train_pairs), got {self.ppa_pairs}", field="ppa_pairs")


@dataclass(frozen=True)
class PpaVariant:
    """One PPA system: fine-tuned on L1 QA (zero-shot), or translate-train with sentence-level code-switching."""

    codeswitch: bool
    description: str


VARIANTS: dict[str, PpaVariant] = {
    ZERO_SHOT: PpaVariant(codeswitch=False,
                          description="post-pretraining alignment (MoCo + TLM on parallel pairs) of ppa_base, QA on L1, zero-shot"),
    CODESWITCH: PpaVariant(codeswitch=True,
                           description="PPA-aligned model fine-tuned translate-train with sentence-level code-switching (uses L2 labels)"),
}


# --------------------------------------------------------------------------- the base model
def check_base_folder(path: str) -> None:
    """A Hugging Face masked-LM folder that loads without remote code and from safetensors."""
    folder = Path(path)
    if not folder.is_dir():
        raise XlvizError(f"not one of {list(JOINT_BASES)} and not a model folder", path=path, field="ppa_base")
    if not (folder / "config.json").is_file():
        raise XlvizError("no config.json: not a Hugging Face model folder", path=path, field="ppa_base")
    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        raise XlvizError(f"config.json does not load without remote code: {str(e).splitlines()[0]}", path=path, field="ppa_base") from None
    if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise XlvizError(f"model type {config.model_type!r} has no masked-LM class in transformers (TLM needs one)", path=path, field="ppa_base")
    if not list(folder.glob("*.safetensors")):
        raise XlvizError("no .safetensors weights (xlviz never loads pickled weights)", path=path, field="ppa_base")
    try:
        tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except (ValueError, OSError, KeyError) as e:
        raise XlvizError(f"its tokenizer does not load: {str(e).splitlines()[0]}", path=path, field="ppa_base") from None
    missing = [t for t in ("cls_token_id", "sep_token_id", "pad_token_id", "mask_token_id") if getattr(tok, t) is None]
    if missing or not getattr(tok, "is_fast", False):
        raise XlvizError(f"its tokenizer must be a fast tokenizer with [CLS], [SEP], [PAD] and [MASK] tokens (missing: {missing})",
                         path=path, field="ppa_base")


class FolderReader:
    """A Hugging Face model's shared tokenizer, with :class:`xlviz.methods.joint.Reader`'s interface."""

    def __init__(self, ctx: Context, path: str):
        self.langs = run_languages(ctx)
        self.disjoint = False
        self.vocab = None
        shared = AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
        self.toks = {lang: shared for lang in self.langs}
        self.size = AutoConfig.from_pretrained(path, trust_remote_code=False, local_files_only=True).vocab_size

    def to_joint(self, lang: str, ids: list[int]) -> list[int]:
        return ids


def is_pair(cfg) -> bool:
    return cfg.ppa_base in ("jointpair-disjoint", "jointpair-joint")


def units(ctx: Context) -> list[str | None]:
    return run_l2s(ctx) if is_pair(ctx.cfg) else [None]


def suffix(l2: str | None) -> str:
    return "" if l2 is None else f"-{l2}"


def reader(ctx: Context, l2: str | None):
    base = ctx.cfg.ppa_base
    return joint.Reader(ctx, base, l2) if base in JOINT_BASES else FolderReader(ctx, base)


def base_stages(ctx: Context, l2: str | None) -> list[Stage]:
    base = ctx.cfg.ppa_base
    if base not in JOINT_BASES:
        return []
    out = [] if base == "jointpair-disjoint" else [joint.vocab_stage(base, l2)]
    return out + [joint.pretrain_stage(base, l2)]


def load_base(ctx: Context, l2: str | None):
    base = ctx.cfg.ppa_base
    if base in JOINT_BASES:
        return AutoModelForMaskedLM.from_pretrained(ctx.path(f"s1_{base}{joint.unit(base, l2)}", "joint"), use_safetensors=True)
    # a folder from outside the run: the one loading path, which refuses weights the config has
    # no place for, shards outside the folder and a missing MLM head (xlviz.models.loading)
    from xlviz.models.loading import load_model

    return load_model(base, task="mlm", attn_implementation="sdpa", new_head="error")[0]


def unit_l2s(ctx: Context, l2: str | None) -> list[str]:
    return [l2] if l2 is not None else run_l2s(ctx)


# --------------------------------------------------------------------------- alignment
def pair_ids(ctx: Context, rd, l2s: list[str], limit: int) -> list[tuple[list[int], list[int]]]:
    """The parallel training corpus of ``l2s`` as (L1 ids, L2 ids) in the model's id space,
    each side cut so that ``[CLS] A [SEP] B [SEP]`` fits ``limit`` tokens."""
    l1, side = run_l1(ctx), (limit - 3) // 2
    out = []
    for l2 in l2s:
        pairs = ctx.parallel_train(ZERO_SHOT, l2)
        a = rd.toks[l1]([p["src"] for p in pairs], add_special_tokens=False)["input_ids"]
        b = rd.toks[l2]([p["tgt"] for p in pairs], add_special_tokens=False)["input_ids"]
        out += [(rd.to_joint(l1, x[:side]), rd.to_joint(l2, y[:side])) for x, y in zip(a, b)]
    return out


def align_stage(l2: str | None, objective: str) -> Stage:
    name = f"s2_ppa{suffix(l2)}"

    def build(ctx: Context) -> PPAModel:
        cfg = ctx.cfg
        return PPAModel(load_base(ctx, l2), cfg.ppa_objective, dim=cfg.ppa_projection_dim, queue_size=cfg.ppa_queue_size,
                        momentum=cfg.ppa_momentum, temperature=cfg.ppa_temperature, seed=cfg.seed)

    def run_train(ctx: Context, model: PPAModel) -> None:
        cfg = ctx.cfg
        rd = reader(ctx, l2)
        limit = min(PAIR_LIMIT, max_length(ctx) if cfg.ppa_base in JOINT_BASES else model.config.max_position_embeddings - 2)
        pairs = pair_ids(ctx, rd, unit_l2s(ctx, l2), limit)
        if len(pairs) <= cfg.ppa_queue_size or len(pairs) < cfg.ppa_batch_size:  # fewer pairs than the source's files promised
            raise XlvizError(f"{len(pairs)} parallel training pairs: the MoCo queue ({cfg.ppa_queue_size}) must be smaller and a "
                             f"batch ({cfg.ppa_batch_size}) at most as large", field="ppa_queue_size")
        sp = Specials.of(rd.toks[run_l1(ctx)], rd.size)
        batches = pair_batches(pairs, cfg.ppa_batch_size, sp, objective=cfg.ppa_objective, seed=cfg.seed,
                               rank=ctx.acc.process_index, world_size=ctx.acc.num_processes, **masking(cfg))
        loop, on_log = ctx.loop(name, cfg.ppa_steps, cfg.ppa_lr)
        aligned = train(PPALoss(model), batches, loop, ctx.acc, on_log=on_log, desc=name).ppa.model
        ctx.acc.free_memory()
        if not ctx.main:
            return
        with atomic_dir(ctx.path(name)) as tmp:
            aligned.save_pretrained(tmp / "joint")
            rd.toks[run_l1(ctx)].save_pretrained(tmp / "joint")
            if rd.disjoint:
                for lang in rd.langs:
                    slice_to_language(aligned, rd.vocab, lang).save_pretrained(tmp / lang)
                    rd.toks[lang].save_pretrained(tmp / lang)

    return Stage(name, "transfer", build=build, train=run_train, trains=ppa_trains(objective),
                 note=f"{objective} on the parallel training corpus; the momentum encoder only by EMA")


def ppa_trains(objective: str) -> tuple[str, ...]:
    """Parameter names that get gradient: the masked LM (its LM head only with a word-level
    task) and MoCo's query head; never the momentum encoder or its head."""
    use_moco, word = parse_objective(objective)
    out = [r"model\..*"] if word else [r"model\.(?!cls\.).*"]
    return tuple(out + ([r"moco\.head_q\..*"] if use_moco else []))


def encoder_folder(ctx: Context, l2: str | None, lang: str) -> Path:
    stage = ctx.path(f"s2_ppa{suffix(l2)}")
    return stage / lang if (stage / lang).is_dir() else stage / "joint"


# --------------------------------------------------------------------------- QA
def finetune_stage(l2: str | None) -> Stage:
    """QA on L1 from the aligned model (the L1 slice of a disjoint one), every parameter."""
    name = f"s3_ppa{suffix(l2)}"

    def build(ctx: Context):
        mlm = AutoModelForMaskedLM.from_pretrained(encoder_folder(ctx, l2, ctx.data.l1), use_safetensors=True)
        return qa_from_mlm(mlm, seed=ctx.cfg.seed + 3)

    def run_train(ctx: Context, model) -> None:
        from xlviz.methods.common import finetune_qa

        tok = AutoTokenizer.from_pretrained(encoder_folder(ctx, l2, ctx.data.l1))
        ctx.save(finetune_qa(ctx, model, name, tokenizer=tok), ctx.path(name), tok)

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",), note="QA on L1, every parameter")


def codeswitch_batches(ctx: Context, rd, l2s: list[str]):
    """Shuffled batches of L1 windows and code-switched windows; an example's two switched
    versions (and their windows) sit next to each other, so they share a batch unless a batch
    boundary falls between them."""
    cfg, l1 = ctx.cfg, ctx.data.l1
    english = ctx.data.qa("train")
    groups: dict[str, list[dict]] = {}
    examples = monolingual_examples(english, l1)
    for l2 in l2s:
        examples += codeswitch_examples(english, ctx.translate_train(CODESWITCH, l2), l1, l2)
    feats = mixed_train_features(examples, rd.toks, rd.to_joint, cfg.qa_max_length, cfg.doc_stride)
    for f in feats:
        groups.setdefault(_group(examples[f["example_index"]]), []).append(f)
    keys = list(groups)
    pad_id = rd.toks[l1].pad_token_id
    rank, world_size = ctx.acc.process_index, ctx.acc.num_processes
    gen = torch.Generator().manual_seed(cfg.seed + 5)
    if len(feats) // world_size < cfg.batch_size:
        raise XlvizError(f"only {len(feats)} QA training windows for a batch of {cfg.batch_size}", field="batch_size")
    while True:
        order = [f for k in torch.randperm(len(keys), generator=gen)[rank::world_size].tolist() for f in groups[keys[k]]]
        for i in range(0, len(order) - cfg.batch_size + 1, cfg.batch_size):
            yield trim_padding(feature_tensors(order[i: i + cfg.batch_size], pad_id))


def _group(example: dict) -> str:
    """The question an example was made from: L1 examples and their switched versions group
    by language pair; switched examples of one question and L2 together."""
    return example["id"] if example["question_lang"] == example["context_lang"] else \
        example["id"].rsplit("-", 2)[0] + "|" + "".join(sorted({example["question_lang"], example["context_lang"]}))


def codeswitch_stage(l2: str | None) -> Stage:
    name = f"s3_ppa-codeswitch{suffix(l2)}"

    def build(ctx: Context):
        mlm = AutoModelForMaskedLM.from_pretrained(ctx.path(f"s2_ppa{suffix(l2)}", "joint"), use_safetensors=True)
        return qa_from_mlm(mlm, seed=ctx.cfg.seed + 3)

    def run_train(ctx: Context, model) -> None:
        rd = reader(ctx, l2)
        loop, on_log = ctx.loop(name, ctx.cfg.finetune_steps, ctx.cfg.finetune_lr)
        model = train(QALoss(model), codeswitch_batches(ctx, rd, unit_l2s(ctx, l2)), loop, ctx.acc, on_log=on_log, desc=name).model
        ctx.acc.free_memory()
        ctx.save(model, ctx.path(name))

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",),
                 note="QA on L1 + code-switched translate-train (L2 labels), every parameter")


# --------------------------------------------------------------------------- the method
class Ppa(Method):
    def describe(self, system: str) -> str:
        return VARIANTS[system].description

    def uses(self, system: str, cfg=None) -> dict:
        pairs = (cfg.ppa_pairs or cfg.world.parallel_train_pairs) if cfg is not None else WorldConfig().parallel_train_pairs
        return {"parallel_pairs": pairs, "l2_labels": VARIANTS[system].codeswitch}

    def validate(self, system: str, cfg) -> None:
        if cfg.ppa_base not in JOINT_BASES:
            check_base_folder(cfg.ppa_base)
        pairs = cfg.ppa_pairs or cfg.world.parallel_train_pairs
        if cfg.ppa_queue_size >= pairs:
            raise XlvizError(f"must be smaller than the {pairs} parallel pairs per L2, or the queue holds a pair's own earlier "
                             f"key as a negative (the paper: 32k negatives for 250k-2M pairs), got {cfg.ppa_queue_size}",
                             field="ppa_queue_size")
        if cfg.ppa_batch_size > pairs:
            raise XlvizError(f"must be at most the {pairs} parallel pairs per L2, got {cfg.ppa_batch_size}", field="ppa_batch_size")

    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [data_stage(ctx)]
        for l2 in units(ctx):
            out += base_stages(ctx, l2)
            out.append(align_stage(l2, ctx.cfg.ppa_objective))
            if not on_corpus(ctx):  # a corpus source: scored by its tasks (retrieval), no QA fine-tuning
                out.append(codeswitch_stage(l2) if VARIANTS[system].codeswitch else finetune_stage(l2))
        return out

    def runs_on(self, system: str) -> tuple[str, ...]:
        # the zero-shot system aligns on parallel training pairs, which a corpus source can offer;
        # the code-switched one reads translated QA training data
        return ("world",) if VARIANTS[system].codeswitch else ("world", "corpus")

    def unit_for(self, ctx: Context, lang: str) -> str | None:
        if not is_pair(ctx.cfg):
            return None
        return lang if lang != run_l1(ctx) else run_l2s(ctx)[0]

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        """Pair bases: a row depends on the stages of the pair model that scores it."""
        u = self.unit_for(ctx, lang)
        return super().row_stages(ctx, system, lang) if u is None else unit_stages(self.stages(ctx, system), u)

    def encoder(self, ctx: Context, system: str, lang: str):
        folder = encoder_folder(ctx, self.unit_for(ctx, lang), lang)
        return AutoModelForMaskedLM.from_pretrained(folder, use_safetensors=True), self._tokenizer(ctx, self.unit_for(ctx, lang), lang)

    def pair_l1_encoder(self, ctx: Context, system: str, l2: str):
        if not is_pair(ctx.cfg):
            return None
        l1 = run_l1(ctx)
        return AutoModelForMaskedLM.from_pretrained(encoder_folder(ctx, l2, l1), use_safetensors=True), self._tokenizer(ctx, l2, l1)

    def _tokenizer(self, ctx: Context, u: str | None, lang: str):
        rd = reader(ctx, u)
        return rd.toks[lang]

    def qa_model(self, ctx: Context, system: str, lang: str):
        u = self.unit_for(ctx, lang)
        return self._qa(ctx, system, u, lang)

    def _qa(self, ctx: Context, system: str, u: str | None, lang: str):
        rd = reader(ctx, u)
        if VARIANTS[system].codeswitch:
            qa = AutoModelForQuestionAnswering.from_pretrained(ctx.path(f"s3_ppa-codeswitch{suffix(u)}"), use_safetensors=True)
            return (slice_to_language(qa, rd.vocab, lang) if rd.disjoint else qa), rd.toks[lang]
        qa = AutoModelForQuestionAnswering.from_pretrained(ctx.path(f"s3_ppa{suffix(u)}"), use_safetensors=True)
        if lang == ctx.data.l1 or not rd.disjoint:
            return qa, rd.toks[lang]
        l2 = AutoModelForMaskedLM.from_pretrained(encoder_folder(ctx, u, lang), use_safetensors=True)
        return zero_shot_model(qa, l2), rd.toks[lang]

    def own_l1_model(self, ctx: Context, system: str, lang: str):
        if not is_pair(ctx.cfg) or lang == ctx.data.l1:
            return None
        return self._qa(ctx, system, lang, ctx.data.l1)


METHOD = Ppa("ppa", VARIANTS.keys(), options=PpaOptions, description="post-pretraining alignment with parallel text (Pan et al. 2021)", order=40)
