"""The paper's joint multilingual baselines (Artetxe et al. 2020, §3.1, Table 3): one BERT
pre-trained with MLM on several languages at once, fine-tuned for QA on L1, tested zero-shot.

The systems are rows of :data:`VARIANTS` (a pair model or one model on every language; a
disjoint or a joint vocabulary; the joint vocabulary's size as the paper gives it):

- ``jointpair-disjoint``: one model per L2, on L1 + that L2, each language reading its own
  vocabulary of ``vocab_size`` (the MONOTRANS vocabularies side by side in one embedding matrix;
  only the five special tokens shared: :class:`xlviz.data.joint_vocab.DisjointVocab`). The
  paper: 32k subwords per language.
- ``jointpair-joint``: the same with one vocabulary learned on both corpora, of the *same total
  size* as one language's disjoint vocabulary (the paper: 32k), so each language gets about half.
- ``jointmulti``: one model on L1 and every L2 of the world, one joint vocabulary of the paper's
  smaller size (32k); ``jointmulti-large``: the same at the paper's largest (200k).

Vocabulary budgets scale the paper's sizes to the world's: the paper's 32k is ``vocab_size``
(what one language's own vocabulary has here), so a joint vocabulary of the paper's N subwords
gets ``round(N / 32,000 x vocab_size)`` (``joint_vocab_size`` replaces ``vocab_size`` as that
unit when set); :func:`joint_vocab_size`. JOINTMULTI at another size is one more row of
:data:`VARIANTS`.

Budget: the same model size, batch, learning rate and number of steps as MONOTRANS's step 1, so
a joint model sees each language's corpus for a share of the steps (as in the paper, where
JOINTMULTI's compute equals a monolingual model's). Each row's language is drawn from
Conneau & Lample (2019)'s exponentially smoothed weights q_i ∝ p_i^alpha over the languages'
corpus sizes in tokens (``language_alpha``; the paper: "the same upsampling strategy ... for
both the subword vocabulary learning and the pre-training"), each language its own shuffled
block stream; the joint vocabularies are learned on a sample with the same weights.

On a corpus source (text files; ``corpus`` rows of :data:`VARIANTS`: the pair models) the same
stages read the corpora through the source: vocabularies on each language's first
``tokenizer_lines`` lines (at most the run's budget of them, :mod:`xlviz.methods.budget`), pre-training on the corpora streamed (every block ``block_size``
tokens, as MONOTRANS's step 1 there), no QA fine-tuning; the run's tasks (sentence retrieval per
layer) score each language's slice of the model.

Fine-tuning updates every parameter, as for any multilingual model. With disjoint vocabularies
the QA model is trained on the L1 slice of the joint model (:func:`xlviz.models.vocab_slice.
slice_to_language`); English QA data never touches another language's rows, so the zero-shot
model for an L2 is the fine-tuned model with that L2's rows from pre-training swapped in
(special rows from fine-tuning), which is what the joint model itself computes on L2 ids.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator, Mapping

import torch
from transformers import AutoTokenizer, BertForMaskedLM, BertForQuestionAnswering

from xlviz.data.joint_vocab import N_SPECIAL, DisjointVocab, train_joint_tokenizer
from xlviz.io import atomic_dir
from xlviz.methods.base import Context, Method, Stage, unit_stages
from xlviz.methods.common import (
    corpus_head, corpus_sample, corpus_texts, data_stage, finetune_qa, lowercase, max_length, new_body_config, on_corpus, run_l1,
    run_l2s, run_languages,
)
from xlviz.methods.options import MethodOptions, option
from xlviz.models.monotrans import qa_from_mlm, zero_shot_model
from xlviz.models.vocab_slice import slice_to_language
from xlviz.training.loop import train
from xlviz.training.masking import masking
from xlviz.training.mlm import MaskedOnlyMLM, is_long_step, iter_blocks, mask_tokens
from xlviz.training.multilingual import multilingual_batches

PAPER_UNIT = 32_000  # the paper's per-language vocabulary (JOINTPAIR-disjoint, MONOTRANS): vocab_size here


@dataclass
class JointOptions(MethodOptions):
    """The joint models' settings (also of the systems built on them: PPA, VECO, Wu et al.'s)."""

    # What the paper's 32k subwords are for the joint vocabularies (jointpair-joint: one of this
    # size for both languages; jointmulti: this; jointmulti-large: 200k/32k = 6.25 x this).
    joint_vocab_size: int = option(0, "what the paper's 32k subwords are here for the joint vocabularies (jointmulti-large: "
                                   "6.25 x this)", low=50, zero="vocab_size")
    # Conneau & Lample 2019; mBERT's 0.7.
    language_alpha: float = option(0.7, "exponent of the smoothed language sampling q_i ~ p_i^alpha for the joint models' batches "
                                   "and vocabularies (0: balanced, 1: the natural proportions)", low=0, high=1)


@dataclass(frozen=True)
class JointVariant:
    """One joint system: one model per L2 (``pair``) or one on every language; each language
    its own vocabulary (``disjoint``) or one learned on all; the joint vocabulary's size in the
    paper (``paper_vocab`` subwords, scaled by :func:`joint_vocab_size`; per language when
    disjoint); the paper's row of the same design (Table 3); whether it runs on corpus sources
    too (one L2: the pair models), scored there by the run's tasks (sentence retrieval)."""

    pair: bool
    disjoint: bool
    paper_vocab: int
    paper_row: str
    corpus: bool = False


