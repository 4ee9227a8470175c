"""Attention: where a model looks within and across the two sentences of a translation pair.

Input: a typed pair, a generated world's parallel pair (with gold word alignment), a PUD
sentence pair or a Tatoeba pair; fed as one input or each sentence alone. Shows a model view
(every layer × head as a labelled thumbnail; a click opens that head), one layer/head as a
heatmap and a head view, the neuron view of one head (a query token's q, every key k_j, q ⊙ k_j,
the scores and the softmax weights), and VECO's Fig. 1 question: per layer/head, how much
attention goes to the other sentence and to the aligned word. A model with a cross-attention
module of its own (found by its config) also shows that module's maps: A's tokens attending
over B's last-layer states, per layer and head.
"""

import numpy as np
import streamlit as st

from xlviz.runs import list_runs
from xlviz.ui import analysis as ua
from xlviz.views import attention as av
from xlviz.ui.common import attention, guard, has_own_cross_attention, max_positions, mixed_attention, own_cross_attention, plotly
from xlviz.ui.common import shared_figure
from xlviz.ui.common import mixed_query_keys, query_keys
from xlviz.ui.common import readability_of, shares_body, typed_text_stats
from xlviz.views.choices import default_data_run
from xlviz.ui.sidebar import current
from xlviz.ui.sidebar import page_setup
from xlviz.ui import renderings_tab as rt
from xlviz.ui.state import keep, url_state, write_url
from xlviz.views.text import md_text

page_setup()
# the view lives in the URL (bookmark, share, reload): the pair, the models, the feed mode, the layer and head
URL_KEYS = ("att_source", "att_run", "att_l2", "att_world_pair", "att_lang_a", "att_lang_b", "att_text_a", "att_text_b",
            "att_model_a", "att_model_b", "att_mode", "att_max_len", "att_layer", "att_head", "att_hide",
            "att_nv_input", "att_nv_token", "att_tab") + rt.URL_KEYS
url_state("attention", URL_KEYS)
# only the open view draws its widgets; the other view's choices must come back with it
keep(*(k for k in URL_KEYS if k != "att_tab"))

TYPED = "Typed"

st.title("Attention across languages")
sel = current()
if not sel.models:
    st.info("Pick a model in the sidebar: a run's model for each language (“run · en”, “run · sov”), an export, "
            "or a typed folder / hub id read with eager attention.", icon=":material/info:")
    st.stop()

# --- views: a translation pair, or one fact in every rendering (xlviz.ui.renderings_tab) ----------
# the open view is part of the URL; only it runs
TABS = ["Pair", "Renderings"]
if st.session_state.get("att_tab") not in TABS:
    st.session_state["att_tab"] = "Pair"
# in the sidebar: a view switch above the model view in the main area broke its click-to-open
# (a plotly selection event; tests/test_browser_modelview.py)
st.sidebar.segmented_control("Attention view", TABS, key="att_tab", required=True,
                             help="Pair: a translation pair's attention. Renderings: one test fact of a run's world in "
                                  "every rendering of the words-versus-order split, with a model's attention over one.")
if st.session_state.get("att_tab") == "Renderings":
    rt.renderings_tab(sel.models, sel.languages)
    write_url(URL_KEYS)
    st.stop()

# --- input pair ---------------------------------------------------------------------------------
world_runs = [r for r in list_runs() if av.world_parallel_files(r.path)]
# typed text, a run's pairs, and every shared-data source of the parallel-text registry
# (xlviz.data.parallel) that can be read here
by_label = {s.label: s for s in ua.parallel_sources() if s.takes is None or (s.takes == "run" and world_runs)}
WORLD = next((label for label, s in by_label.items() if s.takes == "run"), None)
sources = [TYPED] + list(by_label)
if st.session_state.get("att_source") not in sources:
    st.session_state["att_source"] = WORLD or TYPED
source = st.segmented_control("Pair from", sources, key="att_source", required=True)
lang_a, lang_b = list(dict.fromkeys(sel.languages + ["en", "de"]))[:2]

