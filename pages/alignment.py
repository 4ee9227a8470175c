"""Alignment: do translations sit near each other in the model's representation space, layer by layer?

Data: parallel sentences from a run's generated world (with gold dictionary and word alignment),
PUD (by sentence id), Tatoeba, Multi30k task 1 validation, or two uploaded files. Systems: a run's
transferred model (L1 model on L1, L2 embeddings on L2) and its floor (untrained L2 embeddings),
the sidebar's models, or any two models. Shows per-layer retrieval (both directions), linear CKA
and word translation accuracy, a 2-D projection with lines between translations, a projector
(several systems in one space: search, nearest neighbours of a point), and post-hoc
orthogonal alignment (Wu et al. 2020). Numbers come from ``xlviz.analysis`` (as ``xlviz analyse
alignment``). Opens preset to a run with ``?run=NAME&l2=L2``.
"""

import os

import pandas as pd
import streamlit as st

from xlviz.analysis import encodings as enc
from xlviz.analysis.reports import System, aligned_words, run_systems
from xlviz.models.reference import ModelSpec
from xlviz.ui import analysis as ua
from xlviz.views.choices import default_data_run, default_rows
from xlviz.views.colours import label_colours, system_colours
from xlviz.analysis.readability import at_chance, chance_line
from xlviz.ui.common import NA, guard, plotly, readability_of, refused_warning, shared_figure
from xlviz.ui.sidebar import current, page_setup
from xlviz.views import figures as vf
from xlviz.ui.state import checked_float, keep, picks_in_context, url_state, write_url
from xlviz.views.text import md_join, md_text
from xlviz.ui.tables import ALIGNMENT_RULES, number_config

page_setup()

POOLINGS = {"mean": "mean of all tokens", "mean_no_special": "mean without special tokens", "cls": "first token ([CLS])"}
PAGE = "alignment"

# the view lives in the URL (bookmark, share, reload): data, systems, pooling and the projection
URL_KEYS = ("al_source", "al_run", "al_l2", "al_systems", "al_pooling", "al_center", "al_max_len", "al_tab",
            "al_proj_system", "al_proj_layer", "al_proj_method", "al_proj_level",
            "al_pj_on", "al_pj_systems", "al_pj_layer", "al_pj_method", "al_pj_n", "al_pj_query", "al_pj_point",
            "al_pj_among", "al_pj_k")
url_state(PAGE, URL_KEYS)
# the projection's widgets vanish while no system is picked; their choices must come back with it
keep("al_proj_system", "al_proj_layer", "al_proj_method", "al_proj_level", "al_train_frac")
keep("al_pj_on", "al_pj_systems", "al_pj_layer", "al_pj_method", "al_pj_n", "al_pj_query", "al_pj_point", "al_pj_among",
     "al_pj_k")

st.title("Alignment across languages")
st.caption("Per layer: does a sentence's nearest neighbour (cosine) in the other language turn out to be its "
           "translation, how similar are the two languages' representations (linear CKA), and does a word's nearest "
           "word in the other language match the gold dictionary. Accuracies in %.")
sel = current()
runs = ua.analysable_runs()

# --- preset from the Runs page's link: ?run=NAME&l2=L2 -----------------------------------------------
p_run, p_l2, p_msg = ua.query_preset(PAGE, runs)
if p_msg:
    st.warning(md_text(p_msg), icon=":material/link_off:")  # names from the URL
if p_run is not None:
    st.session_state["al_source"] = ua.run_pairs_label()
    st.session_state["al_run"] = p_run.name
    if p_l2:
        st.session_state["al_l2"] = p_l2
    if "al_systems" not in st.query_params:  # a full URL (bookmark, reload) keeps its systems
        st.session_state.pop("al_systems", None)  # defaults: transferred and floor of that run

# --- data --------------------------------------------------------------------------------------------
# every parallel-text source of the registry that can be read here (xlviz.data.parallel); a
# run's pairs when a run has them, two uploaded files always
by_label = {("Upload" if s.takes == "files" else s.label): s for s in ua.parallel_sources()
            if (s.takes != "run" or runs)}
sources = list(by_label)
if st.session_state.get("al_source") not in sources:
    st.session_state["al_source"] = sources[0]
