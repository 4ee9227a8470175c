"""The Attention page's Renderings tab: one test-set fact of a run's world in every rendering of
the words-versus-order split (English, the L2, the two crossings, English with one feature of
the L2's grammar), and a picked model's attention over a picked rendering with its gold word
alignment to English drawn.

Why: ``xlviz analyse renderings`` says how much F1 each rendering loses; this tab shows what
the model reads in each, sentence by sentence, and where its attention goes when only the
order (or one feature of it) changes. The logic without Streamlit is
:mod:`xlviz.views.renderings` (the renderings, their alignment, which model reads them) and
:mod:`xlviz.views.attention` (the figures); the attention is the page's own
(:func:`xlviz.ui.common.attention`), cached per model and words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from xlviz.views import attention as av
from xlviz.ui.common import attention, file_stamp, guard, max_positions, mixed_attention, plotly, readability_of
from xlviz.ui.common import shares_body
from xlviz.views.text import md_text

# the tab's part of the page's URL (the page adds them to its URL_KEYS)
URL_KEYS = ("att_r_run", "att_r_l2", "att_r_fact", "att_r_item", "att_r_rendering", "att_r_model", "att_r_mode",
            "att_r_layer", "att_r_head", "att_r_hide")
ALONE = "the rendering alone"
PAIR = "with English as one pair"
MIXED = "with English as one pair (each language's embeddings)"
MAX_LENGTH = 128  # a fact's sentence is a few dozen tokens; pairs of them fit


def world_runs() -> list:
    """The runs with a generated world (newest first, as :func:`xlviz.runs.list_runs`)."""
    from xlviz.runs import list_runs, world_path

    return [r for r in list_runs() if world_path(r.path, "world").is_file()]


@st.cache_resource(show_spinner=False, max_entries=8)
def _world(path: str, stamp: str):
    from xlviz.data.world import load_world
    from xlviz.runs import world_folder
    from xlviz.views.renderings import facts_of

    world = load_world(world_folder(path))
    return world, facts_of(world)


def world_and_facts(run_path: str | Path):
    """A run's world and its test facts, once per process and world file."""
    from xlviz.runs import world_path

    return _world(str(run_path), file_stamp(world_path(run_path, "world")))