pair = None
with guard("Could not read the pair", stop=True):
    if source == TYPED:
        c1, c2 = st.columns(2)
        # defaults through session state (a value from the URL wins); each sentence starts in the
        # language its label names (an invented L2: its world's sentence)
        for key, default in (("att_lang_a", lang_a), ("att_lang_b", lang_b)):
            if not isinstance(st.session_state.get(key), str):
                st.session_state[key] = default
        la = c1.text_input("Language of sentence A", key="att_lang_a")
        lb = c2.text_input("Language of sentence B", key="att_lang_b")
        for key, lang in (("att_text_a", la), ("att_text_b", lb)):
            if not isinstance(st.session_state.get(key), str):
                st.session_state[key] = av.typed_default(lang, [r.path for r in world_runs])
        ta = c1.text_area("Sentence A", key="att_text_a", height=80)
        tb = c2.text_area("Sentence B", key="att_text_b", height=80)
        if not ta.strip() or not tb.strip():
            st.info("Type two sentences.")
            st.stop()
        pair = av.Pair("typed", la, lb, ta.strip(), tb.strip())
    elif source == WORLD:
        c1, c2, c3 = st.columns([2, 1, 3])
        if st.session_state.get("att_run") not in [r.name for r in world_runs]:
            # the picked models' own run (its world is what their tokenizers read), never the newest other run
            st.session_state["att_run"] = default_data_run([r.name for r in world_runs], sel.models)
        run_name = c1.selectbox("Run", [r.name for r in world_runs], key="att_run")
        run = next(r for r in world_runs if r.name == run_name)
        files = av.world_parallel_files(run.path)
        l2s = list(files)
        if st.session_state.get("att_l2") not in l2s:  # a value from the URL, else the sidebar's second language
            st.session_state["att_l2"] = lang_b if lang_b in l2s else l2s[0]
        l2 = c2.selectbox("Target language", l2s, key="att_l2")
        pairs = ua.world_pairs(files[l2])
        if not pairs:
            st.warning("This parallel file is empty.")
            st.stop()
        if st.session_state.get("att_world_pair", 0) not in range(len(pairs)):
            st.session_state["att_world_pair"] = 0
        k = c3.selectbox("Pair", range(len(pairs)), key="att_world_pair",
                         format_func=lambda i: f"{pairs[i].id} — {pairs[i].text_a[:70]}")
        pair = pairs[k]
    else:  # a shared-data source: its languages, then a pair
        psource = by_label[source]
        c1, c2, c3 = st.columns([1, 1, 4])
        langs = ua.source_languages(psource.name)
        default_a = lang_a if lang_a in langs else psource.default_a
        la = c1.selectbox("Language A", langs, index=langs.index(default_a) if default_a in langs else 0,
                          key=f"att_{psource.name}_a", disabled=len(langs) == 1)
        others = ua.source_partners(psource.name, la)
        default_b = lang_b if lang_b in others else psource.default_b
        lb = c2.selectbox("Language B", others, index=others.index(default_b) if default_b in others else 0,
                          key=f"att_{psource.name}_b")
        pairs = av.pairs_of(ua.parallel(psource.name, lang_a=la, lang_b=lb))
        if not pairs:
            st.warning("No pairs for these languages.")
            st.stop()
        k = c3.selectbox("Pair (type to search)", range(len(pairs)), key=f"att_{psource.name}_pair",
                         format_func=lambda i: f"{pairs[i].id} — {pairs[i].text_a[:70]}")
        pair = pairs[k]

st.markdown(f"**A** ({md_text(pair.lang_a)}): {md_text(pair.text_a)}  \n**B** ({md_text(pair.lang_b)}): {md_text(pair.text_b)}")

# --- model and mode -----------------------------------------------------------------------------
by_key = {m.key: m for m in sel.models}  # picked by model key, so a shared URL names the same models


def _default(lang: str) -> str:
    return next((m.key for m in sel.models if m.languages() is not None and lang in m.languages()),
                next((m.key for m in sel.models if m.languages() is None), sel.models[0].key))


for key, lang in (("att_model_a", pair.lang_a), ("att_model_b", pair.lang_b)):
    if st.session_state.get(key) not in by_key:
        st.session_state[key] = _default(lang)
c1, c2, c3, c4 = st.columns([3, 3, 2, 1])
ka = c1.selectbox("Model for A", list(by_key), format_func=lambda k: by_key[k].label, key="att_model_a")
kb = c2.selectbox("Model for B", list(by_key), format_func=lambda k: by_key[k].label, key="att_model_b")
ma, mb = by_key[ka], by_key[kb]
ref_a = ma.ref_for(pair.lang_a) or ma.ref_for(None)
ref_b = mb.ref_for(pair.lang_b) or mb.ref_for(None)
same = ref_a == ref_b
MIXED = "as one pair (each language's embeddings)"
mixed_ok = False
if not same:
    with guard("Could not compare the two models"):
        mixed_ok = shares_body(ref_a, ref_b)