VARIANTS: dict[str, JointVariant] = {
    "jointpair-disjoint": JointVariant(pair=True, disjoint=True, paper_vocab=32_000, paper_row="JOINTPAIR Disjoint voc (32k per language)",
                                       corpus=True),
    "jointpair-joint": JointVariant(pair=True, disjoint=False, paper_vocab=32_000, paper_row="JOINTPAIR Joint voc (32k)", corpus=True),
    "jointmulti": JointVariant(pair=False, disjoint=False, paper_vocab=32_000, paper_row="JOINTMULTI 32k voc"),
    "jointmulti-large": JointVariant(pair=False, disjoint=False, paper_vocab=200_000, paper_row="JOINTMULTI 200k voc"),
}
SYSTEMS = tuple(VARIANTS)


def variant(system: str) -> JointVariant:
    """A joint system's row; systems built on these functions outside the table (Wu et al.'s
    ``wu-shared-top-K``) are pair models with disjoint vocabularies."""
    return VARIANTS.get(system, VARIANTS["jointpair-disjoint"])


def is_pair(system: str) -> bool:
    return variant(system).pair


def model_languages(ctx: Context, system: str, l2: str | None) -> list[str]:
    return [run_l1(ctx), l2] if is_pair(system) else run_languages(ctx)


def unit(system: str, l2: str | None) -> str:
    """The suffix naming one joint model: ``-<l2>`` for a pair, nothing for one on every language."""
    return f"-{l2}" if is_pair(system) else ""


def joint_tokenizer_path(ctx: Context, system: str, l2: str | None):
    return ctx.path("world", "tokenizers-joint", f"{system}{unit(system, l2)}")


def joint_vocab_size(cfg, system: str) -> int:
    """Subwords requested for ``system``'s vocabulary (per language when disjoint): the paper's
    size scaled so that its 32k is ``joint_vocab_size`` if set, else ``vocab_size``.

    Why: the paper compares designs at fixed budgets (JOINTPAIR-joint: 32k in all, so about
    half per language; JOINTPAIR-disjoint: 32k per language; JOINTMULTI: 32k and 200k in all),
    and that budget is what the comparison is about. The trainer may return fewer subwords
    when the corpora hold fewer (the generated world's vocabulary is small)."""
    v = variant(system)
    if v.disjoint:
        return cfg.vocab_size  # each language's own tokenizer (the world stage's)
    return round(v.paper_vocab / PAPER_UNIT * (cfg.joint_vocab_size or cfg.vocab_size))


def corpus_sizes(ctx: Context, toks: Mapping[str, object], langs: list[str]) -> dict[str, int]:
    """Each language's corpus size in its tokens under the model's tokenizer: the p_i of the
    smoothed sampling weights."""
    out = {}
    for lang in langs:  # streamed in chunks: a corpus source's files are never held
        lines, n = iter(corpus_texts(ctx, lang)()), 0
        while chunk := list(itertools.islice(lines, 4096)):
            n += sum(len(ids) for ids in toks[lang](chunk, add_special_tokens=False)["input_ids"])
        out[lang] = n
    return out