label = st.segmented_control("Parallel sentences from", sources, key="al_source", required=True)
psource = by_label[label]

run = None
data = None
with guard("Could not read the parallel sentences", stop=True):
    if psource.takes == "run":
        c1, c2, c3 = st.columns([3, 1, 1])
        names = [r.name for r in runs]
        if st.session_state.get("al_run") not in names:  # the picked models' own run, never the newest other run
            st.session_state["al_run"] = default_data_run(names, sel.models)
        run_name = c1.selectbox("Run", names, key="al_run", help="Runs with a pre-trained L1 model and parallel pairs: "
                                "the generated world's (with gold dictionary and word alignment), or those a run on "
                                "real corpora saved.")
        run = next(r for r in runs if r.name == run_name)
        l2_opts = [l for l in run.l2s if run.has_parallel(l)]
        if st.session_state.get("al_l2") not in l2_opts:
            st.session_state["al_l2"] = l2_opts[0]
        l2 = c2.selectbox("Target language", l2_opts, key="al_l2")
        limit = c3.number_input("Pairs", min_value=4, max_value=5000, value=enc.PAIRS, step=100, key="al_limit_world")
        data = ua.parallel(psource.name, str(run.path), l2, limit=int(limit))
        ua.sync_query(PAGE, run.name, l2)
    elif psource.takes == "files":
        c1, c2 = st.columns(2)
        up_a = c1.file_uploader("Sentences in language A (one per line)", type=["txt"], key="al_up_a")
        up_b = c2.file_uploader("Their translations in language B (same lines)", type=["txt"], key="al_up_b")
        la = c1.text_input("Language A code", value="a", key="al_up_la")
        lb = c2.text_input("Language B code", value="b", key="al_up_lb")
        if up_a is None or up_b is None:
            st.info("Upload two line-aligned text files: line i of one translates line i of the other.")
            st.stop()
        data = ua.parallel_uploaded(up_a.getvalue().decode("utf-8", "replace"), up_b.getvalue().decode("utf-8", "replace"),
                                    la.strip() or "a", lb.strip() or "b", 2000)
    else:  # a source of the shared data: its languages, then the other side's
        c1, c2, c3 = st.columns(3)
        langs = ua.source_languages(psource.name)
        la = c1.selectbox("Language A", langs, index=langs.index(psource.default_a) if psource.default_a in langs else 0,
                          key=f"al_{psource.name}_a", disabled=len(langs) == 1)
        others = ua.source_partners(psource.name, la)
        lb = c2.selectbox("Language B", others, index=others.index(psource.default_b) if psource.default_b in others else 0,
                          key=f"al_{psource.name}_b")
        limit = c3.number_input("Pairs", min_value=4, max_value=1000, value=300, step=100, key=f"al_limit_{psource.name}",
                                help=psource.description)
        data = ua.parallel(psource.name, lang_a=la, lang_b=lb, limit=int(limit))

st.caption(f"{md_text(data.source)}: {len(data)} pairs. A = **{md_text(data.lang_a)}**, B = **{md_text(data.lang_b)}**. "
           f"Example: “{md_text(data.src[0][:90])}” ↔ “{md_text(data.tgt[0][:90])}”")

# --- systems -----------------------------------------------------------------------------------------
options: dict[str, System] = {}
defaults: list[str] = []
refused: list[System] = []  # a run's systems built on a degenerate stage: listed, never compared
if run is not None:
    with guard("Could not find the run's models"):
        for s in run_systems(run.path, data.lang_b):
            if s.degenerate:
                refused.append(s)
                continue
            key = f"run:{run.name}:{s.name.rsplit(' · ', 1)[-1]}"
            options[key] = s
            defaults.append(key)
else:  # real data: runs trained on these very languages (xlviz transfer-corpus), e.g. en -> de
    for r in runs:
        if r.l1 == data.lang_a and data.lang_b in r.l2s:
            with guard(f"Could not find the models of {r.name}"):
                for s in run_systems(r.path, data.lang_b):
                    if s.degenerate:
                        refused.append(s)
                        continue
                    options[f"run:{r.name}:{s.name.rsplit(' · ', 1)[-1]}"] = s
