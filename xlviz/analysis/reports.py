"""Whole analyses for models and runs: which models to compare, which data, tables of numbers.

Why: the Alignment and Probing pages and ``xlviz analyse`` must compute the same numbers.
This module turns "run X, language sov" or "these two HF folders on PUD en-de" into model
specifications, parallel data and result tables (lists of flat dicts: one row per system and
layer, or per model, language and category), which the CLI writes as JSON/CSV and the pages
chart and cache. Models are described by :class:`xlviz.models.reference.ModelSpec` (hashable,
cheap) and only loaded by :func:`xlviz.models.reference.load_spec`, so the pages can cache
loading separately from computing.

A run gives these models (see ``xlviz.transfer.pipeline``):

- ``s1_pretrain``: the L1 masked LM with the L1 tokenizer;
- ``s2_transfer-<l2>``: the same body with learned L2 token embeddings and the L2 tokenizer
  ("transferred");
- the floor: ``s1_pretrain`` with untrained L2 embeddings, rebuilt exactly as the run's step 2
  started (:func:`xlviz.models.floor.floor_model` with seed = config seed + 1, the run's
  ``embedding_init`` and, on the generated world, its ``l2_init_std``). A run that exported
  its encoders needs no rebuild: its ``encoders/floor-<l2>`` is the floor it scored.

Probing rows: the L1 model on L1 data (the reference); each system's L2 encoder on L2 data
(``mono-l2``: trained on the L2 directly, the untransferred reference; ``floor``; the
transferred ones); and, as Artetxe et al. (App. D) probe, models transferred *into* L1
(``monotrans-into-l1``: an L2's body with learned L1 embeddings) on L1 data. Word in context
runs only where a language's sense pairs test the context (not where same sense = same word).

Progress callbacks of the functions here are ``progress(fraction, text)`` (fraction in [0, 1]),
ready for ``st.progress``; the lower-level functions use ``progress(done, total)``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlviz.data.parallel import ParallelData, parallel_data  # noqa: F401  (the registry of parallel-text sources)
from xlviz.data.parallel.world import load_run_world
from xlviz.errors import XlvizError
from xlviz.models.reference import ModelSpec, has_tokenizer, load_spec

ReportProgress = Callable[[float, str], None] | None


# --------------------------------------------------------------------------- models
@dataclass(frozen=True)
class System:
    """The models that read language A and language B (one model for both, or one each)."""

    name: str
    lang_a: str
    lang_b: str
    a: ModelSpec
    b: ModelSpec
    # the degenerate stages either model comes from (the run's verdicts): no result, never compared
    degenerate: tuple[str, ...] = ()
    degenerate_reason: str = ""


@dataclass(frozen=True)
class ProbeModel:
    """A masked LM probed in one language; ``role``: reference (the L1 model on L1, or a model
    trained on the L2 directly), transferred, floor, model; ``direction``: which model reads
    which data (the Probing page says it for every row)."""

    name: str
    language: str
    spec: ModelSpec
    role: str = "model"
    direction: str = ""
    # the degenerate stages its weights come from (the run's verdicts): no result, never probed
    degenerate: tuple[str, ...] = ()
    degenerate_reason: str = ""


L1_ON_L1 = "L1 model on L1 data"
L2_ON_L2 = "L2 encoder on L2 data"
INTO_L1 = "{l2} body with learned L1 embeddings, on L1 data (xx→en)"


def probe_side(system: str) -> str:
    """Which side of a bench system the Probing page probes (its method says; "l2" by default)."""
    from xlviz.methods import method_of

    try:
        return method_of(system).probe_side(system)
    except XlvizError:
        return "l2"


def probe_role(system: str) -> str:
    """A bench system's role on the Probing page, as its method declares it
    (:meth:`xlviz.methods.base.Method.probe_role`): ``mono-l2`` is the untransferred reference,
    ``floor`` the floor, the others transferred; "model" for a name the registry does not know."""
    from xlviz.methods import method_of

    try:
        return method_of(system).probe_role(system)
    except XlvizError:
        return "model"


@dataclass
class RunInfo:
    path: Path
    name: str
    l1: str
    l2s: list[str]
    seed: int
    transferred: dict[str, Path] = field(default_factory=dict)  # l2 -> s2_transfer-<l2>
    l2_tokenizers: dict[str, Path] = field(default_factory=dict)
    floor_init: str = "random"
    floor_init_std: float | None = None  # step 2's std of the new rows (None: the model's initializer_range; _floor_settings)
    # system -> language -> encoder folder: what each method of a bench run yields for the
    # analyses (written at the system's evaluation stage, listed in the run's manifest)
    encoders: dict[str, dict[str, Path]] = field(default_factory=dict)
    # system -> l2 -> the L1 encoder of a pair model's ``l2`` pair (manifest entries with ``pair``)
    pair_encoders: dict[str, dict[str, Path]] = field(default_factory=dict)
    # folder -> the stages its weights come from, as its manifest entry records them (None: not recorded)
    depends_on: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    verdicts: dict[str, dict] = field(default_factory=dict)  # the run's stage verdicts

    def degenerate_for(self, folder: Path | str, default: Sequence[str] | None = None) -> tuple[tuple[str, ...], str]:
        """(the degenerate pre-training or transfer stages the model in ``folder`` comes from,
        why), from the stages its manifest entry records (else ``default``) and the run's
        verdicts. QA fine-tuning stages are not judged here: an encoder never passes through
        one. A model whose stages were not recorded (a run written before they were) is
        judged against every stage of the run, so a degenerate stage anywhere refuses it."""
        from xlviz.training.verdicts import degenerate_encoder_stages

        deps = self.depends_on.get(str(folder))
        if deps is None:
            deps = tuple(default) if default is not None else None
        bad = tuple(degenerate_encoder_stages(list(self.verdicts) if deps is None else deps, self.verdicts))
        if not bad:
            return (), ""
        why = "; ".join(f"{s}: {self.verdicts[s].get('reason') or 'degenerate'}" for s in bad)
        if deps is None:
            why += " (the run does not record which stages this model comes from, so any degenerate stage refuses it)"
        return bad, why

    def probe_model(self, name: str, language: str, spec: "ModelSpec", role: str, direction: str,
                    folder: Path | str, default: Sequence[str] | None = None) -> "ProbeModel":
        bad, why = self.degenerate_for(folder, default)
        return ProbeModel(name, language, spec, role, direction, bad, why)

    def system_encoders(self, l2: str) -> dict[str, tuple[Path, Path]]:
        """{system: (L1 encoder, ``l2`` encoder)} for the systems that read both languages. A
        pair model's L1 side is its ``l2`` pair's own, so both sides are one model."""
        out = {}
        for system, langs in self.encoders.items():
            if l2 not in langs:
                continue
            l1 = self.pair_encoders.get(system, {}).get(l2, langs.get(self.l1))
            if l1 is not None:
                out[system] = (l1, langs[l2])
        return out

    @property
    def s1(self) -> Path:
        return self.path / "s1_pretrain"

    @property
    def has_s1(self) -> bool:
        """Step 1's L1 model exists (a run of pair models only has none)."""
        return (self.s1 / "config.json").is_file()

    @property
    def has_world(self) -> bool:
        """A generated world (its ``world.json``): agreement and sense pairs exist."""
        from xlviz.runs import world_path

        return world_path(self.path, "world").is_file()

    def parallel_file(self, l2: str) -> Path | None:
        """A corpus run's parallel evaluation pairs L1-``l2`` (:func:`xlviz.runs.world_path`), if any."""
        from xlviz.runs import world_path

        try:
            f = world_path(self.path, "parallel", language=l2, pair=self.l1)
        except XlvizError:  # not a language code: no file of the run
            return None
        return f if f.is_file() else None

    def has_parallel(self, l2: str) -> bool:
        return self.has_world or self.parallel_file(l2) is not None

    def tokenizer(self, lang: str) -> Path:
        """The run's tokenizer folder of ``lang`` (written by its world stage)."""
        from xlviz.runs import world_path

        return world_path(self.path, "tokenizer", language=lang)