def vocab_stage(system: str, l2: str | None) -> Stage:
    """One vocabulary of :func:`joint_vocab_size` subwords learned on the model's languages,
    sampled with the smoothed weights (``language_alpha``)."""
    name = f"vocab_{system}{unit(system, l2)}"

    def run(ctx: Context) -> None:
        if not ctx.main:
            return
        langs = model_languages(ctx, system, l2)
        tok = train_joint_tokenizer({lang: corpus_sample(ctx, lang) for lang in langs}, joint_vocab_size(ctx.cfg, system),
                                    algorithm=ctx.cfg.tokenizer, alpha=ctx.cfg.language_alpha, seed=ctx.cfg.seed, lowercase=lowercase(ctx),
                                    model_max_length=max_length(ctx))
        with atomic_dir(joint_tokenizer_path(ctx, system, l2)) as tmp:
            tok.save_pretrained(tmp)
        ctx.log(f"  joint vocabulary of {len(tok)} subwords for {', '.join(langs)}")

    return Stage(name, "data", run=run, note="one vocabulary learned on all the model's languages (smoothed sampling, language_alpha)",
                 needs=("world",))


class Reader:
    """How the joint model reads each language: its tokenizer and its ids in the joint space."""

    def __init__(self, ctx: Context, system: str, l2: str | None):
        self.langs = model_languages(ctx, system, l2)
        self.disjoint = variant(system).disjoint
        if self.disjoint:
            self.toks = {lang: ctx.tokenizer(lang) for lang in self.langs}
            self.vocab = DisjointVocab(self.toks, self.langs)
            self.size = self.vocab.vocab_size
        else:
            shared = AutoTokenizer.from_pretrained(joint_tokenizer_path(ctx, system, l2))
            self.toks = {lang: shared for lang in self.langs}
            self.vocab = None
            self.size = len(shared)

    def sizes(self, ctx: Context) -> dict[str, int]:
        """Each language's corpus size in tokens (computed once)."""
        if getattr(self, "_sizes", None) is None:
            self._sizes = corpus_sizes(ctx, self.toks, self.langs)
        return self._sizes

    def to_joint(self, lang: str, ids: list[int]) -> list[int]:
        return self.vocab.to_joint(lang, ids) if self.disjoint else ids

    def save(self, model, folder) -> None:
        """The joint model (``joint/``) and, per language, the model that reads it (its slice
        of a disjoint vocabulary) with its tokenizer (``<lang>/``)."""
        model.save_pretrained(folder / "joint")
        for lang in self.langs:
            part = slice_to_language(model, self.vocab, lang) if self.disjoint else model
            part.save_pretrained(folder / lang)
            self.toks[lang].save_pretrained(folder / lang)


def language_groups(reader: Reader, ctx: Context | None = None, documents: int = 1000) -> torch.Tensor:
    """Joint id -> index of its language (-1: a special token, or never seen), so the stage's
    verdict compares its loss with the unigram entropy of each language rather than of their
    mixture (ln 2 higher for two, ln 3 for three): a model that tells the languages apart gets
    that much for free. A disjoint vocabulary says it by its rows; a shared one assigns each
    id to the language whose corpus (its first ``documents`` documents) uses it most often."""
    groups = torch.full((reader.size,), -1, dtype=torch.long)
    if reader.disjoint:
        for i, lang in enumerate(reader.langs):
            groups[reader.vocab.language_rows(lang)[N_SPECIAL:]] = i
        return groups
    if ctx is None:
        return groups
    freq = torch.zeros(len(reader.langs), reader.size)
    for i, lang in enumerate(reader.langs):
        ids = [t for doc in reader.toks[lang](corpus_head(ctx, lang, documents), add_special_tokens=False)["input_ids"] for t in doc]
        counts = torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=reader.size).float()[: reader.size]
        freq[i] = counts / counts.sum().clamp(min=1)
    seen = freq.sum(0) > 0
    groups[seen] = freq.argmax(0)[seen]
    groups[:N_SPECIAL] = -1
    return groups