refused_warning("Not offered", [(s.name, s.degenerate_reason) for s in refused])


def _spec(ref) -> ModelSpec:
    return ModelSpec(ref.path, ref.tokenizer)


per_run: dict[str, list] = {}
for m in sel.models:
    if m.covers(data.lang_a) and m.covers(data.lang_b):
        options[f"sidebar:{m.key}"] = System(m.name, data.lang_a, data.lang_b, _spec(m.ref_for(data.lang_a)),
                                             _spec(m.ref_for(data.lang_b)))
    elif m.run:
        per_run.setdefault(m.run, []).append(m)
for rname, ms in per_run.items():  # a run's per-language models picked in the sidebar: pair them up
    ma = next((m for m in ms if m.covers(data.lang_a)), None)
    mb = next((m for m in ms if m.covers(data.lang_b)), None)
    if ma and mb:
        options[f"sidebar-run:{rname}"] = System(f"{rname} · sidebar ({ma.name} + {mb.name})", data.lang_a, data.lang_b,
                                                 _spec(ma.ref_for(data.lang_a)), _spec(mb.ref_for(data.lang_b)))
for k, s in st.session_state.get("al_custom", {}).items():
    options[k] = System(s.name, data.lang_a, data.lang_b, s.a, s.b)
if not defaults:
    defaults = [k for k in options if k.startswith("sidebar")][:3]
# an every-system run overlays 26 lines: its floor and first systems by default, the rest in the picker
defaults = default_rows(defaults, always=lambda k: k.endswith(":floor"))

picks_in_context("al_systems", f"{psource.name}|{run.name if run else ''}|{data.lang_a}|{data.lang_b}", options, defaults)



def _add_custom(avail, lang_a: str, lang_b: str) -> None:
    """Button callback (runs before the widgets): add the pair of models picked in the popover."""
    ia, ib = st.session_state["al_custom_a"], st.session_state["al_custom_b"]
    ma, mb = avail[ia], avail[ib]
    ra, rb = ma.ref_for(lang_a) or ma.ref_for(None), mb.ref_for(lang_b) or mb.ref_for(None)
    key = f"custom:{ra.path}|{rb.path}"
    custom = dict(st.session_state.get("al_custom", {}))
    custom[key] = System(ma.name if ia == ib else f"{ma.name} + {mb.name}", lang_a, lang_b, _spec(ra), _spec(rb))
    st.session_state["al_custom"] = custom
    st.session_state["al_systems"] = list(dict.fromkeys(list(st.session_state.get("al_systems", [])) + [key]))


c1, c2 = st.columns([4, 2], vertical_alignment="bottom")
chosen = c1.multiselect("Systems to compare (overlaid)", list(options), key="al_systems",
                        format_func=lambda k: options[k].name if k in options else k,
                        help="A system is the model reading language A and the model reading language B. A run's "
                        "“transferred” system reads L1 with the L1 model and L2 with the learned L2 embeddings; "
                        "its “floor” reads L2 with untrained L2 embeddings (no transfer step). Multilingual models "
                        "from the sidebar read both languages.")
with c2.popover("Compare two other models", icon=":material/add:", width="stretch"):
    avail = sel.available
    if not avail:
        st.caption("No models found. Add a folder or hub id in the sidebar.")
    else:
        labels = [m.label for m in avail]
        st.selectbox(f"Model reading {md_text(data.lang_a)}", range(len(avail)), format_func=labels.__getitem__, key="al_custom_a")
        st.selectbox(f"Model reading {md_text(data.lang_b)}", range(len(avail)), format_func=labels.__getitem__, key="al_custom_b")
        st.button("Add system", key="al_custom_add", on_click=_add_custom, args=(avail, data.lang_a, data.lang_b))

if not chosen:
    write_url(URL_KEYS)
    st.info("Pick at least one system: a run's transferred model and floor (generated world), models from the "
            "sidebar, or “Compare two other models”.", icon=":material/info:")
    st.stop()

c1, c2, c3, c4 = st.columns([2, 1, 1, 1], vertical_alignment="bottom")
if st.session_state.get("al_pooling") not in POOLINGS:
    st.session_state.pop("al_pooling", None)