def _valid(key: str, options: list, default) -> None:
    """A value from an earlier view or the URL that is no longer offered falls back to ``default``."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default


def renderings_tab(models: list, languages: list[str]) -> None:
    """The tab: ``models`` are the sidebar's picked models, ``languages`` its languages."""
    from xlviz.views.choices import default_data_run
    from xlviz.views.renderings import ASKED, STATEMENT, default_reader, fact_renderings, reader_ref

    runs = world_runs()
    if not runs:
        st.info("No run with a generated world: the renderings are the world's facts under other grammars.",
                icon=":material/info:")
        return
    names = [r.name for r in runs]
    if st.session_state.get("att_r_run") not in names:
        # the picked models' own run: its world is what their tokenizers read
        st.session_state["att_r_run"] = default_data_run(names, models)
    c1, c2, c3, c4 = st.columns([2, 1, 5, 2])
    run_name = c1.selectbox("Run", names, key="att_r_run")
    run = runs[names.index(run_name)]
    with guard("Could not read the run's world", stop=True):
        world, facts = world_and_facts(run.path)
    if not world.l2s or not facts:
        st.info("This run's world has no L2 or no test facts.", icon=":material/info:")
        return
    # the L2 the picked models read, else the sidebar's, else the world's first
    wanted = [l for m in models for l in (m.languages() or [])] + list(languages)
    _valid("att_r_l2", world.l2s, next((l for l in wanted if l in world.l2s), world.l2s[0]))
    l2 = c2.selectbox("L2", world.l2s, key="att_r_l2")
    by_id = {f.id: f for f in facts}
    _valid("att_r_fact", list(by_id), facts[0].id)
    fact = by_id[c3.selectbox("Fact of the test set (type to search)", list(by_id), key="att_r_fact",
                              format_func=lambda i: f"{i} — {by_id[i].text}")]
    _valid("att_r_item", fact.items(), STATEMENT)
    item = c4.selectbox("Sentence", fact.items(), key="att_r_item",
                        format_func=lambda t: "the statement" if t == STATEMENT else ASKED.get(t, t))
    with guard("Could not render the fact", stop=True):
        rows = fact_renderings(world, l2, fact, item)

    # which picked model reads which rendering (its tokenizer, on this sentence)
    verdicts = {}
    with guard("Could not check the tokenizers"):
        for r in rows:
            for m in models:
                ref = reader_ref(m, r.words_language)
                if ref is not None:
                    verdicts[r.name, m.key] = readability_of(ref, [r.text], who=f"{m.name}'s tokenizer")
    table = pd.DataFrame({
        "rendering": [r.label for r in rows],
        "sentence": [r.text for r in rows],
        "as English": ["yes" if r.same_as_english else "" for r in rows],
        "read by": [", ".join(m.name for m in models if (v := verdicts.get((r.name, m.key))) and v.ok)
                    or "none of the picked models" for r in rows],
    })
    st.dataframe(table, hide_index=True, key="att_r_table", width="stretch")
    st.caption(f"The same fact in every rendering of {md_text(l2)}'s words-versus-order split (`xlviz analyse "
               "renderings`): only the words, only the order, or only one typological feature of the order differs "
               "from English. “read by”: the picked models whose tokenizer reads that rendering.")

    # --- one rendering through one model -----------------------------------------------------------
    by_name = {r.name: r for r in rows}
    _valid("att_r_rendering", list(by_name), "l2" if "l2" in by_name else rows[0].name)
    c1, c2, c3 = st.columns([3, 3, 3])
    r = by_name[c1.selectbox("Rendering", list(by_name), key="att_r_rendering", format_func=lambda n: by_name[n].label)]
    by_key = {m.key: m for m in models}
    readable = {key: v.ok for (name, key), v in verdicts.items() if name == r.name}
    # a new rendering (or fact) picks the model that reads it; a shared URL's model holds on its first view
    context = f"{run_name}|{l2}|{r.name}"
    if st.session_state.get("_att_r_model_ctx") != context or st.session_state.get("att_r_model") not in by_key:
        from_url = "_att_r_model_ctx" not in st.session_state and st.session_state.get("att_r_model") in by_key
        if not from_url:
            st.session_state["att_r_model"] = default_reader(models, r.words_language, readable)
        st.session_state["_att_r_model_ctx"] = context
    model = by_key[c2.selectbox("Model", list(by_key), key="att_r_model", format_func=lambda k: by_key[k].label,
                                help="The sidebar's picked models; by default the one whose tokenizer reads this "
                                     "rendering (its words' language).")]
    ref = reader_ref(model, r.words_language)
    ref_en = reader_ref(model, world.l1)
    verdict = verdicts.get((r.name, model.key))
    if verdict is not None:
        (st.caption if verdict.ok else st.warning)(md_text(f"{r.label}: {verdict.line}"))
    modes = [ALONE]
    # English beside the rendering only through a model that reads English
    english_read = (v := verdicts.get(("en", model.key))) is not None and v.ok
    if r.name != "en" and ref_en is not None and english_read:
        if ref_en == ref:
            modes.append(PAIR)
        else:
            with guard("Could not compare the two models"):
                if shares_body(ref_en, ref):
                    modes.append(MIXED)
    _valid("att_r_mode", modes, ALONE)
    mode = c3.radio("Feed", modes, key="att_r_mode",
                    help="Alone: the rendering through the model. With English: [CLS] English [SEP] rendering [SEP] "
                         "through one model (a MONOTRANS model's two languages through its shared body, each in its "
                         "own vocabulary), the gold alignment outlined on the map.")
    pair = r.pair()
    with guard("Could not compute attention", stop=True):
        cap = min(MAX_LENGTH, max_positions(ref))
        if mode == ALONE:
            res = attention(ref, pair.words_b, None, cap)
        elif mode == PAIR:
            res = attention(ref, pair.words_a, pair.words_b, cap)
        else:
            res = mixed_attention(ref_en, ref, pair.words_a, pair.words_b, cap)
    if res.truncated:
        st.warning(f"Only the first {len(res.tokens)} of {res.n_tokens_before_truncation} tokens are shown.",
                   icon=":material/content_cut:")

    L, H = res.n_layers, res.n_heads
    c1, c2, c3 = st.columns([2, 2, 2], vertical_alignment="bottom")
    _valid("att_r_layer", list(range(L)), L - 1)
    layer = c1.selectbox("Layer", range(L), key="att_r_layer")
    heads = ["mean of heads"] + list(range(H))
    _valid("att_r_head", heads, "mean of heads")
    head = c2.selectbox("Head", heads, key="att_r_head")
    hide = c3.toggle("Hide special tokens", value=True, key="att_r_hide",
                     help="Drop [CLS]/[SEP]-like tokens and renormalise each row over the rest.")

    st.markdown(f"**Gold word alignment**, English ↔ {md_text(r.label)} ({len(pair.alignment)} aligned words; "
                "a slanted line is a word the rendering moved)")
    # an iframe, as the head view: st.html's sanitiser drops SVG (texts are escaped in the drawing)
    short = {"words": f"{l2} words", "order": f"{l2} order", "l2": l2}.get(r.name, r.name)
    st.iframe(av.alignment_html(pair.words_a, pair.words_b, pair.alignment, "English", short), height=120)
    from xlviz.analysis.attention import aligned_attention_share, attention_slice

    mean = head == "mean of heads"
    sl = attention_slice(res, layers=[layer], heads=None if mean else [head], hide_special=hide, average_heads=mean)
    marks = av.aligned_cells(sl.segment, sl.word_ids, pair.alignment) if mode != ALONE else None
    title = f"{r.label} · {model.name} · layer {layer} · " + ("mean of heads" if mean else f"head {head}")
    c1, c2 = st.columns([1, 1])
    with c1:
        st.iframe(av.head_view_html(sl.attentions[0, 0], sl.tokens, sl.segment), height=60 + 22 * len(sl.tokens))
    with c2:
        plotly(av.heatmap(sl.attentions[0, 0], sl.tokens, sl.segment, title, marks=marks), key="att_r_heat", vega=True)
    if mode != ALONE and pair.alignment:
        with guard("Could not compute the aligned-word share"):
            share = aligned_attention_share(res, pair.alignment, hide_special=hide)
            here = float(np.nanmean(share[layer])) if mean else float(share[layer, head])
            st.caption(f"Outlined: the gold alignment's cells. Share of attention an aligned word gives its partner "
                       f"here: {here:.2f} (mean over layers and heads {np.nanmean(share):.2f}).")


__all__ = ["renderings_tab", "world_runs", "world_and_facts", "URL_KEYS"]