def _on_corpus(cfg: dict) -> bool:
    """Whether a run config's source is a corpus source (MONOTRANS's stages there: :func:`xlviz.methods.monotrans.corpus_stages`),
    as the run decides it (the source's kind); a ``transfer-corpus`` run names its corpora instead."""
    from xlviz.data.sources import source_of

    source = cfg.get("source")
    if not isinstance(source, str):
        return "l1_corpus" in cfg or "l2_corpus" in cfg
    try:
        return source_of(source).kind == "corpus"
    except XlvizError:  # a source registered at runtime in the process that ran it
        return source != "world"


def _floor_settings(cfg: dict) -> tuple[str, float | None]:
    """(init, std) of the untrained L2 rows the run's step 2 started from, so of its floor: on a
    corpus source its ``embedding_init`` drawn at the model's ``initializer_range``
    (:func:`xlviz.methods.monotrans.new_l2_model`); on the generated world random rows at its
    ``l2_init_std`` (:func:`xlviz.methods.monotrans.l2_init_model`; absent before it existed:
    those runs drew at ``initializer_range``, None)."""
    if _on_corpus(cfg):
        init = cfg.get("embedding_init")
        return (init if init in ("random", "l1_stats") else "random"), None
    std = cfg.get("l2_init_std")
    return "random", float(std) if isinstance(std, (int, float)) and not isinstance(std, bool) and std > 0 else None