if not isinstance(st.session_state.get("al_center"), bool):
    st.session_state["al_center"] = False
v = st.session_state.get("al_max_len")
if isinstance(v, bool) or not isinstance(v, int) or not 8 <= v <= 512:
    st.session_state["al_max_len"] = enc.MAX_LENGTH
pooling = c1.selectbox("Sentence vector", list(POOLINGS), format_func=POOLINGS.get, key="al_pooling")
center = c2.toggle("Centre each language", key="al_center",
                   help="Subtract each language's mean vector before cosine similarity: removes the offset that "
                   "separates the two languages' clouds.")
can_words = bool(data.has_words and data.dictionary)
words_on = c3.toggle("Word translation", value=can_words, disabled=not can_words, key="al_words",
                     help="Nearest word type in the other language vs. the gold dictionary (generated world only; in a "
                          "run, its held-out part: the words no dictionary method was fitted on).")
max_length = c4.number_input("Max tokens", min_value=8, max_value=512, step=8, key="al_max_len")
write_url(URL_KEYS)  # before the computation below, which may stop the page on an error
words_on = bool(words_on and can_words)

# --- compute -------------------------------------------------------------------------------------------
systems = [options[k] for k in chosen]
run_path = str(run.path) if run is not None else None  # where stored encodings of these pairs may lie
n_ch = ua.n_chunks(len(data))
progress = ua.Progress(len(systems) * n_ch * (4 if words_on else 2), "Encoding …")
vectors: dict[str, dict] = {}
rows: list[dict] = []
for s in systems:
    with guard(f"Could not compute {s.name}"):
        # the run's stored encodings when they hold this view (xlviz analyse encodings), else computed here;
        # with words: sentence and word vectors from one forward pass
        what = " sentences and words" if words_on else " sentences"
        ea, wa = ua.side_vectors(run_path, s.a, data.src, data.src_words if words_on else None, pooling, max_length,
                                 progress, f"{s.name}: {data.lang_a}{what}")
        eb, wb = ua.side_vectors(run_path, s.b, data.tgt, data.tgt_words if words_on else None, pooling, max_length,
                                 progress, f"{s.name}: {data.lang_b}{what}")
        vec = {"a": ea, "b": eb}
        table = ua.alignment_table(ea, eb, bool(center), None)
        if words_on:
            vec.update(wa=wa, wb=wb)
        vectors[s.name] = vec
        rows += [{"system": s.name, "lang_a": data.lang_a, "lang_b": data.lang_b, **r} for r in table]
progress.close()
if not rows:
    st.stop()

# --- can each system read these sentences, and is it above chance? (one line each, beside the charts) ------
def _own(ref) -> bool:
    """A model of the run whose pairs these are (its folder and tokenizer inside that run): it reads
    its own run's text by construction, so no tokenizer is loaded to check it (the page then
    renders from stored encodings without importing torch)."""
    if run_path is None:
        return False
    root = os.path.realpath(run_path)
    return all(os.path.realpath(p).startswith(root + os.sep) for p in (ref.path, ref.tokenizer or ref.path))


with guard("Could not check the tokenizers"):
    for s in systems:
        if _own(s.a) and _own(s.b):
            continue
        checks = [readability_of(ref, texts, who=f"the {lang} tokenizer of {s.name}")
                  for ref, texts, lang in ((s.a, data.src, data.lang_a), (s.b, data.tgt, data.lang_b))]
        bad = [c for c in checks if not c.ok]
        if bad:
            st.warning(md_text(" ".join(c.line for c in bad)), icon=":material/translate:")
        else:
            st.caption(md_text(f"{s.name}: both sides readable ({data.lang_a}: {checks[0].single:.0%} single-character "
                               f"pieces, {checks[0].unk:.0%} [UNK]; {data.lang_b}: {checks[1].single:.0%}, {checks[1].unk:.0%})."))
        best = max((r[k] for r in rows if r["system"] == s.name for k in ("retrieval_a_to_b", "retrieval_b_to_a")
                    if isinstance(r.get(k), (int, float))), default=None)
        if best is not None and at_chance(best, len(data)):  # accuracies are fractions here
            st.warning(md_text(chance_line(s.name, best, len(data))), icon=":material/casino:")

