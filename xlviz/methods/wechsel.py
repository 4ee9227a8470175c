"""WECHSEL (Minixhofer et al., NAACL 2022): the L2 token embeddings start as a
similarity-weighted mean of L1 embedding rows instead of random vectors
(:mod:`xlviz.models.wechsel`).

- ``wechsel_vectors`` (data): skip-gram vectors of each language's subwords (the CLWE
  baseline's, same seeds), each L2's aligned onto L1's with one Procrustes fit on the
  dictionary ``wechsel_dictionary`` names (``gold``: the training part of the world's gold
  dictionary, an external dictionary as the paper's MUSE ones; ``seed``: ``wechsel_seed_size``
  entries of that training part drawn with the run's seed; ``identical``: the strings both
  vocabularies share), then for every L2 subword its ``wechsel_neighbours`` nearest L1
  subwords and their softmax weights (temperature ``wechsel_temperature``).
- The gold dictionary is split once per run and language (:func:`xlviz.data.dictionary.gold_split`,
  ``gold_dictionary_test_fraction`` of its L1 words held out, seeded by the run's seed): the
  fit never reads a held-out pair, and the precision@1 the stage reports and every system's
  ``word-translation`` score read only held-out pairs (before, the fit read the whole
  dictionary and was scored on the pairs it was fitted on: precision@1 1.0).
- ``monotrans+wechsel``: MONOTRANS (its step 1 and step 3 shared with ``monotrans``), step 2
  (``s2_wechsel-<l2>``) starting from the WECHSEL rows of step 1's L1 embeddings.
- ``wechsel-only``: no step 2: the WECHSEL rows themselves, swapped into MONOTRANS's
  fine-tuned model (zero-shot, no L2 training at all beside the static vectors).
- ``monotrans+forgetting+wechsel``: both follow-ups at once (neither paper combines them):
  active forgetting's step 1 (``s1_forgetting``, shared with ``monotrans+forgetting``), step 2
  (``s2_forgetting-wechsel-<l2>``) from the WECHSEL rows of *its* L1 embeddings, its step 3.

The dictionary setting is written into each result row (``wechsel_dictionary``, and
``wechsel_seed_size`` for ``seed``), and what the fit read into its ``resources`` (the
training part's size, gold).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from safetensors.torch import load_file, save_file
from transformers import BertForMaskedLM

from xlviz.data.dictionary import GOLD_TEST_FRACTION, gold_split
from xlviz.io import atomic_dir, atomic_write_json
from xlviz.methods import forgetting
from xlviz.methods.base import Context, Method, Stage
from xlviz.methods.common import WORLD, load_mlm, new_bert, pretrain_stage
from xlviz.methods.options import MethodOptions, option
from xlviz.methods.monotrans import Variant, finetune_stage, l2_init_model
from xlviz.models.surgery import word_embeddings
from xlviz.models.wechsel import aligned_spaces, neighbour_table, precision_at_1, wechsel_rows

MONOTRANS, ONLY, BOTH = "monotrans+wechsel", "wechsel-only", "monotrans+forgetting+wechsel"


@dataclass(frozen=True)
class WechselVariant:
    """One WECHSEL system: step 2 from the WECHSEL rows (else the rows alone swapped in), on
    active forgetting's step 1 (and its step 3) or MONOTRANS's."""

    step2: bool
    forgetting: bool
    description: str

    @property
    def s1(self) -> str:
        return forgetting.S1 if self.forgetting else "s1_pretrain"

    @property
    def s3(self) -> str:
        return forgetting.S3 if self.forgetting else "s3_finetune"

    def s2(self, lang: str) -> str:
        return f"s2_{'forgetting-' if self.forgetting else ''}wechsel-{lang}"


VARIANTS: dict[str, WechselVariant] = {
    MONOTRANS: WechselVariant(step2=True, forgetting=False,
                              description="MONOTRANS with step 2 starting from WECHSEL's initialisation (Minixhofer et al. 2022)"),
    ONLY: WechselVariant(step2=False, forgetting=False, description="WECHSEL's initialisation alone swapped in (no step 2)"),
    BOTH: WechselVariant(step2=True, forgetting=True,
                         description="active forgetting in step 1, step 2 from WECHSEL's initialisation (a combination)"),
}


@dataclass
class WechselOptions(MethodOptions):
    # "identical": with world.shared_names, the names.
    wechsel_dictionary: str = option("gold", "the dictionary the static spaces are aligned with: gold (the world's: an upper bound), "
                                     "seed (wechsel_seed_size gold entries drawn with the seed) or identical (the strings both "
                                     "vocabularies share)", choices=("gold", "seed", "identical"))
    wechsel_seed_size: int = option(50, "entries of the seed dictionary", low=1)
    # Read by every system's word-translation score on the world, not only WECHSEL's: the
    # held-out part is what each system is scored on, so systems are compared on the same words.
    gold_dictionary_test_fraction: float = option(GOLD_TEST_FRACTION, "share of the world's gold dictionary's L1 words held out (seeded by the run's "
                                                  "seed): WECHSEL's fit never reads them and every word-translation score reads "
                                                  "only them", low=0, high=1, low_open=True, high_open=True)
    wechsel_neighbours: int = option(10, "k: nearest L1 subwords averaged for each L2 subword (the paper's 10)", low=1)
    wechsel_temperature: float = option(0.1, "tau of the neighbours' softmax weights (the paper's 0.1)", low=0, low_open=True)

VECTORS_DIR = "wechsel_vectors"


def dictionary_split(ctx: Context, lang: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training, held-out) pairs of the world's gold dictionary for ``lang`` (the run's seed)."""
    return gold_split(ctx.world, lang, ctx.cfg.gold_dictionary_test_fraction, ctx.cfg.seed)


