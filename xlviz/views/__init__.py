"""xlviz from a notebook: the app's figures as plotly figures and HTML, without Streamlit.

Each function draws what a page draws, with the page's own figure functions
(:mod:`xlviz.views.figures`, :mod:`xlviz.views.xquad`, :mod:`xlviz.ui.attention_view`), so a
notebook and the app never disagree::

    import xlviz.views as xv
    xv.head_view("checkpoints/demo/encoders/monotrans-en", "the cat sees the dog")  # HTML
    xv.model_view("checkpoints/demo/encoders/monotrans-en", "the cat sees the dog")  # plotly
    xv.retrieval("checkpoints/demo", "sov")                                           # plotly
    xv.xquad_comparison("checkpoints/demo", "sov")                                    # tables + cards
    xv.projector("checkpoints/demo", "sov", query="cat")                              # systems in one space

A *model* is a model folder or hub id (its tokenizer beside it, else ``tokenizer=``), or a
``(model, tokenizer)`` pair already loaded. A *run* is a run folder. Nothing here imports
Streamlit; models are loaded once per process (an LRU cache keyed by the folder's files).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

__all__ = ["HTML", "head_view", "model_view", "cross_language_attention", "retrieval", "cka", "projection",
           "xquad_comparison", "XQuADComparison", "neuron_view", "projector", "ProjectorView", "salience"]


class HTML(str):
    """An HTML fragment that notebooks render (``_repr_html_``) and that is still a ``str``."""

    def _repr_html_(self) -> str:
        return str(self)


# --------------------------------------------------------------------------- models
def _stamp(path: str) -> tuple:
    p = Path(path).expanduser()
    try:
        return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in sorted(p.iterdir()) if f.is_file())
    except OSError:
        return ()


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, tokenizer: str | None, task: str, stamp: tuple):
    from xlviz.models.loading import load_model

    # new_head="ok" for QA, as the app: a folder without a QA head still answers
    model, tok = load_model(os.path.expanduser(path), task=task, attn_implementation="eager",
                            tokenizer=os.path.expanduser(tokenizer) if tokenizer else None,
                            new_head="ok" if task == "qa" else None)
    model.eval()
    return model, tok


def _model(model: Any, tokenizer: str | os.PathLike | None = None, task: str = "base"):
    """``(model, tokenizer)`` from a folder / hub id, or a pair given as is."""
    if isinstance(model, tuple) and len(model) == 2:
        return model
    path = str(model)
    return _load_cached(path, str(tokenizer) if tokenizer else None, task, _stamp(path))


def _layer(layer: object, n: int, what: str = "the model") -> int:
    """``layer`` as an index in ``range(n)`` (negative counts from the top), else one
    XlvizError: a layer the model does not have is never wrapped around onto one it has."""
    from xlviz.errors import XlvizError

    if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
        raise XlvizError(f"no layer {layer!r}; {what} has layers 0 to {n - 1} (negative counts from the top)", field="layer")
    return layer % n


# --------------------------------------------------------------------------- attention
def _attention(model, sentence_a, sentence_b, tokenizer, max_length: int):
    from xlviz.analysis.attention import attention_maps

    m, tok = _model(model, tokenizer)
    return attention_maps(m, tok, sentence_a, sentence_b, max_length=max_length)


def head_view(model: Any, sentence_a: str, sentence_b: str | None = None, *, layer: int = -1, head: int | None = None,
              hide_special: bool = True, tokenizer: str | os.PathLike | None = None, max_length: int = 128) -> HTML:
    """The Attention page's head view (as bertviz): queries left, keys right, one line per weight.

    ``layer`` (negative counts from the top) and ``head`` (None: mean of the heads) pick the map;
    ``sentence_b`` feeds the pair as one input so attention can cross between the sentences.
    """
    from xlviz.analysis.attention import attention_slice
    from xlviz.ui.attention_view import head_view_html

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    layer = _layer(layer, res.n_layers)
    sl = attention_slice(res, layers=[layer], heads=None if head is None else [head], hide_special=hide_special,
                         average_heads=head is None)
    return HTML(head_view_html(sl.attentions[0, 0], sl.tokens, sl.segment))


def model_view(model: Any, sentence_a: str, sentence_b: str | None = None, *, layers: Sequence[int] | None = None,
               hide_special: bool = True, tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """The Attention page's model view: one small map per layer (rows) and head (columns), each
    labelled ``"L3 H2"``, all layers unless ``layers`` is given. A plotly figure; each thumbnail's
    click target carries ``customdata`` ``[layer, head]`` (the page opens that head on a click)."""
    from xlviz.analysis.attention import attention_slice
    from xlviz.ui.attention_view import overview
    from xlviz.views.figures import tidy

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    sl = attention_slice(res, layers=sorted(layers) if layers is not None else None, heads=None, hide_special=hide_special)
    return tidy(overview(sl.attentions, sl.layers, sl.heads, segment=sl.segment))


def cross_language_attention(model: Any, sentence_a: str, sentence_b: str, *, hide_special: bool = True,
                             tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """Per layer and head, the share of attention that goes to the other sentence when a
    translation pair is read as one input (VECO's Fig. 1 question). A plotly heatmap."""
    from xlviz.analysis.attention import cross_attention_share
    from xlviz.ui.attention_view import share_heatmap
    from xlviz.views.figures import tidy

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    share = cross_attention_share(res, hide_special=hide_special)
    return tidy(share_heatmap(share, "share of attention to the other sentence"))


# --------------------------------------------------------------------------- alignment of a run
def _systems(run, l2: str, systems: Sequence[str] | None):
    from xlviz.analysis.reports import run_systems
    from xlviz.errors import XlvizError

    found = run_systems(run, l2)
    if systems is None:
        return found
    by_short = {s.name.rsplit(" · ", 1)[-1]: s for s in found}
    missing = [s for s in systems if s not in by_short]
    if missing:
        raise XlvizError(f"no system {missing[0]!r} for {l2} in this run; it has {sorted(by_short)}", path=run, field="systems")
    return [by_short[s] for s in systems]


def _run_stamp(run) -> str:
    p = Path(run) / "status.json"
    try:
        return str(p.stat().st_mtime_ns)
    except OSError:
        return ""


def _alignment_rows(run, l2: str, systems, pooling: str, limit: int | None, max_length: int, center: bool):
    return _alignment_cached(str(Path(run).expanduser()), l2, tuple(systems) if systems is not None else None, pooling,
                             limit, int(max_length), bool(center), _run_stamp(Path(run).expanduser()))


@functools.lru_cache(maxsize=8)
def _alignment_cached(run: str, l2: str, systems: tuple | None, pooling: str, limit: int | None, max_length: int,
                      center: bool, stamp: str):
    """Rows of ``xlviz.analysis.reports.alignment_report`` (the page's numbers) and the data."""
    from xlviz.analysis.reports import alignment_report, parallel_data

    chosen = _systems(run, l2, systems)
    data = parallel_data("world", run_dir=run, l2=l2, lang_b=l2, limit=limit)
    rows = alignment_report(chosen, data, pooling=pooling, center=center, words=False, max_length=max_length, loader=_spec)
    return rows, data, chosen


def _spec(spec, task: str = "base"):
    """``xlviz.models.reference.load_spec`` (the pages' loader: floors included), cached."""
    return _spec_cached(spec, task, spec.stamp())


@functools.lru_cache(maxsize=8)
def _spec_cached(spec, task: str, stamp: str):
    from xlviz.models.reference import load_spec

    model, tok = load_spec(spec, task)
    model.eval()
    return model, tok


def _colours(names: Sequence[str]) -> dict[str, str]:
    from xlviz.ui.colours import label_colours, system_colours

    return label_colours(list(names), system_colours())


def retrieval(run: str | os.PathLike, l2: str, systems: Sequence[str] | None = None, *, pooling: str = "mean",
              limit: int | None = 500, max_length: int = 128, center: bool = False):
    """The Alignment page's retrieval chart for a run's L1-``l2`` parallel pairs: per layer, how
    often a sentence's nearest neighbour (cosine) in the other language is its translation, both
    directions. ``systems``: the run's systems by name (``["monotrans", "floor"]``), default all."""
    from xlviz.views.figures import retrieval_figure, retrieval_long, tidy

    rows, data, chosen = _alignment_rows(run, l2, systems, pooling, limit, max_length, center)
    long_rows = retrieval_long(rows, data.lang_a, data.lang_b)
    return tidy(retrieval_figure(long_rows, _colours([s.name for s in chosen])))


def cka(run: str | os.PathLike, l2: str, systems: Sequence[str] | None = None, *, pooling: str = "mean",
        limit: int | None = 500, max_length: int = 128):
    """The Alignment page's linear CKA chart (L1 vs ``l2`` sentence vectors, per layer)."""
    from xlviz.views.figures import cka_figure, tidy

    rows, _, chosen = _alignment_rows(run, l2, systems, pooling, limit, max_length, False)
    return tidy(cka_figure(rows, _colours([s.name for s in chosen])))


def projection(run: str | os.PathLike, l2: str, system: str | None = None, *, layer: int = -1, method: str = "pca",
               n: int = 150, pooling: str = "mean", max_length: int = 128):
    """The Alignment page's projection: the first ``n`` parallel sentences of both languages at
    one layer, projected together (``"pca"`` or ``"umap"``), lines joining translations."""
    from xlviz.analysis.reports import parallel_data, translation_projection
    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.views.figures import projection_axes, projection_figure, tidy

    run = str(Path(run).expanduser())
    chosen = _systems(run, l2, [system] if system else None)[0]
    data = parallel_data("world", run_dir=run, l2=l2, lang_b=l2, limit=n)
    ma, ta = _spec(chosen.a)
    mb, tb = _spec(chosen.b)
    ea = sentence_embeddings(ma, ta, data.src, pooling=pooling, max_length=max_length)
    eb = sentence_embeddings(mb, tb, data.tgt, pooling=pooling, max_length=max_length)
    layer = _layer(layer, min(ea.shape[0], eb.shape[0]), "these vectors (0: the embeddings)")
    pa, pb = ea[layer], eb[layer]
    pts = translation_projection(pa, pb, list(data.src), list(data.tgt), data.lang_a, data.lang_b, None, method=method.lower())
    label = "PCA" if method.lower() == "pca" else "UMAP"
    return tidy(projection_figure(pts, f"{chosen.name} · layer {layer} · {label} of sentences",
                                  axes=projection_axes(method, pa, pb)))


# --------------------------------------------------------------------------- XQuAD
@dataclass
class XQuADComparison:
    """A run's systems answering its generated test questions in L1 and ``lang``.

    ``rows``: one row per (question, language, system) with EM/F1 (the XQuAD page's CSV);
    ``exact_match`` / ``f1``: system × language means (its tables); ``card(qid)``: one question
    side by side (its cards). Renders in a notebook as the two tables.
    """

    rows: Any
    exact_match: Any
    f1: Any
    languages: list[str]
    examples: dict = field(repr=False, default_factory=dict)
    predictions: dict = field(repr=False, default_factory=dict)
    articles: dict = field(repr=False, default_factory=dict)
    colours: dict = field(repr=False, default_factory=dict)

    @property
    def ids(self) -> list[str]:
        """The question ids every language has, in file order."""
        from xlviz.ui.qa import shared_ids

        return shared_ids(self.examples)

    def card(self, qid: str, lang: str | None = None) -> HTML:
        """The question ``qid`` as the page's cards: one per language (or only ``lang``)."""
        from xlviz.ui.qa import index_by_id
        from xlviz.views.xquad import question_card

        out = []
        for lg in [lang] if lang else self.languages:
            ex = index_by_id(self.examples[lg]).get(qid)
            if ex is None:
                continue
            names = [m for (m, l) in self.predictions if l == lg]
            answers = [(m, self.predictions[(m, lg)].get(qid)) for m in names]
            out.append(question_card(lg, ex, answers, self.colours, self.articles.get(lg)))
        return HTML('<div style="display:flex;gap:1rem;flex-wrap:wrap">' + "".join(
            f'<div style="flex:1;min-width:18rem">{c}</div>' for c in out) + "</div>")

    def _repr_html_(self) -> str:
        return ("<b>Exact match (%)</b>" + self.exact_match.to_html(float_format="%.1f", na_rep="n/a")
                + "<b>F1 (%)</b>" + self.f1.to_html(float_format="%.1f", na_rep="n/a"))


def xquad_comparison(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None,
                     limit: int | None = None) -> XQuADComparison:
    """The XQuAD page for a run: its systems' QA exports answering the run's generated test set
    in L1 and ``lang``, scored as ``results.json`` (the language's own articles stripped). The
    run's saved predictions are used where it saved them; otherwise each export answers with the
    run's decoding settings."""
    from xlviz.data.squad import language_articles, load_squad, read_squad_json
    from xlviz.errors import XlvizError
    from xlviz.runs import Run, artefact, exports, world_path
    from xlviz.ui.choices import run_languages
    from xlviz.ui.qa import read_saved_predictions, run_decoding, saved_predictions_file, prediction_rows, score_matrix, shared_ids

    r = Run(Path(run).expanduser())
    langs = run_languages(r)
    if lang not in langs:
        raise XlvizError(f"the run has no language {lang!r}; it has {langs}", path=r.path, field="lang")
    languages = list(dict.fromkeys([langs[0], lang]))
    found = sorted({str(a.system) for a in exports(r)})
    chosen = list(systems) if systems is not None else found
    if not chosen or any(s not in found for s in chosen):
        raise XlvizError(f"no QA export for {[s for s in chosen if s not in found] or 'any system'}; the run exported {found}",
                         path=r.path / "export", field="systems")
    examples, articles, predictions = {}, {}, {}
    for lg in languages:
        file = world_path(r, "qa", split="test", language=lg)
        examples[lg] = load_squad(file)
        articles[lg] = language_articles(read_squad_json(file), file)
    ids = shared_ids(examples)[: limit or None]
    for system in chosen:
        for lg in languages:
            exported = artefact(r, "export", system=system, language=lg)
            if exported is None or not exported.folder.is_dir():
                continue
            folder = exported.folder
            file = world_path(r, "qa", split="test", language=lg)
            saved = saved_predictions_file(folder, file)
            if saved is not None:
                predictions[(system, lg)] = read_saved_predictions(saved, ids)
            else:
                from xlviz.evaluation.qa_predict import predict_qa

                m, tok = _model(folder, None, "qa")
                dec = run_decoding(folder, int(getattr(m.config, "max_position_embeddings", 512) or 512))
                keep = set(ids)
                predictions[(system, lg)] = predict_qa(m, tok, [e for e in examples[lg] if e.id in keep],
                                                       max_length=dec.max_length, doc_stride=dec.doc_stride,
                                                       max_answer_length=dec.max_answer_length)
    rows = prediction_rows(examples, predictions, ids, articles=articles)
    return XQuADComparison(rows, score_matrix(rows, "exact_match", chosen, languages), score_matrix(rows, "f1", chosen, languages),
                           languages, examples, predictions, articles, _colours(chosen))


# --------------------------------------------------------------------------- neuron view
def neuron_view(model: Any, text: str, layer: int, head: int, token: int | str, *, text_b: str | None = None,
                tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """bertviz's neuron view, as the Attention page draws it: for query ``token`` (a position
    counting [CLS], negative from the end, or the token's text) of ``head`` in ``layer``
    (negative counts from the top), the query q, every key k_j, the products q ⊙ k_j, the scores
    q·k_j/√d and their softmax (the head's attention weights). A plotly figure."""
    from xlviz.analysis.attention import query_key_vectors
    from xlviz.ui.attention_view import neuron_figure
    from xlviz.views.figures import tidy

    m, tok = _model(model, tokenizer)
    qk = query_key_vectors(m, tok, text, text_b, max_length=max_length)
    return tidy(neuron_figure(qk.neuron(layer, head, token)))


# --------------------------------------------------------------------------- projector
@dataclass
class ProjectorView:
    """The Alignment page's projector: ``figure`` (plotly: colour = system, marker = language,
    search matches ringed, the selected point starred with its neighbours ringed), ``points``
    (one row per point: system, language, sentence, text, x, y, match), ``neighbours`` (the
    selected point's nearest points by cosine in the original vectors; ``translation`` marks
    its own translation). ``neighbours_of(point)`` asks for another point."""

    figure: Any
    points: Any
    neighbours: Any
    point: int
    data: Any = field(repr=False, default=None)

    def neighbours_of(self, point, k: int = 10, among: str = "system"):
        """Neighbours of ``point``: a row number of ``points`` or ``(system, language, sentence)``."""
        import pandas as pd

        from xlviz.views.embeddings import neighbours

        return pd.DataFrame(neighbours(self.data, _projector_point(self.data, point), k, among))


def _projector_point(proj, point) -> int:
    from xlviz.errors import XlvizError

    if point is None:
        return 0
    if isinstance(point, int) and not isinstance(point, bool):
        if not 0 <= point < len(proj.rows):
            raise XlvizError(f"no point {point}; there are {len(proj.rows)}", field="point")
        return point
    try:
        system, language, index = point
    except (TypeError, ValueError):
        raise XlvizError(f"a point is a row number or (system, language, sentence), got {point!r}", field="point") from None
    for i, r in enumerate(proj.rows):
        if system in (r["system"], r["system"].rsplit(" · ", 1)[-1]) and r["language"] == language and r["index"] == index:
            return i
    raise XlvizError(f"no point {point!r} in the projector", field="point")


def _two_sides(value) -> tuple:
    """A model for each language: ``(model_a, model_b)`` given as two folders (or two loaded
    pairs), else one model reading both languages (a folder, or a ``(model, tokenizer)`` pair)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (str, os.PathLike, tuple)):
        return value
    return value, value


def projector(run_or_models, lang: str, systems: Sequence[str] | None = None, *, sentences=None, lang_a: str = "en",
              layer: int = -1, method: str = "pca", n: int = 150, query: str = "", point=None, k: int = 10,
              among: str = "system", pooling: str = "mean", max_length: int = 128) -> ProjectorView:
    """Several systems' sentence vectors of one parallel set in one 2-D space (the Alignment
    page's projector), with a search (``query``: case ignored, literal text) and the nearest
    neighbours of ``point`` (cosine in the original vectors).

    ``run_or_models``: a run folder (its L1-``lang`` parallel pairs, its systems; ``systems``
    picks some by name) or a dict ``{name: model or (model_a, model_b)}`` with ``sentences=
    (texts_a, texts_b)`` (line i translates line i; ``lang_a`` names side A). All systems need
    one hidden size; others are left out (``points`` does not have them; the figure title says so).
    """
    import pandas as pd

    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.errors import XlvizError
    from xlviz.views.figures import tidy
    from xlviz.views.embeddings import Block, build, figure, neighbour_points, neighbours

    encoders = []  # (name, (model, tok) of side A, (model, tok) of side B)
    if isinstance(run_or_models, dict):
        if sentences is None or len(sentences) != 2:
            raise XlvizError("models need sentences=(texts_a, texts_b), the parallel set to project", field="sentences")
        src, tgt = list(sentences[0])[:n], list(sentences[1])[:n]
        if len(src) != len(tgt) or not src:
            raise XlvizError(f"sentences: {len(src)} and {len(tgt)} lines; both sides need the same number (> 0)",
                             field="sentences")
        names = list(systems) if systems is not None else list(run_or_models)
        for name in names:
            if name not in run_or_models:
                raise XlvizError(f"no model {name!r}; there are {sorted(run_or_models)}", field="systems")
            a, b = _two_sides(run_or_models[name])
            encoders.append((str(name), lambda a=a: _model(a), lambda b=b: _model(b)))
        la, lb = lang_a, lang
    else:
        from xlviz.analysis.reports import parallel_data

        run = str(Path(run_or_models).expanduser())
        chosen = _systems(run, lang, systems)
        data = parallel_data("world", run_dir=run, l2=lang, lang_b=lang, limit=n)
        src, tgt, la, lb = list(data.src), list(data.tgt), data.lang_a, data.lang_b
        encoders = [(s.name, lambda s=s: _spec(s.a), lambda s=s: _spec(s.b)) for s in chosen]
    blocks, layers = [], []
    for name, load_a, load_b in encoders:
        ea = sentence_embeddings(*load_a(), src, pooling=pooling, max_length=max_length)
        eb = sentence_embeddings(*load_b(), tgt, pooling=pooling, max_length=max_length)
        layers.append(min(ea.shape[0], eb.shape[0]))
        blocks.append((name, ea, eb))
    n_layers = min(layers)
    if not -n_layers <= layer < n_layers:
        raise XlvizError(f"no layer {layer}; the systems have layers 0 to {n_layers - 1}", field="layer")
    layer = layer % n_layers
    proj = build([b for name, ea, eb in blocks for b in (Block(name, la, "a", src, ea[layer]), Block(name, lb, "b", tgt, eb[layer]))],
                 method=method, query=query)
    chosen_point = _projector_point(proj, point)
    near = neighbour_points(proj, chosen_point, k, among)
    label = "PCA" if proj.method == "pca" else "UMAP"
    title = f"{len(blocks)} system{'s' if len(blocks) > 1 else ''} · layer {layer} · {label} of sentences"
    if proj.left_out:
        from xlviz.ui.text import plot_text

        title += f" (left out, another width: {plot_text(', '.join(proj.left_out))})"
    fig = tidy(figure(proj, _colours([name for name, _, _ in blocks]), title, selected=chosen_point, near=near))
    points = pd.DataFrame([{"system": r["system"], "language": r["language"], "sentence": r["index"], "text": r["text"],
                            "x": r["x"], "y": r["y"], "match": r["match"]} for r in proj.rows])
    return ProjectorView(fig, points, pd.DataFrame(neighbours(proj, chosen_point, k, among)), chosen_point, proj)


# --------------------------------------------------------------------------- why this answer
def salience(model: Any, question: str, context: str, *, answer: tuple[int, int] | None = None, target: str = "total",
             tokenizer: str | os.PathLike | None = None, n_steps: int = 32, max_length: int | None = None,
             doc_stride: int | None = None, max_answer_length: int | None = None) -> HTML:
    """The XQuAD page's "Why this answer": integrated gradients of the answer's start and end
    logits over the word embeddings ([PAD] baseline, special tokens kept), the question and
    context shaded per token. HTML; its ``.salience`` holds the raw per-token values
    (:class:`xlviz.analysis.salience.Salience`: ``tokens``, ``start``, ``end``, deltas).

    ``model``: a QA model folder (a run's export is decoded with its run's settings) or a
    ``(model, tokenizer)`` pair; ``answer``: the character span to explain in ``context``
    (None: the model's own answer); ``target``: ``"total"`` (start + end), ``"start"`` or ``"end"``.
    """
    from xlviz.analysis.salience import integrated_gradients
    from xlviz.ui.qa import Decoding, run_decoding
    from xlviz.ui.salience_view import salience_html

    m, tok = _model(model, tokenizer, "qa")
    max_pos = int(getattr(getattr(m, "config", None), "max_position_embeddings", 512) or 512)
    if isinstance(model, tuple):  # no folder, so no run: SQuAD's settings capped by the model's positions
        length = min(384, max_pos)
        dec = Decoding(length, max(16, min(128, length // 3)), 30, "SQuAD defaults")
    else:
        dec = run_decoding(str(model), max_pos)
    sal = integrated_gradients(m, tok, question, context, answer=answer, n_steps=n_steps,
                               max_length=max_length or dec.max_length, doc_stride=doc_stride or dec.doc_stride,
                               max_answer_length=max_answer_length or dec.max_answer_length)
    out = HTML(salience_html(sal, target))
    out.salience = sal
    return out


# --------------------------------------------------------------------------- metrics by slice
from xlviz.views.slices import SliceView, slices  # noqa: E402  (a module of its own; re-exported here)

__all__ += ["SliceView", "slices"]
from xlviz.views.patching import PatchingView, patching  # noqa: E402

__all__ += ["PatchingView", "patching"]
from xlviz.views.renderings import QuestionRenderingsView, RenderingsView, renderings  # noqa: E402


def renderings_of_question(run: str | os.PathLike, lang: str, qid: str, systems: Sequence[str] | None = None) -> "QuestionRenderingsView":
    """Question ``qid`` of a run's generated test set in every rendering for the L2 ``lang``,
    answered by each system's QA exports (its English export reads English words, its ``lang``
    export the L2's), decoded with the run's settings: the XQuAD page's "Renderings"."""
    import pandas as pd
    from pathlib import Path

    from xlviz.analysis.patching_report import _exports
    from xlviz.views.renderings import QuestionRenderingsView, answer_rendering, answer_rows, question_renderings, run_decoding_of
    from xlviz.data.world import load_world
    from xlviz.runs import world_folder

    run = Path(run).expanduser()
    world = load_world(world_folder(run))
    rs = question_renderings(world, lang, qid)
    chosen = _exports(run, lang, list(systems) if systems else None)
    answers = []
    for system, (en_dir, l2_dir) in chosen.items():
        folders = {world.l1: en_dir, lang: l2_dir}
        for r in rs:
            model, tok = _model(folders[r.reader], None, "qa")
            answers.append(answer_rendering(model, tok, r, run_decoding_of(folders[r.reader], model), system))
    return QuestionRenderingsView(rs, answers, pd.DataFrame(answer_rows(answers, rs)), _colours(list(chosen)))



__all__ += ["RenderingsView", "renderings", "QuestionRenderingsView", "renderings_of_question"]