# --- per-layer charts ---------------------------------------------------------------------------------------
# one colour per system on every chart of the page, the same as on the Runs and XQuAD pages
colours = label_colours([s.name for s in systems], system_colours())
ab, ba = vf.direction_labels(data.lang_a, data.lang_b)
long_ret = vf.retrieval_long(rows, data.lang_a, data.lang_b)


def with_words(rows: list[dict]) -> list[dict]:
    """``rows`` with each system's word translation accuracy per layer, computed here rather than
    with the vectors: only a tab that shows it asks (it took a first visit about a second)."""
    if not words_on:
        return rows
    words: dict[tuple[str, int], dict] = {}
    words_a, words_b = tuple(w for x in data.src_words for w in x), tuple(w for x in data.tgt_words for w in x)
    for name, vec in vectors.items():
        with guard(f"Could not compute word translation for {name}"):
            wt = ua.word_table(vec["wa"], vec["wb"], words_a, words_b, tuple(data.dictionary), bool(center))
            words.update({(name, w["layer"]): {k: v for k, v in w.items() if k != "layer"} for w in wt})
    return [{**r, **words.get((r["system"], r["layer"]), {})} for r in rows]


# Only the open tab is drawn and computed (switching tabs reruns the script): a chart costs the browser a
# few tenths of a second, the largest share of this page once its vectors are stored, and word translation
# and the post-hoc map cost a first visit seconds (docs/results.md, "How fast do the pages open?"). The
# open tab is part of the view's URL.
TABS = ["Retrieval", "CKA"] + (["Word translation"] if words_on else []) + ["Post-hoc map", "Table"]
if st.session_state.get("al_tab") not in TABS:
    st.session_state.pop("al_tab", None)
tabs = dict(zip(TABS, st.tabs(TABS, key="al_tab", on_change="rerun")))
if tabs["Retrieval"].open:
    with tabs["Retrieval"]:
        if long_ret:
            plotly(shared_figure(vf.retrieval_figure, long_ret, colours), key="al_fig_retrieval", vega=True)
            st.caption(f"Chance is 1/{len(data)} = {100 / len(data):.2f}%. Different hidden sizes cannot be compared by "
                       "cosine (no retrieval for such systems; CKA still works).")
            for group in ua.coinciding(vectors):
                st.caption(f"{md_join(group, ' and ')} read the sentences with the same encoder (identical vectors): their "
                           "lines coincide on every chart, and the one drawn last hides the others.")
        else:
            st.info("The chosen systems read the two languages with vectors of different sizes: no cosine retrieval.")
if tabs["CKA"].open:
    with tabs["CKA"]:
        plotly(shared_figure(vf.cka_figure, rows, colours), key="al_fig_cka", vega=True)
        st.caption("1 = the same representation up to rotation and scale; computed on the paired sentences.")
if words_on and tabs["Word translation"].open:
    with tabs["Word translation"]:
        word_rows = with_words(rows)
        long_wt = [{"system": r["system"], "layer": r["layer"], "direction": d, "accuracy": r[k]}
                   for r in word_rows for d, k in ((ab, "word_translation_a_to_b"), (ba, "word_translation_b_to_a"))
                   if r.get(k) is not None]
        plotly(shared_figure(ua.layer_lines, long_wt, "accuracy", "Word translation accuracy against the gold dictionary",
                              dash="direction", y_label="accuracy (%)", colours=colours), key="al_fig_words", vega=True)
        n_words = next((r.get("n_words") for r in word_rows if r.get("n_words")), None)
        st.caption(f"Contextual vectors of each word averaged per word type; {n_words} source word types with a gold "
                   "translation among the target words.")