def run_info(run_dir: str | os.PathLike) -> RunInfo:
    """What a run folder offers for analysis: L1 model, transferred L2 models, tokenizers, seed."""
    from xlviz.runs import Run

    path = Path(run_dir).expanduser()
    run = Run(path)
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=path)
    cfg = run.config()
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int):
        raise XlvizError(f"seed must be an integer, got {seed!r}", path=run.config_path, field="seed")
    data = cfg.get("data") if isinstance(cfg.get("data"), dict) else {}  # a corpus source's options (l1, l2, files)
    l1 = next((v for v in (cfg.get("l1"), data.get("l1")) if isinstance(v, str)), "en")
    floor_init, floor_init_std = _floor_settings(cfg)
    from xlviz.runs import artefacts

    found = artefacts(run)
    transferred, toks = {}, {}
    for a in found:  # step 2's plain transferred models (no variant), from the run's manifest
        if a.kind == "stage" and a.role == "transferred" and a.language and a.variant is None and (a.folder / "config.json").is_file():
            transferred[a.language] = a.folder
            if has_tokenizer(a.folder):
                toks[a.language] = a.folder
    from xlviz.runs import world_files

    for lang, d in world_files(run, "tokenizer").items():
        if d.is_dir() and lang != l1 and has_tokenizer(d):
            toks.setdefault(lang, d)
    encoders: dict[str, dict[str, Path]] = {}
    pair_encoders: dict[str, dict[str, Path]] = {}
    languages = {l1, *transferred, *toks}
    depends_on = {str(a.folder): a.depends_on for a in found}
    for a in found:
        folder = a.folder
        if a.kind == "encoder" and a.language in languages and (folder / "config.json").is_file() and has_tokenizer(folder):
            if a.pair is None:
                encoders.setdefault(str(a.system), {})[a.language] = folder
            elif a.pair in languages and a.language == l1:
                pair_encoders.setdefault(str(a.system), {})[a.pair] = folder
    order = [m for m in cfg.get("methods", []) if isinstance(m, str)] if isinstance(cfg.get("methods"), list) else []
    encoders = dict(sorted(encoders.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])))
    l2s = list(dict.fromkeys(list(transferred) + list(toks)))
    if not encoders and not (path / "s1_pretrain" / "config.json").is_file():  # a run of pair models has no step 1
        raise XlvizError("this run has no pre-trained L1 model yet (s1_pretrain); wait for stage 1 to finish", path=path)
    return RunInfo(path, run.name, l1, l2s, seed, transferred, toks, floor_init, floor_init_std, encoders, pair_encoders,
                   depends_on, run.verdicts())


def _l2_check(info: RunInfo, l2: str) -> None:
    if l2 not in info.l2s:
        raise XlvizError(f"the run has no language '{l2}'; it has {', '.join(info.l2s) or 'no L2 yet'}",
                         path=info.path, field="l2")