def dictionary_pairs(ctx: Context, lang: str) -> list[tuple[str, str]] | None:
    """The (L1 word, L2 word) pairs the alignment is fitted on: the gold dictionary's training
    part, never a held-out pair; None: identical strings. ``seed`` draws its entries among the
    training pairs that are one token in both vocabularies (the only ones a subword-level fit
    can use), so N is the number of pairs it sees."""
    cfg = ctx.cfg
    if cfg.wechsel_dictionary == "identical":
        return None
    train, _ = dictionary_split(ctx, lang)
    if cfg.wechsel_dictionary == "gold":
        return train
    v1, v2 = ctx.tokenizer(ctx.data.l1).get_vocab(), ctx.tokenizer(lang).get_vocab()
    usable = [(a, b) for a, b in train if a in v1 and b in v2]
    return sorted(random.Random(f"wechsel-seed-{cfg.seed}-{lang}").sample(usable, min(cfg.wechsel_seed_size, len(usable))))


def gold_ids(ctx: Context, lang: str) -> dict[int, int]:
    """{L2 id: L1 id} of the held-out gold pairs that are one token on both sides (for precision@1)."""
    v1, v2 = ctx.tokenizer(ctx.data.l1).get_vocab(), ctx.tokenizer(lang).get_vocab()
    _, held_out = dictionary_split(ctx, lang)
    return {v2[b]: v1[a] for a, b in held_out if a in v1 and b in v2}


def run_vectors(ctx: Context) -> None:
    if not ctx.main:
        return
    cfg, world = ctx.cfg, ctx.world
    dim = new_bert(ctx, world.l1).config.hidden_size
    toks = {lang: ctx.tokenizer(lang) for lang in world.languages}
    report = {"dictionary": cfg.wechsel_dictionary, "test_fraction": cfg.gold_dictionary_test_fraction, "seed_size": cfg.wechsel_seed_size if cfg.wechsel_dictionary == "seed" else None,
              "neighbours": cfg.wechsel_neighbours, "temperature": cfg.wechsel_temperature, "dim": dim, "languages": {}}
    with atomic_dir(ctx.path(VECTORS_DIR)) as tmp:
        for lang in world.l2s:
            spaces = aligned_spaces(toks, {world.l1: world.corpus(world.l1), lang: world.corpus(lang)}, world.l1, lang, dim,
                                    dictionary=dictionary_pairs(ctx, lang), seed=cfg.seed)
            ids, weights = neighbour_table(spaces.l2, spaces.l1, l2_known=spaces.l2_known, l1_known=spaces.l1_known,
                                           k=cfg.wechsel_neighbours, temperature=cfg.wechsel_temperature)
            save_file({"neighbours": ids, "weights": weights}, str(tmp / f"{lang}.safetensors"))
            held = gold_ids(ctx, lang)
            p1 = precision_at_1(ids, held)
            train, test = dictionary_split(ctx, lang)
            report["languages"][lang] = {"pairs": spaces.pairs, "coverage": float(spaces.l2_known.mean()),
                                         "dictionary_train_pairs": len(train), "dictionary_held_out_pairs": len(test),
                                         "held_out_one_token_pairs": len(held),
                                         "held_out_precision_at_1": None if p1 is None else round(p1, 4)}
            ctx.log(f"  {lang}: {spaces.pairs} {cfg.wechsel_dictionary} pairs aligned the static spaces (gold dictionary: "
                    f"{len(train)} training pairs, {len(test)} held out); nearest L1 subword is the gold translation for "
                    f"{'-' if p1 is None else f'{p1:.0%}'} of {len(held)} one-token held-out words")
        atomic_write_json(tmp / "report.json", report)