if tabs["Post-hoc map"].open:
    with tabs["Post-hoc map"]:
        st.caption("Post-hoc alignment, Wu et al. (2020): fit an orthogonal (Procrustes) map from language A's vectors to language B's on part of "
                   "the pairs, then retrieve the held-out rest before and after applying it. A big gain means the languages "
                   "share structure that is only rotated apart.")
        c1, _ = st.columns([2, 3])
        checked_float("al_train_frac", 0.1, 0.9, 0.5)  # kept while another tab is open (keep above)
        frac = c1.slider("Share of pairs to fit the map on", 0.1, 0.9, step=0.05, key="al_train_frac")
        post = []
        for s in systems:
            vec = vectors.get(s.name)
            if vec is None or vec["a"].shape[2] != vec["b"].shape[2]:
                continue
            with guard(f"Could not fit the map for {s.name}"):
                for r in ua.alignment_table(vec["a"], vec["b"], bool(center), float(frac)):
                    post.append({"system": s.name, "layer": r["layer"], "when": "before map", "retrieval": r["retrieval_before"],
                                 "n_test": r["n_test"]})
                    post.append({"system": s.name, "layer": r["layer"], "when": "after map", "retrieval": r["retrieval_after"],
                                 "n_test": r["n_test"]})
        if post:
            plotly(shared_figure(ua.layer_lines, post, "retrieval", f"Held-out retrieval {ab}, before and after the orthogonal map",
                                  dash="when", y_label="accuracy (%)", colours=colours), key="al_fig_posthoc", vega=True)
            st.caption(f"Map fitted on {round(len(data) * frac)} pairs, retrieval on the other {post[0]['n_test']}.")
            st.download_button("Download post-hoc alignment (CSV)", lambda post=post: ua.csv_bytes(post), file_name="xlviz-posthoc-alignment.csv",
                               mime="text/csv", icon=":material/download:", key="al_dl_post", on_click="ignore")
if tabs["Table"].open:
    with tabs["Table"]:
        table_rows = with_words(rows)
        df = pd.DataFrame(table_rows)
        st.dataframe(df, hide_index=True, key="al_table", placeholder=NA, column_config=number_config(df, ALIGNMENT_RULES))
        st.download_button("Download alignment table (CSV)", lambda rows=table_rows: ua.csv_bytes(rows), file_name="xlviz-alignment.csv",
                           mime="text/csv", icon=":material/download:", key="al_dl", on_click="ignore")

# --- projection -----------------------------------------------------------------------------------------
st.subheader("Projection")
names = [s.name for s in systems if s.name in vectors]
n_layers = vectors[names[0]]["a"].shape[0]
c1, c2, c3, c4, c5 = st.columns([3, 2, 1, 1, 1], vertical_alignment="bottom")
if st.session_state.get("al_proj_system") not in names:
    st.session_state.pop("al_proj_system", None)
p_sys = c1.selectbox("System", names, key="al_proj_system")
vec = vectors[p_sys]
n_layers = vec["a"].shape[0]
if st.session_state.get("al_proj_layer") not in range(n_layers):
    st.session_state["al_proj_layer"] = n_layers - 1
p_layer = c2.slider("Layer", 0, n_layers - 1, key="al_proj_layer")
if st.session_state.get("al_proj_method") not in ("PCA", "UMAP"):
    st.session_state.pop("al_proj_method", None)
p_method = c3.radio("Method", ["PCA", "UMAP"], key="al_proj_method", horizontal=True,
                    help="UMAP needs a few seconds the first time (numba compiles).")
levels = ["sentences"] + (["words"] if "wa" in vec else [])
if st.session_state.get("al_proj_level") not in levels:
    st.session_state.pop("al_proj_level", None)
p_level = c4.radio("Points", levels, key="al_proj_level", horizontal=True)
write_url(URL_KEYS)
p_n = c5.number_input("Sentences" if p_level == "sentences" else "Sentences (all their words)", min_value=2,
                      max_value=len(data), value=min(150 if p_level == "sentences" else 15, len(data)),
                      key=f"al_proj_n_{p_level}")