def block_batches(ctx: Context, reader: Reader, block: int, batch: int, salt: int = 0, mode: str = "mixed"):
    """Batches of ``batch`` corpus blocks of ``block`` tokens in joint ids, each language its own
    shuffled stream (this process's share), each row's (or batch's) language drawn with the
    smoothed weights q_i ∝ p_i^alpha of the corpus sizes in tokens (``language_alpha``); a
    corpus source's files are streamed (``max_lines`` per pass, ``shuffle_buffer`` blocks shuffled)."""
    cfg = ctx.cfg
    buffer = {"shuffle_buffer": ctx.data.o.shuffle_buffer} if on_corpus(ctx) else {}
    streams = {lang: map(lambda ids, lang=lang: reader.to_joint(lang, ids),
                         iter_blocks(corpus_texts(ctx, lang), reader.toks[lang], block, seed=cfg.seed + 17 * k + salt,
                                     rank=ctx.acc.process_index, world_size=ctx.acc.num_processes, **buffer))
               for k, lang in enumerate(reader.langs)}
    return multilingual_batches(streams, batch, mode=mode, sizes=reader.sizes(ctx), alpha=cfg.language_alpha, seed=cfg.seed + salt)


def joint_blocks(ctx: Context, reader: Reader, mode: str = "mixed") -> Iterator[tuple[str | None, torch.Tensor]]:
    """Batches of ``mlm_batch_size`` blocks in joint ids, languages drawn with the smoothed
    weights (:func:`block_batches`); a ``long_block_share`` of the steps holds full-length
    blocks (as many tokens), as MONOTRANS's step 1 does (:func:`xlviz.training.mlm.mlm_batches`)."""
    cfg = ctx.cfg

    def stream(block: int, batch: int, salt: int):
        return block_batches(ctx, reader, block, batch, salt, mode)

    short = stream(cfg.block_size, cfg.mlm_batch_size, 0)
    # on a corpus source every block is block_size tokens, as MONOTRANS's step 1 there (same budget)
    if cfg.long_block_share <= 0 or max_length(ctx) <= cfg.block_size or on_corpus(ctx):
        yield from short
        return
    long = stream(max_length(ctx), max(1, round(cfg.mlm_batch_size * cfg.block_size / max_length(ctx))), 1)
    step = 0
    while True:
        yield next(long if is_long_step(step, cfg.long_block_share) else short)
        step += 1


def pretrain_stage(system: str, l2: str | None) -> Stage:
    """MLM pre-training of one BERT on its languages (balanced batches); saves the joint model
    and, with disjoint vocabularies, one plain per-language slice (``<stage>/<lang>``)."""
    name = f"s1_{system}{unit(system, l2)}"

    def build(ctx: Context) -> BertForMaskedLM:
        reader = Reader(ctx, system, l2)
        return BertForMaskedLM(new_body_config(ctx, reader.size))

    def run_train(ctx: Context, model) -> None:
        cfg = ctx.cfg
        reader = Reader(ctx, system, l2)
        gen = torch.Generator().manual_seed(cfg.seed * 31 + ctx.acc.process_index)
        mask_id = reader.toks[reader.langs[0]].mask_token_id

        def batches():
            for _, ids in joint_blocks(ctx, reader):
                inputs, labels = mask_tokens(ids, mask_id=mask_id, vocab_size=reader.size, generator=gen, **masking(cfg))
                yield {"input_ids": inputs, "labels": labels}

        loop, on_log = ctx.loop(name, cfg.pretrain_steps, cfg.pretrain_lr, pretraining="joint")
        if loop.monitor is not None and len(reader.langs) > 1:
            loop.monitor.id_groups = language_groups(reader, ctx)  # the unigram entropy per language
        model = train(MaskedOnlyMLM(model), batches(), loop, ctx.acc, on_log=on_log, desc=name).model
        ctx.acc.free_memory()
        if not ctx.main:
            return
        with atomic_dir(ctx.path(name)) as tmp:
            reader.save(model, tmp)

    langs = f"L1 + {l2}" if is_pair(system) else "L1 + every L2"
    return Stage(name, "pretrain", build=build, train=run_train, trains=(r".*",), note=f"every parameter: masked LM on {langs}")