modes = ["as one pair", "each alone"] if same else ([MIXED, "each alone"] if mixed_ok else ["each alone"])
if st.session_state.get("att_mode") not in modes:  # from another pair of models, or a URL
    st.session_state.pop("att_mode", None)
mode = c3.radio("Feed the sentences", modes, key="att_mode", horizontal=False,
                help="One pair: [CLS] A [SEP] B [SEP] through one model, so attention can cross. For the two "
                     "languages of a MONOTRANS model (same body, different embeddings) the pair goes through the "
                     "shared body with A embedded in A's vocabulary and B in B's. Each alone: two inputs.")
if not same and not mixed_ok:
    c3.caption("A and B are read by different models, so they can only be fed alone.")
cap = 512
with guard("Could not load the models", stop=True):
    cap = min(max_positions(ref_a), max_positions(ref_b))
# the length asked for is kept apart from the one shown: a smaller model caps what is shown, and
# switching back to a larger one restores what was asked for (it stayed at the small cap before)
st.session_state.setdefault("_att_max_wanted", int(st.session_state.get("att_max_len", 128)))
st.session_state["att_max_len"] = max(min(8, cap), min(int(st.session_state["_att_max_wanted"]), cap))
max_length = c4.number_input("Max tokens", min_value=min(8, cap), max_value=cap, step=8, key="att_max_len",
                             help=f"At most {cap}: the model's positions.",
                             on_change=lambda: st.session_state.__setitem__("_att_max_wanted", st.session_state["att_max_len"]))
if cap < 512:
    c4.caption(f"≤ {cap}: the model{'s' if ref_a != ref_b else ''} read{'' if ref_a != ref_b else 's'} at most {cap} positions.")

inputs = []
with guard("Could not compute attention", stop=True):
    if mode == "as one pair":
        inputs.append(("A + B", attention(ref_a, pair.input_a(), pair.input_b(), max_length)))
    elif mode == MIXED:
        inputs.append(("A + B", mixed_attention(ref_a, ref_b, pair.input_a(), pair.input_b(), max_length)))
    else:
        inputs.append((f"A ({pair.lang_a})", attention(ref_a, pair.input_a(), None, max_length)))
        inputs.append((f"B ({pair.lang_b})", attention(ref_b, pair.input_b(), None, max_length)))
for name, res in inputs:
    if res.truncated:
        more = ("raise “Max tokens” to see more" if int(max_length) < cap
                else f"{cap} is the model's own limit: shorten the text to see all of it")
        st.warning(f"{md_text(name)}: the input has {res.n_tokens_before_truncation} tokens; only the first "
                   f"{len(res.tokens)} are shown ({more}).", icon=":material/content_cut:")
if source != TYPED:  # another run's or language's text: can each model's tokenizer read it?
    with guard("Could not check the tokenizers"):
        for label, text, lang, ref, model in (("A", pair.text_a, pair.lang_a, ref_a, ma), ("B", pair.text_b, pair.lang_b, ref_b, mb)):
            r = readability_of(ref, [text], who=f"{model.name}'s tokenizer")
            (st.caption if r.ok else st.warning)(md_text(f"{label} ({lang}): {r.line}"))
if source == TYPED:  # how each model's tokenizer reads what was typed
    with guard("Could not tokenize the typed text"):
        for label, text, lang, ref, model in (("A", pair.text_a, pair.lang_a, ref_a, ma), ("B", pair.text_b, pair.lang_b, ref_b, mb)):
            stats = typed_text_stats(ref, text)
            line = (f"{label} ({md_text(lang)}) under {md_text(model.name)}: {stats['tokens']} tokens, "
                    f"{stats['chars_per_token']:.1f} characters per token, {stats['unk_rate']:.0%} [UNK]")
            problem = av.text_stats_warning(stats)
            (st.warning if problem else st.caption)(line + (f" — {problem}." if problem else "."))

# --- one layer/head -----------------------------------------------------------------------------
L, H = inputs[0][1].n_layers, inputs[0][1].n_heads
model_view_box = st.container()  # the model view, drawn above once the layer/head widgets below exist
st.subheader("One layer and head")
c1, c2, c3 = st.columns([2, 2, 2], vertical_alignment="bottom")
if st.session_state.get("att_layer") not in range(L):
    st.session_state["att_layer"] = L - 1