with guard("Could not project"):
    if vec["a"].shape[2] != vec["b"].shape[2]:
        st.info("The two sides have different hidden sizes, so they cannot share one projection.")
    else:
        n = int(p_n)
        if p_level == "sentences":
            pts = ua.projection(vec["a"][p_layer, :n], vec["b"][p_layer, :n], tuple(data.src[:n]), tuple(data.tgt[:n]),
                                data.lang_a, data.lang_b, None, p_method.lower())
        else:
            ra, rb, la, lb, pairs = aligned_words(data, n)
            pts = ua.projection(vec["wa"][p_layer][ra], vec["wb"][p_layer][rb], tuple(la), tuple(lb), data.lang_a,
                                data.lang_b, tuple(pairs), p_method.lower())
        pa, pb = ((vec["a"][p_layer, :n], vec["b"][p_layer, :n]) if p_level == "sentences"
                  else (vec["wa"][p_layer][ra], vec["wb"][p_layer][rb]))
        axes = vf.projection_axes(p_method, pa, pb)
        plotly(shared_figure(ua.projection_figure, pts, f"{p_sys} · layer {p_layer} · {p_method} of {p_level}", axes=axes), key="al_fig_proj", vega=True)
        st.caption("Coloured by language; grey lines join translations (for words: gold word alignments). Hover shows "
                   "the text.")

# --- projector: several systems in one space ---------------------------------------------------------------
st.subheader("Projector")
st.caption("Several systems' sentence vectors in one 2-D space (fitted on all of them): colour = system, marker = "
           "language (circle: A, diamond: B), hover shows the sentence. Search the sentences; pick a point (click it, "
           "or choose it below) for its nearest neighbours by cosine in the model's own vectors, not in the picture.")
pj_keys = {options[k].name: k for k in chosen if options[k].name in vectors}  # display name -> system key
if not isinstance(st.session_state.get("al_pj_on"), bool):
    st.session_state["al_pj_on"] = False
pj_on = st.toggle("Show the projector", key="al_pj_on",
                  help="Uses the sentence vectors computed above (no new encoding); off, it costs nothing.")