def run_systems(run_dir: str | os.PathLike, l2: str, floor: bool = True) -> list[System]:
    """Alignment systems of a run for ``l1``-``l2``: "transferred" (s1 on L1, s2_transfer-l2 on
    L2) when step 2 ran, and "floor" (s1 on L1, s1 with untrained L2 embeddings on L2)."""
    info = run_info(run_dir)
    _l2_check(info, l2)
    pairs = info.system_encoders(l2)
    if pairs:  # a bench run: every system's own encoders, exactly the models it scored
        out = []
        for system, (a, b) in pairs.items():
            if floor or system != "floor":
                bad_a, why_a = info.degenerate_for(a)
                bad_b, why_b = info.degenerate_for(b)
                bad = tuple(dict.fromkeys(bad_a + bad_b))
                out.append(System(f"{info.name} · {system}", info.l1, l2, ModelSpec(str(a)), ModelSpec(str(b)), bad,
                                  "; ".join(dict.fromkeys(w for w in (why_a, why_b) if w))))
        return out
    l1_spec = ModelSpec(str(info.s1), None if has_tokenizer(info.s1) else str(info.tokenizer(info.l1)))
    out = []
    if l2 in info.transferred:
        s2 = info.transferred[l2]
        out.append(System(f"{info.name} · transferred", info.l1, l2, l1_spec,
                          ModelSpec(str(s2), None if has_tokenizer(s2) else str(info.l2_tokenizers.get(l2, "")) or None)))
    if floor and l2 in info.l2_tokenizers:
        out.append(System(f"{info.name} · floor", info.l1, l2, l1_spec,
                          ModelSpec(str(info.s1), str(info.l2_tokenizers[l2]), floor_seed=info.seed + 1,
                                    floor_init=info.floor_init, floor_init_std=info.floor_init_std)))
    if not out:
        raise XlvizError(f"no transferred model or L2 tokenizer for '{l2}' yet", path=info.path)
    return out


def run_probe_models(run_dir: str | os.PathLike, l2s: Sequence[str] | None = None, floor: bool = True) -> list[ProbeModel]:
    """Masked LMs of a run to probe: the L1 model on L1 (reference), then per L2 the transferred
    model and the floor."""
    info = run_info(run_dir)
    chosen = list(l2s) if l2s else info.l2s
    for l2 in chosen:
        _l2_check(info, l2)
    l1_spec = ModelSpec(str(info.s1), None if has_tokenizer(info.s1) else str(info.tokenizer(info.l1)))
    # step 1's model: its own verdict decides (it waits only for the data)
    s1_stages = [info.s1.name]
    if info.has_s1:
        out = [info.probe_model(f"{info.name} · L1 model", info.l1, l1_spec, "reference", L1_ON_L1, info.s1, s1_stages)]
    else:  # no step 1 (a run of pair models): each system's own L1 encoder reads L1
        out = [info.probe_model(f"{info.name} · {system}", info.l1, ModelSpec(str(langs[info.l1])), probe_role(system), L1_ON_L1,
                                langs[info.l1]) for system, langs in info.encoders.items() if info.l1 in langs]
    for l2 in chosen:
        pairs = info.system_encoders(l2)
        if pairs:  # a bench run: each system's encoder of the L2, its role from its method
            for system, (a, b) in pairs.items():
                if not floor and system == "floor":
                    continue
                if probe_side(system) == "l1":  # transferred into L1 from this L2's body: probed on L1 data
                    out.append(info.probe_model(f"{info.name} · {system} ({l2} body)", info.l1, ModelSpec(str(a)),
                                                probe_role(system), INTO_L1.format(l2=l2), a))
                else:
                    out.append(info.probe_model(f"{info.name} · {system}", l2, ModelSpec(str(b)), probe_role(system), L2_ON_L2, b))
            continue
        if l2 in info.transferred:
            s2 = info.transferred[l2]
            out.append(info.probe_model(f"{info.name} · transferred", l2,
                                        ModelSpec(str(s2), None if has_tokenizer(s2) else str(info.l2_tokenizers.get(l2, "")) or None),
                                        "transferred", L2_ON_L2, s2))
        if floor and l2 in info.l2_tokenizers:
            out.append(info.probe_model(f"{info.name} · floor", l2, ModelSpec(str(info.s1), str(info.l2_tokenizers[l2]),
                                                                             floor_seed=info.seed + 1, floor_init=info.floor_init,
                                                                             floor_init_std=info.floor_init_std),
                                        "floor", L2_ON_L2, info.s1, s1_stages))
    return out


def probed_and_refused(models: Sequence[ProbeModel]) -> tuple[list[ProbeModel], list[ProbeModel]]:
    """(the models to probe, those refused: built on a degenerate stage, so no result)."""
    return [m for m in models if not m.degenerate], [m for m in models if m.degenerate]


def refused_rows(models: Sequence[ProbeModel]) -> list[dict]:
    """One row per refused model (``verdict: degenerate``, its stages and why) for tables and JSON."""
    return [{"model": m.name, "language": m.language, "role": m.role, "verdict": "degenerate",
             "degenerate_stages": list(m.degenerate), "reason": m.degenerate_reason} for m in models]