layer = c1.selectbox("Layer", range(L), key="att_layer")
head_opts = ["mean of heads"] + list(range(H))
if st.session_state.get("att_head", "mean of heads") not in head_opts:
    st.session_state["att_head"] = "mean of heads"
head = c2.selectbox("Head", head_opts, key="att_head")
write_url(URL_KEYS)
hide = c3.toggle("Hide special tokens", value=True, key="att_hide",
                 help="Drop [CLS]/[SEP]-like tokens and renormalise each row over the rest.")
cols = st.columns(len(inputs))
csv_frames = []
for col, (name, res) in zip(cols, inputs):
    with col, guard(f"Could not draw {name}"):
        from xlviz.analysis.attention import attention_slice

        sl = attention_slice(res, layers=[layer], heads=None if head == "mean of heads" else [head],
                             hide_special=hide, average_heads=head == "mean of heads")
        title = f"{name} · layer {layer} · " + ("mean of heads" if head == "mean of heads" else f"head {head}")
        if st.toggle("Head view", value=True, key=f"att_view_{name}",
                     help="As bertviz: queries left, keys right, one line per weight (opacity = weight); hover a "
                          "token to keep only its lines."):
            # st.iframe (the deprecated components html call's replacement); the view's tokens are HTML-escaped
            st.iframe(av.head_view_html(sl.attentions[0, 0], sl.tokens, sl.segment), height=60 + 22 * len(sl.tokens))
        plotly(shared_figure(av.heatmap, sl.attentions[0, 0], sl.tokens, sl.segment, title), key=f"att_heat_{name}", vega=True)
        csv_frames.append(av.slice_frame(sl.attentions, sl.layers, sl.heads, sl.tokens, name))

# --- neuron view ----------------------------------------------------------------------------------
st.subheader("Neuron view: how one head's weights are made")
if head == "mean of heads":
    st.info("The neuron view takes one head apart: pick a head above, or click a thumbnail in the model view.",
            icon=":material/info:")
else:
    names = [name for name, _ in inputs]
    if st.session_state.get("att_nv_input") not in names:
        st.session_state["att_nv_input"] = names[0]
    c1, c2 = st.columns([2, 3])
    nv_input = c1.selectbox("Input", names, key="att_nv_input", disabled=len(names) == 1)
    with guard("Could not compute the query and key vectors"):
        if mode == "as one pair":
            qk = query_keys(ref_a, pair.input_a(), pair.input_b(), max_length)
        elif mode == MIXED:
            qk = mixed_query_keys(ref_a, ref_b, pair.input_a(), pair.input_b(), max_length)
        elif nv_input == names[0]:
            qk = query_keys(ref_a, pair.input_a(), None, max_length)
        else:
            qk = query_keys(ref_b, pair.input_b(), None, max_length)
        if st.session_state.get("att_nv_token") not in range(len(qk.tokens)):  # a new input, or a URL's value
            st.session_state["att_nv_token"] = next((i for i, s in enumerate(qk.segment) if s != -1), 0)
        token = c2.selectbox("Query token", range(len(qk.tokens)), key="att_nv_token",
                             format_func=lambda i: f"{i} · {qk.tokens[i]}")
        plotly(av.neuron_figure(qk.neuron(layer, head, token),
                                f"{nv_input} · layer {layer} · head {head} · query {token} ({qk.tokens[token]})"),
               key="att_neuron")
        st.caption(f"q and k_j are head {head}'s slices ({qk.head_size} dimensions) of layer {layer}'s query and key "
                   f"projections, taken in one forward pass. Score_j = q·k_j/√{qk.head_size}; weight_j = softmax of "
                   "the scores over every token, special tokens included (as the model computes it: “Hide special "
                   "tokens” does not apply here). The weights are checked against the model's own attention.")
write_url(URL_KEYS)

# --- model view: every layer × head, labelled; a click opens that head above ------------------------


def _open_clicked(chart_key: str) -> None:
    """The model view's click (before the rerun): open that layer and head in “One layer and head”."""
    hit = av.clicked_head(av.clicked_points(st.session_state.get(chart_key)), range(L), range(H))
    if hit is not None:
        st.session_state["att_layer"], st.session_state["att_head"] = hit