VECTORS = Stage(VECTORS_DIR, "data", run=run_vectors, needs=("world",),
                note="skip-gram vectors per language aligned with the WECHSEL dictionary; each L2 subword's nearest L1 subwords")


def wechsel_init(ctx: Context, l1: BertForMaskedLM, lang: str) -> BertForMaskedLM:
    """Step 2's starting model with the WECHSEL rows of ``l1``'s token embeddings (subwords
    without a static vector and the special rows as MONOTRANS starts them)."""
    model = l2_init_model(ctx, l1, lang)
    table = load_file(str(ctx.path(VECTORS_DIR, f"{lang}.safetensors")))
    emb = word_embeddings(model)
    with torch.no_grad():
        emb.weight.copy_(wechsel_rows(word_embeddings(l1).weight, table["neighbours"], table["weights"], emb.weight))
    return model


class Wechsel(Method):
    def stages(self, ctx: Context, system: str) -> list[Stage]:
        v = VARIANTS[system]
        out = [WORLD, forgetting.PRETRAIN if v.forgetting else pretrain_stage(), VECTORS]
        if v.step2:
            out += [forgetting.transfer_stage(v.s2(lang), v.s1, lang, wechsel_init, "from the WECHSEL rows") for lang in ctx.data.l2s]
        return out + [forgetting.FINETUNE if v.forgetting else finetune_stage(Variant())]

    def describe(self, system: str) -> str:
        return VARIANTS[system].description

    def uses(self, system: str, cfg=None) -> dict:
        out = {"parallel_pairs": 0, "l2_labels": False}
        if cfg is not None:
            out["wechsel_dictionary"] = cfg.wechsel_dictionary
            if cfg.wechsel_dictionary == "seed":
                out["wechsel_seed_size"] = cfg.wechsel_seed_size
        return out

    def needs(self, system: str, cfg=None) -> frozenset[str]:
        """The default needs, and a bilingual dictionary unless it aligns on identical strings."""
        extra = set() if getattr(cfg, "wechsel_dictionary", "gold") == "identical" else {"dictionary"}
        return super().needs(system, cfg) | extra

    def dictionary(self, system: str, cfg=None, ctx: Context | None = None, lang: str | None = None) -> dict | None:
        """The gold dictionary's training part (``seed``: the entries drawn from it) or, for
        ``identical``, the strings both vocabularies share (induced, no external dictionary)."""
        choice = getattr(cfg, "wechsel_dictionary", "gold")
        if choice == "identical":
            return {"size": None, "source": "induced", "split": "train"}
        size = None
        if ctx is not None and getattr(ctx, "world", None) is not None:
            size = len(dictionary_pairs(ctx, lang if lang in ctx.data.l2s else ctx.data.l2s[0]))
        elif choice == "seed" and cfg is not None:
            size = cfg.wechsel_seed_size
        return {"size": size, "source": "gold", "split": "train"}

    @staticmethod
    def _l2(ctx: Context, system: str, lang: str):
        v = VARIANTS[system]
        if not v.step2:
            return wechsel_init(ctx, load_mlm(ctx, v.s1), lang)
        return BertForMaskedLM.from_pretrained(ctx.path(v.s2(lang)), use_safetensors=True)

    def qa_model(self, ctx: Context, system: str, lang: str):
        return forgetting.swap(ctx, VARIANTS[system].s3, None if lang == ctx.data.l1 else self._l2(ctx, system, lang), lang)

    def encoder(self, ctx: Context, system: str, lang: str):
        model = load_mlm(ctx, VARIANTS[system].s1) if lang == ctx.data.l1 else self._l2(ctx, system, lang)
        return model, ctx.tokenizer(lang)


METHOD = Wechsel("wechsel", VARIANTS.keys(), options=WechselOptions, description="WECHSEL's initialisation of the L2 embeddings (Minixhofer et al. 2022)",
                 order=6)