# --------------------------------------------------------------------------- data
def parallel_from_texts(text_a: str, text_b: str, lang_a: str = "a", lang_b: str = "b", limit: int | None = None) -> ParallelData:
    """Parallel data from two uploaded texts (one sentence per line, same number of lines)."""
    a, b = [l.strip() for l in text_a.splitlines()], [l.strip() for l in text_b.splitlines()]
    while a and not a[-1]:
        a.pop()
    while b and not b[-1]:
        b.pop()
    if len(a) != len(b):
        raise XlvizError(f"the two files have {len(a)} and {len(b)} lines; they must be line-aligned", field="files")
    rows = [(x, y) for x, y in zip(a, b) if x and y][: limit or None]
    if not rows:
        raise XlvizError("no non-empty line pairs", field="files")
    return ParallelData(lang_a, lang_b, [x for x, _ in rows], [y for _, y in rows], [f"line-{i:05d}" for i in range(len(rows))],
                        "uploaded files")


# --------------------------------------------------------------------------- alignment
def word_vectors(model, tokenizer, words: Sequence[Sequence[str]], max_length: int = 128) -> tuple[np.ndarray, list[int]]:
    """Contextual vectors of every word of pre-split sentences, flattened: ([layers + 1, N, d],
    offsets) where sentence s's word w is row ``offsets[s] + w`` (NaN when cut off)."""
    from xlviz.analysis.representations import word_embeddings_in_context

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*have no tokens.*")
        layers = word_embeddings_in_context(model, tokenizer, [list(w) for w in words], max_length=max_length)
    offsets = np.cumsum([0] + [len(w) for w in words])[:-1].tolist()
    return np.stack([np.concatenate(per_sent, axis=0) for per_sent in layers]), offsets