with model_view_box:
    st.subheader("Model view: every layer × head")
    default_layers = list(range(L)) if L * H <= 64 else sorted({0, L // 2, L - 1})
    ov_layers = st.multiselect("Layers to show", list(range(L)), default=default_layers, key="att_ov_layers",
                               help="Only the selected layers are sent to the browser.")
    st.caption("Rows are layers, columns heads (“L3 H2”: layer 3, head 2). Click a thumbnail to open it in “One "
               "layer and head” below; the outlined one is open.")
    if ov_layers:
        cols = st.columns(len(inputs))
        for col, (name, res) in zip(cols, inputs):
            with col, guard(f"Could not draw the model view of {name}"):
                from xlviz.analysis.attention import attention_slice

                sl = attention_slice(res, layers=sorted(ov_layers), heads=None, hide_special=hide)
                if len(inputs) > 1:
                    st.caption(md_text(name))
                chart = f"att_ov_{name}"
                plotly(shared_figure(av.overview, sl.attentions, sl.layers, sl.heads, segment=sl.segment,
                                     selected=(layer, None if head == "mean of heads" else head)),
                       key=chart, on_select=lambda chart=chart: _open_clicked(chart), vega=True)

# --- VECO Fig. 1: attention to the other sentence / the aligned word ----------------------------
st.subheader("How much attention crosses languages")
shares = {}
if mode not in ("as one pair", MIXED):
    st.info("Feed the pair as one input (same model for A and B) to measure attention to the other sentence.",
            icon=":material/info:")
else:
    from xlviz.analysis.attention import aligned_attention_share, cross_attention_share

    res = inputs[0][1]
    notes = []
    with guard("Could not compute the cross-sentence share"):
        shares["other_sentence"] = cross_attention_share(res, hide_special=hide)
        notes.append(f"Other sentence: mean over layers and heads {np.nanmean(shares['other_sentence']):.2f}. VECO (Luo "
                     "et al. 2021, Fig. 1) finds this small in multilingual encoders: attention mostly stays inside "
                     "each language.")
    if pair.alignment and pair.words_a:
        with guard("Could not compute the aligned-word share"):
            shares["aligned_word"] = aligned_attention_share(res, pair.alignment, hide_special=hide)
            notes.append(f"Aligned word: {len(pair.alignment)} gold word alignments; mean share "
                         f"{np.nanmean(shares['aligned_word']):.2f}.")
    else:
        notes.append("The share of attention to the aligned word needs a gold word alignment: pick a pair from a "
                     "generated world.")
    titles = {"other_sentence": "share of attention to the other sentence", "aligned_word": "share of attention to the aligned word"}
    if shares:
        # both matrices in one figure (one draw in the browser), each with its own colour scale
        plotly(shared_figure(av.share_heatmaps, [(share, titles[name]) for name, share in shares.items()]), key="att_shares",
               vega=True)
    for note in notes:
        st.caption(note)

# --- the model's own cross-attention --------------------------------------------------------------
own = None
with guard("Could not read the model's config"):
    own_a = has_own_cross_attention(ref_a)
if own_a:
    st.subheader("The model's own cross-attention (A over B)")
    st.caption("This model has a cross-attention module in every layer: A's tokens (queries, from A's previous "
               "layer after self-attention) attend over B's last-layer states (keys and values), B read by "
               "the model for B. Rows sum to 1 over B's tokens.")
    with guard("Could not compute the cross-attention"):
        own = own_cross_attention(ref_a, ref_b, pair.input_a(), pair.input_b(), max_length)
        A, ta, tb = own.slice(layer, None if head == "mean of heads" else head, hide)
        title = f"cross-attention · layer {layer} · " + ("mean of heads" if head == "mean of heads" else f"head {head}")
        plotly(shared_figure(av.cross_heatmap, A, ta, tb, title), key="att_cross_heat", vega=True)
        own_layers = ov_layers or list(range(own.n_layers))
        plotly(shared_figure(av.cross_overview, own, sorted(own_layers), hide_special=hide), key="att_cross_ov", vega=True)
        csv_frames.append(av.cross_frame(own, hide_special=hide))

# --- numbers -------------------------------------------------------------------------------------
c1, c2 = st.columns(2)
if csv_frames:
    c1.download_button("Download shown attention weights (CSV)", lambda frames=tuple(csv_frames): av.to_csv(*frames), file_name="xlviz-attention.csv",
                       mime="text/csv", icon=":material/download:", key="att_dl_weights", on_click="ignore")
if shares:
    c2.download_button("Download layer × head shares (CSV)", lambda shares=shares: av.to_csv(av.share_frame(shares)),
                       file_name="xlviz-attention-shares.csv", mime="text/csv", icon=":material/download:",
                       key="att_dl_shares", on_click="ignore")