if pj_on:
    with guard("Could not draw the projector"):
        from xlviz.ui.common import PLOTLY_CONFIG
        from xlviz.ui.state import checked_int
        from xlviz.views import embeddings as vp
        from xlviz.views.figures import tidy

        pj_all = list(pj_keys.values())
        got = st.session_state.get("al_pj_systems")
        kept_keys = [k for k in got if k in pj_all] if isinstance(got, list) else []
        if not isinstance(got, list) or (got and not kept_keys):  # new, or none of its systems here any more
            kept_keys = pj_all
        st.session_state["al_pj_systems"] = kept_keys
        c1, c2, c3, c4 = st.columns([4, 2, 1, 1], vertical_alignment="bottom")
        pj_chosen = c1.multiselect("Systems in the projector", pj_all, key="al_pj_systems",
                                   format_func=lambda k: options[k].name if k in options else k)
        pj_layers = min((vectors[options[k].name][side].shape[0] for k in pj_all for side in "ab"), default=1)
        v = st.session_state.get("al_pj_layer")
        if isinstance(v, bool) or v not in range(pj_layers):
            st.session_state["al_pj_layer"] = pj_layers - 1
        pj_layer = c2.slider("Layer", 0, pj_layers - 1, key="al_pj_layer")
        if st.session_state.get("al_pj_method") not in ("PCA", "UMAP"):
            st.session_state["al_pj_method"] = "PCA"
        pj_method = c3.radio("Method", ["PCA", "UMAP"], key="al_pj_method", horizontal=True,
                             help="Fitted on the points of every system shown. UMAP takes seconds the first time.")
        bad_n = checked_int("al_pj_n", 2, len(data), min(150, len(data)))
        pj_n = int(c4.number_input("Sentences", min_value=2, max_value=len(data), key="al_pj_n"))
        q = st.session_state.get("al_pj_query")
        if not isinstance(q, str):
            q = str(q) if isinstance(q, (int, float)) and not isinstance(q, bool) else ""
        st.session_state["al_pj_query"] = q[:200]  # a URL may carry more than the box takes
        pj_query = st.text_input("Search the sentences", key="al_pj_query", max_chars=200,
                                 placeholder="a word or part of a sentence (case ignored, taken literally)")
        if bad_n:
            st.warning(md_text(bad_n))
        if not pj_chosen:
            st.info("Pick at least one system for the projector.", icon=":material/info:")
        else:
            blocks = []
            for k in pj_chosen:
                name, vec = options[k].name, vectors[options[k].name]
                blocks += [(name, data.lang_a, "a", tuple(data.src[:pj_n]), vec["a"][pj_layer, :pj_n]),
                           (name, data.lang_b, "b", tuple(data.tgt[:pj_n]), vec["b"][pj_layer, :pj_n])]
            proj = vp.search(ua.projector(tuple(blocks), pj_method.lower()), pj_query)
            if proj.left_out:
                st.info(f"Left out: {md_join(proj.left_out)}: their vectors are not as wide as "
                        f"{md_text(proj.rows[0]['system'])}'s, and one projection needs one width (compare systems of "
                        "the same hidden size).", icon=":material/info:")
            ids = [f"{pj_keys[r['system']]}|{r['side']}|{r['index']}" for r in proj.rows]
            # a click on the chart (a new selection) picks the point; the picker below stays the source of truth
            sel = st.session_state.get("al_fig_projector")
            sig = repr(sel.get("selection", {}).get("points")) if isinstance(sel, dict) else None
            if sig != st.session_state.get("_al_pj_seen"):
                st.session_state["_al_pj_seen"] = sig
                hit = vp.clicked_point(sel.get("selection") if isinstance(sel, dict) else None)
                if hit is not None and 0 <= hit < len(ids):
                    st.session_state["al_pj_point"] = ids[hit]
            if st.session_state.get("al_pj_point") not in ids:
                st.session_state["al_pj_point"] = ids[0]
            point = ids.index(st.session_state["al_pj_point"])
            if st.session_state.get("al_pj_among") not in vp.AMONG:
                st.session_state["al_pj_among"] = "system"
            bad_k = checked_int("al_pj_k", 1, 100, 10)
            pj_among = st.session_state["al_pj_among"]
            near = vp.neighbours(proj, point, int(st.session_state["al_pj_k"]), pj_among)
            near_idx = vp.neighbour_points(proj, point, int(st.session_state["al_pj_k"]), pj_among)
            title = f"{len(pj_chosen)} system{'s' if len(pj_chosen) > 1 else ''} · layer {pj_layer} · {pj_method} of sentences"
            fig = vp.figure(proj, colours, title, selected=point, near=near_idx)
            st.plotly_chart(tidy(fig), key="al_fig_projector", on_select="rerun", selection_mode="points",
                            config=PLOTLY_CONFIG, width="stretch")
            n_pts = len(proj.rows)
            if proj.query.strip():
                st.caption(f"{len(proj.matches)} of {n_pts} points contain “{md_text(proj.query.strip())}” (ringed).")
            if len(pj_chosen) > 1:
                st.caption("Models trained apart (say a joint model beside MONOTRANS) have unrelated axes: where their "
                           "clouds sit relative to each other means little. Neighbours among the same system answer "
                           "whether a sentence's translation comes first.")
            for group in vp.coinciding([vp.Block(*b) for b in blocks if f"{b[0]} · {b[1]}" not in proj.left_out]):
                st.caption(f"{md_join(group, ' and ')} come from the same encoder (identical vectors): their points "
                           "lie on each other and the one drawn last hides the others.")
            c1, c2, c3 = st.columns([4, 2, 1], vertical_alignment="bottom")
            labels = {i: vp.point_label(r) for i, r in zip(ids, proj.rows)}
            c1.selectbox("Point", ids, key="al_pj_point", format_func=lambda i: labels.get(i, i),
                         help="Or click a point on the chart.")
            c2.radio("Neighbours among", list(vp.AMONG), key="al_pj_among", format_func=vp.AMONG.get, horizontal=True)
            c3.number_input("How many", min_value=1, max_value=100, key="al_pj_k")
            if bad_k:
                st.warning(md_text(bad_k))
            st.dataframe(pd.DataFrame(near), hide_index=True, key="al_pj_neighbours", placeholder=NA,
                         column_config={"cosine": st.column_config.NumberColumn(format="%.3f"),
                                        "translation": st.column_config.CheckboxColumn(help="the point's own translation")})
            rank = vp.translation_rank(proj, point, pj_among)
            if rank is not None:
                r = proj.rows[point]
                st.caption(f"The translation of {md_text(r['system'])} · {md_text(r['language'])} #{r['index']} ranks "
                           f"{rank[0]} of {rank[1]} (cosine {rank[2]:.3f}).")
write_url(URL_KEYS)