def sentence_and_word_vectors(model, tokenizer, sentences: Sequence[str], words: Sequence[Sequence[str]], pooling: str = "mean",
                              max_length: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """``sentence_embeddings`` of ``sentences`` and ``word_vectors`` (flattened) of their pre-split
    ``words``, from one forward pass where the words tokenize as the sentences do."""
    from xlviz.analysis.representations import sentence_and_word_embeddings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*have no tokens.*")
        sent, layers = sentence_and_word_embeddings(model, tokenizer, sentences, [list(w) for w in words], pooling=pooling,
                                                    max_length=max_length)
    return sent, np.stack([np.concatenate(per_sent, axis=0) for per_sent in layers])


def alignment_rows(emb_a, emb_b, center: bool = False, train_fraction: float | None = None, seed: int = 0) -> list[dict]:
    """Per-layer retrieval (both directions), CKA and, with ``train_fraction``, held-out
    retrieval before/after an orthogonal map (see ``layerwise_alignment``)."""
    from xlviz.analysis.alignment import layerwise_alignment

    A, B = np.asarray(emb_a), np.asarray(emb_b)
    if A.shape[0] != B.shape[0]:
        raise XlvizError(f"the two models have {A.shape[0] - 1} and {B.shape[0] - 1} layers; per-layer alignment needs "
                         "the same depth (compare models of one architecture)")
    return layerwise_alignment(A, B, center=center, train_fraction=train_fraction, seed=seed)


def word_translation_rows(wa, wb, words_a: Sequence[str], words_b: Sequence[str], gold: Sequence[tuple[str, str]],
                          center: bool = False) -> list[dict]:
    """Per-layer word translation accuracy (both directions) against a gold dictionary, on
    contextual word vectors averaged per word type (``word_translation_accuracy``)."""
    from xlviz.analysis.alignment import word_translation_accuracy

    rows = []
    gold_ba = [(b, a) for a, b in gold]
    for layer in range(wa.shape[0]):
        if wa.shape[2] != wb.shape[2]:
            rows.append({"layer": layer, "word_translation_a_to_b": None, "word_translation_b_to_a": None})
            continue
        ab = word_translation_accuracy(wa[layer], wb[layer], words_a, words_b, gold, center=center)
        ba = word_translation_accuracy(wb[layer], wa[layer], words_b, words_a, gold_ba, center=center)
        rows.append({"layer": layer, "word_translation_a_to_b": ab["accuracy"], "word_translation_b_to_a": ba["accuracy"],
                     "n_words": ab["n_evaluated"]})
    return rows


def _flat(words: Sequence[Sequence[str]]) -> list[str]:
    return [w for s in words for w in s]


def system_alignment(
    model_a, tok_a, model_b, tok_b,
    data: ParallelData,
    pooling: str = "mean",
    center: bool = False,
    train_fraction: float | None = None,
    words: bool = True,
    max_length: int = 128,
    seed: int = 0,
    progress: ReportProgress = None,
) -> list[dict]:
    """Per-layer alignment of one system on parallel data: ``{"layer", "retrieval_a_to_b",
    "retrieval_b_to_a", "cka"}`` (+ before/after Procrustes with ``train_fraction``, + word
    translation accuracy when the data has words and a dictionary and ``words``)."""
    from xlviz.analysis.representations import sentence_embeddings

    if len(data) == 0:
        raise XlvizError("no parallel sentences", field="data")

    def step(lo, hi, text):
        return None if progress is None else (lambda d, t: progress(lo + (hi - lo) * d / max(t, 1), text))

    do_words = words and data.has_words and data.dictionary
    if do_words:  # sentence and word vectors from one forward pass per side
        if progress:
            progress(0.0, f"Encoding {data.lang_a} sentences and words")
        ea, wa = sentence_and_word_vectors(model_a, tok_a, data.src, data.src_words, pooling, max_length)
        if progress:
            progress(0.5, f"Encoding {data.lang_b} sentences and words")
        eb, wb = sentence_and_word_vectors(model_b, tok_b, data.tgt, data.tgt_words, pooling, max_length)
    else:
        ea = sentence_embeddings(model_a, tok_a, data.src, pooling=pooling, max_length=max_length,
                                 progress=step(0.0, 0.5, f"Encoding {data.lang_a} sentences"))
        eb = sentence_embeddings(model_b, tok_b, data.tgt, pooling=pooling, max_length=max_length,
                                 progress=step(0.5, 1.0, f"Encoding {data.lang_b} sentences"))
    rows = alignment_rows(ea, eb, center=center, train_fraction=train_fraction, seed=seed)
    if do_words:
        for row, wrow in zip(rows, word_translation_rows(wa, wb, _flat(data.src_words), _flat(data.tgt_words),
                                                          data.dictionary, center=center)):
            row.update({k: v for k, v in wrow.items() if k != "layer"})
    if progress:
        progress(1.0, "Done")
    return rows


def alignment_report(
    systems: Sequence[System],
    data: ParallelData,
    pooling: str = "mean",
    center: bool = False,
    train_fraction: float | None = None,
    words: bool = True,
    max_length: int = 128,
    seed: int = 0,
    loader: Callable = load_spec,
    progress: ReportProgress = None,
) -> list[dict]:
    """Rows ``{"system", "lang_a", "lang_b", "layer", ...}`` for several systems on one data set."""
    out = []
    for k, sysm in enumerate(systems):
        sub = None if progress is None else (lambda f, t, k=k, n=sysm.name: progress((k + f) / len(systems), f"{n}: {t}"))
        ma, ta = loader(sysm.a, "base")
        mb, tb = loader(sysm.b, "base")
        for row in system_alignment(ma, ta, mb, tb, data, pooling, center, train_fraction, words, max_length, seed, sub):
            out.append({"system": sysm.name, "lang_a": data.lang_a, "lang_b": data.lang_b, **row})
    return out


def run_alignment(
    run_dir,
    l2: str,
    source: str = "world",
    limit: int | None = 1000,
    pooling: str = "mean",
    center: bool = False,
    train_fraction: float | None = None,
    floor: bool = True,
    progress: ReportProgress = None,
    **data_kw,
) -> dict:
    """Transferred vs. floor alignment of a run on its generated world (L1-``l2``):
    ``{"meta": {...}, "rows": [...]}`` with one row per system and layer."""
    systems = run_systems(run_dir, l2, floor=floor)
    data = parallel_data(source, run_dir=run_dir, l2=l2, lang_b=l2, limit=limit, **data_kw)
    rows = alignment_report(systems, data, pooling=pooling, center=center, train_fraction=train_fraction, progress=progress)
    return {"meta": {"run": str(run_dir), "l2": l2, "source": data.source, "n_pairs": len(data), "pooling": pooling,
                     "center": center, "train_fraction": train_fraction, "systems": [s.name for s in systems]},
            "rows": rows}


# --------------------------------------------------------------------------- projection
def translation_projection(
    points_a, points_b, labels_a: Sequence[str], labels_b: Sequence[str], lang_a: str, lang_b: str,
    pairs: Sequence[tuple[int, int]] | None = None, method: str = "pca", seed: int = 0,
) -> list[dict]:
    """2-D coordinates of both languages' vectors projected together, for a scatter plot.

    ``points_a`` [na, d] and ``points_b`` [nb, d] at one layer; ``pairs`` lists (i, j) with
    ``points_a[i]`` translating ``points_b[j]`` (default: row i with row i). Returns rows
    ``{"x", "y", "language", "text", "index", "pair"}``; ``pair`` numbers translation pairs
    (None for unpaired points) so a plot can draw a line between the two ends.
    """
    from xlviz.analysis.projection import project

    A, B = np.asarray(points_a, dtype=np.float64), np.asarray(points_b, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise XlvizError(f"both sides need vectors of one width, got {A.shape} and {B.shape}; "
                         "project models of the same hidden size")
    if pairs is None:
        if len(A) != len(B):
            raise XlvizError("without explicit pairs both sides need the same number of rows")
        pairs = [(i, i) for i in range(len(A))]
    coords = project(np.vstack([A, B]), method=method, seed=seed)
    pa, pb = {}, {}
    for k, (i, j) in enumerate(pairs):
        pa.setdefault(int(i), k)
        pb.setdefault(int(j), k)
    rows = []
    for i in range(len(A)):
        rows.append({"x": float(coords[i, 0]), "y": float(coords[i, 1]), "language": lang_a, "text": labels_a[i],
                     "index": i, "pair": pa.get(i)})
    for j in range(len(B)):
        c = coords[len(A) + j]
        rows.append({"x": float(c[0]), "y": float(c[1]), "language": lang_b, "text": labels_b[j], "index": j, "pair": pb.get(j)})
    return rows


def aligned_words(data: ParallelData, n_sentences: int) -> tuple[list[int], list[int], list[str], list[str], list[tuple[int, int]]]:
    """Flat word rows of the first ``n_sentences`` pairs and their gold alignment, for word plots:
    (rows_a, rows_b, labels_a, labels_b, pairs) where rows index the flat arrays of
    :func:`word_vectors` and pairs index into rows_a / rows_b."""
    if not data.has_words or data.alignment is None:
        raise XlvizError("word-level plots need pre-split words with gold alignment (the generated world)", field="level")
    rows_a, rows_b, la, lb, pairs = [], [], [], [], []
    off_a = off_b = 0
    for s in range(min(n_sentences, len(data))):
        wa, wb = data.src_words[s], data.tgt_words[s]
        ia0, ib0 = len(rows_a), len(rows_b)
        rows_a += [off_a + w for w in range(len(wa))]
        rows_b += [off_b + w for w in range(len(wb))]
        la += [f"{w}  ·  {data.src[s]}" for w in wa]
        lb += [f"{w}  ·  {data.tgt[s]}" for w in wb]
        pairs += [(ia0 + i, ib0 + j) for i, j in data.alignment[s]]
        off_a += len(wa)
        off_b += len(wb)
    return rows_a, rows_b, la, lb, pairs


# --------------------------------------------------------------------------- probing
def agreement_data(data: str, run_dir=None, max_per_category: int | None = None, path=None) -> tuple[str, list[dict]]:
    """(language, minimal pairs) for ``data``: ``"world:<lang>"`` (a run's generated world) or
    ``"marvin-linzen"`` (English, ``../shared/data/syneval/marvin_linzen.tsv.gz`` or ``path``)."""
    from xlviz.analysis.probing import marvin_linzen_pairs

    if data.startswith("world:"):
        lang = data.split(":", 1)[1]
        world = load_run_world(run_dir)
        if lang not in world.languages:
            raise XlvizError(f"the world has no language '{lang}'; it has {', '.join(world.languages)}", field="data")
        pairs = world.agreement_pairs(lang)
        if max_per_category:
            pairs = spread_per_category(pairs, max_per_category)
        return lang, pairs
    if data in ("marvin-linzen", "marvin_linzen", "ml"):
        from xlviz.data.real import read_marvin_linzen

        pairs = marvin_linzen_pairs(read_marvin_linzen(path))
        return "en", spread_per_category(pairs, max_per_category) if max_per_category else pairs
    raise XlvizError(f"unknown agreement data '{data}'; use world:<lang> or marvin-linzen", field="data")


def spread_per_category(pairs: list[dict], n: int) -> list[dict]:
    """At most ``n`` pairs per category, evenly spaced through each category (deterministic).

    Why not the first ``n``: Marvin & Linzen's file lists each category condition by condition
    (all singular subjects first), so a prefix would test one number only.
    """
    by_cat: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_cat.setdefault(p.get("category", "all"), []).append(i)
    keep: set[int] = set()
    for idx in by_cat.values():
        if len(idx) <= n:
            keep.update(idx)
        else:
            keep.update(idx[int(k)] for k in np.linspace(0, len(idx) - 1, n).round().astype(int))
    return [p for i, p in enumerate(pairs) if i in keep]


def sense_data(run_dir, lang: str, limit: int | None = None) -> list[dict]:
    """The generated world's same-word-different-sense pairs in ``lang``."""
    world = load_run_world(run_dir)
    if lang not in world.languages:
        raise XlvizError(f"the world has no language '{lang}'; it has {', '.join(world.languages)}", field="lang")
    pairs = world.sense_pairs(lang)
    return pairs[:limit] if limit else pairs


def agreement_rows(name: str, language: str, result: dict, role: str = "model", data: str = "") -> list[dict]:
    """Flat grid rows (one per category plus "all") from ``agreement_accuracy``'s result."""
    base = {"model": name, "role": role, "language": language, "data": data}
    rows = [{**base, "category": "all", **{k: result[k] for k in ("accuracy", "n_scored", "n_total", "coverage")}}]
    rows += [{**base, **c} for c in result["by_category"]]
    return rows


def wic_rows(name: str, language: str, result: dict, role: str = "model") -> list[dict]:
    """Flat rows (one per layer) from ``word_in_context``'s result."""
    return [{"model": name, "role": role, "language": language, **row} for row in result["layers"]]


def run_probing(
    run_dir,
    l2s: Sequence[str] | None = None,
    tasks: Sequence[str] = ("agreement", "wic"),
    max_per_category: int | None = None,
    n_senses: int | None = None,
    unit: str = "word",
    folds: int = 5,
    floor: bool = True,
    loader: Callable = load_spec,
    progress: ReportProgress = None,
) -> dict:
    """Probe a run's masked LMs on its generated world: the L1 model on L1 (reference), the
    transferred models and the floor on each L2. Returns ``{"meta", "agreement": rows,
    "wic": rows, "agreement_items": {model|lang: items}}`` (rows as in :func:`agreement_rows`,
    :func:`wic_rows`)."""
    from xlviz.analysis.probing import agreement_accuracy, sense_pairs_test_context, word_in_context

    unknown = set(tasks) - {"agreement", "wic"}
    if unknown:
        raise XlvizError(f"unknown task(s) {sorted(unknown)}; use agreement, wic", field="tasks")
    models, refused = probed_and_refused(run_probe_models(run_dir, l2s, floor=floor))
    out: dict = {"meta": {"run": str(run_dir), "models": [f"{m.name} ({m.language})" for m in models],
                          "note": "rows: the L1 model on L1 data (reference); each system's L2 encoder on L2 data; "
                                  "models transferred into L1 (xx→en) on L1 data"},
                 "agreement": [], "wic": [], "agreement_items": {},
                 # built on a degenerate stage: no result, so not probed (the reason says which stage)
                 "degenerate": refused_rows(refused)}
    steps = len(models) * len(tasks)
    k = 0
    for m in models:
        model, tok = loader(m.spec, "mlm")
        for task in tasks:
            sub = None if progress is None else (lambda d, t, k=k, m=m, task=task: progress((k + d / max(t, 1)) / steps,
                                                                                         f"{task}: {m.name} ({m.language})"))
            if task == "agreement":
                _, pairs = agreement_data(f"world:{m.language}", run_dir, max_per_category)
                res = agreement_accuracy(model, tok, pairs, unit=unit, progress=sub)
                out["agreement"] += agreement_rows(m.name, m.language, res, m.role, "generated world")
                out["agreement_items"][f"{m.name}|{m.language}"] = res["items"]
            else:
                pairs = sense_data(run_dir, m.language, n_senses)
                if not sense_pairs_test_context(pairs):  # same sense = same word: it would test word identity
                    out.setdefault("wic_skipped", []).append(f"{m.name} ({m.language})")
                else:
                    res = word_in_context(model, tok, pairs, folds=folds, progress=sub)
                    out["wic"] += wic_rows(m.name, m.language, res, m.role)
            k += 1
    if progress:
        progress(1.0, "Done")
    return out