def finetune_stage(system: str, l2: str | None) -> Stage:
    """QA on L1, every parameter trained (the L1 slice of a disjoint model)."""
    name = f"s3_{system}{unit(system, l2)}"
    s1 = f"s1_{system}{unit(system, l2)}"

    def build(ctx: Context):
        mlm = BertForMaskedLM.from_pretrained(ctx.path(s1, run_l1(ctx)), use_safetensors=True)
        return qa_from_mlm(mlm, seed=ctx.cfg.seed + 3)

    def run_train(ctx: Context, model) -> None:
        tok = AutoTokenizer.from_pretrained(ctx.path(s1, run_l1(ctx)))
        model = finetune_qa(ctx, model, name, tokenizer=tok)
        ctx.save(model, ctx.path(name), tok)

    return Stage(name, "finetune", build=build, train=run_train, trains=(r".*",), note="QA on L1, every parameter")


class Joint(Method):
    def units(self, ctx: Context, system: str) -> list[str | None]:
        return run_l2s(ctx) if is_pair(system) else [None]

    def stages(self, ctx: Context, system: str) -> list[Stage]:
        out = [data_stage(ctx)]
        for l2 in self.units(ctx, system):
            if not variant(system).disjoint:
                out.append(vocab_stage(system, l2))
            out.append(pretrain_stage(system, l2))
            if not on_corpus(ctx):  # a corpus source: scored by its tasks (retrieval), no QA fine-tuning
                out.append(finetune_stage(system, l2))
        return out

    def describe(self, system: str) -> str:
        v = variant(system)
        who = "L1 + one L2" if v.pair else "L1 + every L2"
        if v.disjoint:
            return f"one BERT on {who}, each language its own vocabulary (only specials shared; the paper's {v.paper_row})"
        return f"one BERT on {who} with one vocabulary learned on all of them (the paper's {v.paper_row}, scaled: joint_vocab_size)"

    def default_systems(self, every: bool = False, layers: int = 4) -> tuple[str, ...]:
        return self.systems

    def runs_on(self, system: str) -> tuple[str, ...]:
        v = VARIANTS.get(system)  # systems built on these functions outside the table declare their own
        return ("world", "corpus") if v is not None and v.corpus else ("world",)

    def unit_for(self, ctx: Context, system: str, lang: str) -> str | None:
        """The joint model that scores ``lang``: the pair of that L2; for L1, the first pair."""
        if not is_pair(system):
            return None
        return lang if lang != run_l1(ctx) else run_l2s(ctx)[0]

    def encoder(self, ctx: Context, system: str, lang: str):
        folder = ctx.path(f"s1_{system}{unit(system, self.unit_for(ctx, system, lang))}", lang)
        return BertForMaskedLM.from_pretrained(folder, use_safetensors=True), AutoTokenizer.from_pretrained(folder)

    def pair_l1_encoder(self, ctx: Context, system: str, l2: str):
        if self.unit_for(ctx, system, l2) is None:
            return None
        folder = ctx.path(f"s1_{system}{unit(system, l2)}", run_l1(ctx))
        return BertForMaskedLM.from_pretrained(folder, use_safetensors=True), AutoTokenizer.from_pretrained(folder)

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        """A pair model's row (its L1 row: the first pair's) depends on that pair's stages only."""
        u = self.unit_for(ctx, system, lang)
        return [s.name for s in self.stages(ctx, system)] if u is None else unit_stages(self.stages(ctx, system), u)

    def own_l1_model(self, ctx: Context, system: str, lang: str):
        if not is_pair(system) or lang == run_l1(ctx):
            return None
        u = unit(system, lang)
        qa = BertForQuestionAnswering.from_pretrained(ctx.path(f"s3_{system}{u}"), use_safetensors=True)
        return qa, AutoTokenizer.from_pretrained(ctx.path(f"s1_{system}{u}", run_l1(ctx)))

    def qa_model(self, ctx: Context, system: str, lang: str):
        u = unit(system, self.unit_for(ctx, system, lang))
        qa = BertForQuestionAnswering.from_pretrained(ctx.path(f"s3_{system}{u}"), use_safetensors=True)
        if lang == run_l1(ctx) or not variant(system).disjoint:
            return qa, AutoTokenizer.from_pretrained(ctx.path(f"s1_{system}{u}", lang))
        l2, tok = self.encoder(ctx, system, lang)
        return zero_shot_model(qa, l2), tok


METHOD = Joint("joint", VARIANTS.keys(), description="joint multilingual pre-training (Artetxe et al. 2020, §3.1)", order=10,
               options=JointOptions)
