"""Probing: what the transferred model learned, per language, category and layer.

- Agreement (Goldberg 2019): mask the word where a minimal pair differs and compare the masked LM's
  probabilities of the two forms; on the generated world's agreement pairs of every language and on
  Marvin & Linzen (English; with coverage: pairs whose two forms are single tokens, the paper's Table 10).
- Word in context: a logistic-regression probe on fixed vectors of a word in two contexts (same sense
  or not), cross-validated per layer, and contextual similarity (cosine vs. binary gold similarity,
  Spearman) on the generated world's same-word-different-sense pairs.

The paper's probing direction: the model trained on L1 and transferred into L2, probed in L2, next to
the floor (untrained L2 embeddings), with the L1 model on L1 as reference; every system of a bench
run can be probed (a large run opens on its references, floors and first systems; a run with
``mono-l2`` adds a model trained on L2 directly). Results as grids (model · language × category or
layer), with a drill-down to single pairs and CSV export. Numbers come from ``xlviz.analysis`` (as
``xlviz analyse agreement|wic|probing``). Opens preset to a run with ``?run=NAME&l2=L2``.
"""

import pandas as pd
import streamlit as st

from xlviz.analysis.reports import ProbeModel, agreement_rows, probed_and_refused, run_probe_models
from xlviz.models.reference import ModelSpec
from xlviz.ui import analysis as ua
from xlviz.views.choices import AGREEMENT_VIEW, WIC_VIEW, default_rows, split_probeable
from xlviz.views.probing import FLOOR, PAIRS_PER_CATEGORY, UNIT, reads_world_pairs
from xlviz.views.colours import label_colours, system_colours
from xlviz.ui.common import NA, guard, plotly, refused_warning, shared_data_dir, shared_figure
from xlviz.ui.sidebar import current, page_setup
from xlviz.ui.state import picks_in_context, url_state, write_url
from xlviz.views.text import md_text

page_setup()

PAGE = "probing"
AGREEMENT, WIC = "Agreement", "Word in context"
WORLD_DATA, ML_DATA = "Generated world", "Marvin & Linzen (English)"
# the view lives in the URL (bookmark, share, reload): probe, run, languages, data, sizes, drill-down
URL_KEYS = ("pr_probe", "pr_run", "pr_l2s", "pr_floor", "pr_agr_data", "pr_agr_max", "pr_agr_unit", "pr_agr_drill",
            "pr_agr_cat", "pr_agr_filter", "pr_show", "pr_wic_n", "pr_wic_folds", "pr_wic_drill", "pr_wic_layer", "pr_wic_filter")
url_state(PAGE, URL_KEYS)
from_url = {k for k in URL_KEYS if k in st.query_params}


def label(m: ProbeModel) -> str:
    return f"{m.name} · {m.language}"


def stop() -> None:
    """``st.stop`` with the URL kept on the current view."""
    write_url(URL_KEYS)
    st.stop()


def valid(key: str, options, default=None) -> None:
    """Drop a value (from an old URL, another run) the widget cannot show; else set ``default``."""
    v = st.session_state.get(key)
    ok = v in options if not isinstance(v, list) else all(x in options for x in v)
    if key in st.session_state and not ok:
        del st.session_state[key]
    if key not in st.session_state and default is not None:
        st.session_state[key] = default


def within(key: str, lo: int, hi: int, default: int) -> None:
    """Keep a number from the URL inside the widget's range; else ``default``."""
    v = st.session_state.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
        st.session_state[key] = default

st.title("Probing: what the transferred model learned")
st.caption("Does the transferred model (L1 body, learned L2 embeddings) know L2's agreement and word senses, "
           "compared with the floor (same body, untrained L2 embeddings)? The L1 model on L1 is the reference. "
           "Accuracies in %.")
sel = current()
runs = ua.analysable_runs()
shared = shared_data_dir()
has_ml = bool(shared and (shared / "syneval" / "marvin_linzen.tsv.gz").is_file())

# --- preset from the Runs page's link: ?run=NAME&l2=L2 -----------------------------------------------
p_run, p_l2, p_msg = ua.query_preset(PAGE, runs)
if p_msg:
    st.warning(md_text(p_msg), icon=":material/link_off:")  # names from the URL
if p_run is not None:
    st.session_state["pr_run"] = p_run.name
    if "pr_l2s" not in from_url:  # a full URL (bookmark, reload) keeps its languages
        st.session_state["pr_l2s"] = [p_l2] if p_l2 else list(p_run.l2s)

# --- models ------------------------------------------------------------------------------------------
valid("pr_probe", [AGREEMENT, WIC], AGREEMENT)
probe = st.segmented_control("Probe", [AGREEMENT, WIC], key="pr_probe", required=True)
run = None
models: list[ProbeModel] = []
c1, c2, c3 = st.columns([3, 2, 1], vertical_alignment="bottom")
if runs:
    names = [r.name for r in runs]
    if st.session_state.get("pr_run") not in names:
        st.session_state["pr_run"] = names[0]
    run_name = c1.selectbox("Run", names, key="pr_run")
    run = next(r for r in runs if r.name == run_name)
    if "pr_l2s" not in st.session_state or not all(l in run.l2s for l in st.session_state["pr_l2s"]):
        st.session_state["pr_l2s"] = list(run.l2s)
    l2s = c2.multiselect("Target languages", run.l2s, key="pr_l2s")
    valid("pr_floor", [True, False], FLOOR)
    floor = c3.toggle("Floor", key="pr_floor", help="Also probe the floor: the L1 body with untrained L2 "
                      "embeddings (what the transferred model was before the transfer step).")
    ua.sync_query(PAGE, run.name, l2s[0] if len(l2s) == 1 else None)
    with guard("Could not find the run's models"):
        models = run_probe_models(run.path, l2s or [], floor=floor) if l2s else run_probe_models(run.path, [], floor=floor)[:1]
else:
    c1.caption("No run with trained models yet: start one on the Runs page. English models from the sidebar can be "
               "probed on Marvin & Linzen.")
# masked LMs only: a QA export (the sidebar's default picks) has no MLM head to score minimal pairs with
english = [m for m in sel.models if m.covers("en") and not m.qa and not (run and m.run == run.name)]
for m in english:
    ref = m.ref_for("en")
    models.append(ProbeModel(m.name, "en", ModelSpec(ref.path, ref.tokenizer), "model"))
st.caption("L2 can be probed in every system of the run (its encoders; pick them under Rows), next to the L1 model on L1; a run trained with "
           "`--methods mono-l2` adds a model trained on L2 directly, the reference the paper probes against. English "
           "models picked in the sidebar are probed on English data.")
models, no_head = split_probeable(models, AGREEMENT_VIEW if probe == AGREEMENT else WIC_VIEW)
if no_head:
    st.caption("Not offered, no masked-LM head " + ("to score minimal pairs with" if probe == AGREEMENT else "to read the words with")
               + ": "
               + ", ".join(dict.fromkeys(m.name for m in no_head)) + ".")
# a model built on a degenerate stage (the run's verdicts) is no result: listed, never probed
all_models = models
models, refused = probed_and_refused(models)
refused_warning("Not probed", [(label(m), m.degenerate_reason) for m in refused])
if not models:
    st.info("Pick a run, or English masked LMs in the sidebar.", icon=":material/info:")
    stop()
# which model reads which data, and what each row is (its method says: mono-l2 is the untransferred reference)
with st.expander("Rows: role and direction", expanded=False):
    st.dataframe(pd.DataFrame([{"model": m.name, "language": m.language, "role": m.role,
                                "verdict": "degenerate: " + ", ".join(m.degenerate) if m.degenerate else "ok",
                                "direction": m.direction or f"{m.language} model on {m.language} data"}
                               for m in all_models]),
                 hide_index=True, width="stretch", key="pr_rows", placeholder=NA)
# which rows to probe and draw: a large run's defaults are a readable few (default_rows says which)
row_labels = [label(m) for m in models]  # they name the run, languages and floor: the picks' context
picks_in_context("pr_show", "|".join(row_labels), row_labels, [label(m) for m in default_rows(models, group=lambda m: m.name)])
shown = st.multiselect("Rows (model · language)", row_labels, key="pr_show",
                       help="A run of many systems starts with its references, floors and first systems; add any other here.")
if len(shown) < len(row_labels):
    st.caption(f"{len(shown)} of {len(row_labels)} rows shown; the others are in the picker above.")
models = [m for m in models if label(m) in shown]
if not models:
    st.info("Pick at least one row.", icon=":material/info:")
    stop()


def _wilson(row) -> pd.Series:
    """Error bars of one accuracy (%): its 95% Wilson interval over the pairs scored."""
    from xlviz.evaluation.bootstrap import wilson_interval

    n = int(row.get("n_scored") or 0)
    if n <= 0 or pd.isna(row["accuracy"]):
        return pd.Series({"err_plus": None, "err_minus": None})
    lo, hi = wilson_interval(round(row["accuracy"] / 100 * n), n)
    return pd.Series({"err_plus": 100 * hi - row["accuracy"], "err_minus": row["accuracy"] - 100 * lo})


def agreement_figure(df: pd.DataFrame, dname: str, colours: dict[str, str]):
    """The agreement bars of one dataset, built once per table (through ``shared_figure``): plotly
    express takes 0.2-0.3 s a chart, every time a tab opens the page."""
    import plotly.express as px

    bar = df[df["category"] != "all"].assign(accuracy=lambda x: 100 * x["accuracy"])
    bar = bar.join(bar.apply(_wilson, axis=1))
    # colour = system (app-wide), pattern = language (on screen, Vega-Lite: a lighter bar): a system probed
    # in two L2s keeps its colour
    fig = px.bar(bar, x="category", y="accuracy", color="row", pattern_shape="language", barmode="group", labels={"accuracy": "accuracy (%)",
                 "row": ""}, title=f"{dname}: agreement accuracy per category (95% Wilson intervals; dotted: chance)",
                 color_discrete_sequence=ua.PALETTE, color_discrete_map=colours, error_y="err_plus", error_y_minus="err_minus",
                 hover_data={"n_scored": True, "err_plus": False, "err_minus": False})
    fig.add_hline(y=50, line_dash="dot", line_color="gray")  # chance: named in the title (a label here sat on bars)
    fig.for_each_trace(lambda t: t.update(name=t.name.split(",")[0]))  # the row names its language already
    fig.update_layout(height=380, margin=dict(t=50, b=10, l=10, r=10), yaxis_range=[0, 102], legend_title_text="")
    return fig


# a run's system keeps its app-wide colour (Runs, XQuAD, Alignment pages) on every chart here
_by_model = label_colours([m.name for m in models], system_colours())
colours = {label(m): _by_model[m.name] for m in models}


# --- agreement -----------------------------------------------------------------------------------------
if probe == AGREEMENT:
    data_opts = ([WORLD_DATA] if run and run.has_world else []) + ([ML_DATA] if has_ml else [])
    if not data_opts:
        st.info("No agreement data: a run with a generated world, or ../shared/data/syneval/marvin_linzen.tsv.gz.")
        stop()
    if "pr_agr_data" not in st.session_state or not set(st.session_state["pr_agr_data"]) <= set(data_opts):
        st.session_state["pr_agr_data"] = data_opts[:1]
    c1, c2, c3 = st.columns([3, 1, 2], vertical_alignment="bottom")
    data_sel = c1.multiselect("Minimal pairs from", data_opts, key="pr_agr_data")
    # the first view's settings are those ``xlviz analyse agreement RUN`` stores (read, not computed)
    within("pr_agr_max", 1, 20000, PAIRS_PER_CATEGORY)
    valid("pr_agr_unit", ["word", "token"], UNIT)
    max_cat = c2.number_input("Pairs per category", min_value=1, max_value=20000, step=50, key="pr_agr_max",
                              help="Evenly spread through each category (Marvin & Linzen lists singular subjects first).")
    unit = c3.radio("Scored pairs", ["word", "token"], key="pr_agr_unit", horizontal=True,
                    format_func={"word": "both forms single tokens", "token": "differ in one sub-word"}.get,
                    help="Goldberg (2019) scores only pairs whose two forms are single tokens of the vocabulary; "
                    "coverage says how many qualify. “Differ in one sub-word” also scores e.g. walk ##s / walk ##ed.")
    jobs = []
    for m in models:
        if WORLD_DATA in data_sel and run is not None and reads_world_pairs(m):
            jobs.append((m, f"world:{m.language}", WORLD_DATA))
        if ML_DATA in data_sel and m.language == "en":
            jobs.append((m, "marvin-linzen", "Marvin & Linzen"))
    if not jobs:
        st.info("Nothing to probe with this choice (Marvin & Linzen is English: it needs an English model).")
        stop()
    run_path = str(run.path) if run else None
    sizes = {}
    write_url(URL_KEYS)  # before a stop on error below
    with guard("Could not read the minimal pairs", stop=True):
        for _, d, _ in jobs:
            if d not in sizes:
                with st.spinner("Reading minimal pairs …"):
                    sizes[d] = len(ua.agreement_pairs(d, run_path, int(max_cat), ua.data_stamp(d, run_path))[1])
    progress = ua.Progress(sum(ua.n_chunks(sizes[d]) for _, d, _ in jobs), "Scoring minimal pairs …")
    results = {}
    grid_rows = []
    for m, d, dname in jobs:
        with guard(f"Could not probe {label(m)} on {dname}"):
            res = ua.agreement(m.spec, d, run_path, int(max_cat), unit, progress, f"{label(m)} on {dname}")
            results[f"{label(m)} · {dname}"] = (m, dname, res)
            grid_rows += agreement_rows(m.name, m.language, res, m.role, dname)
    progress.close()
    if not results:
        stop()

    for dname in dict.fromkeys(d for _, _, d in jobs):
        rows = [r for r in grid_rows if r["data"] == dname]
        if not rows:
            continue
        st.subheader(f"{md_text(dname)}: accuracy per category")
        df = pd.DataFrame(rows)
        df["row"] = df["model"] + " · " + df["language"]
        cats = list(dict.fromkeys(df["category"]))
        acc = df.pivot(index="row", columns="category", values="accuracy")[cats].astype(float) * 100
        acc = acc.loc[list(dict.fromkeys(df["row"]))].rename_axis("model · language")
        # n/a: a category with no scored pair (zero coverage) has no accuracy, not 0 %
        st.dataframe(acc.style.format(precision=1, na_rep=NA), key=f"pr_grid_{dname}", placeholder=NA)
        cov = df.pivot(index="row", columns="category", values="coverage")[cats] * 100
        cov = cov.loc[list(dict.fromkeys(df["row"]))].rename_axis("model · language")
        overall = df[df["category"] == "all"].set_index("row")
        st.caption("Coverage (pairs scored): " + "; ".join(
            f"{md_text(r)}: {int(overall.loc[r, 'n_scored'])}/{int(overall.loc[r, 'n_total'])} ({overall.loc[r, 'coverage'] * 100:.1f}%)"
            for r in overall.index))
        if dname != WORLD_DATA or (cov < 100).any().any():
            with st.expander("Coverage per category (%)", expanded=dname != WORLD_DATA):
                st.dataframe(cov, key=f"pr_cov_{dname}",
                             column_config={c: st.column_config.NumberColumn(c, format="%.1f") for c in cats}, placeholder=NA)
        fig = shared_figure(agreement_figure, df, dname, colours)
        plotly(fig, key=f"pr_fig_agr_{dname}", vega=True)
    st.download_button("Download agreement grid (CSV)", lambda rows=grid_rows: ua.csv_bytes(rows), file_name="xlviz-agreement.csv",
                       mime="text/csv", icon=":material/download:", key="pr_dl_agr", on_click="ignore")

    st.subheader("Pairs")
    keys = list(results)
    c1, c2, c3 = st.columns([3, 2, 2])
    valid("pr_agr_drill", keys)
    pick = c1.selectbox("Model and data", keys, key="pr_agr_drill")
    m, dname, res = results[pick]
    valid("pr_agr_cat", ["all"] + [c["category"] for c in res["by_category"]])
    valid("pr_agr_filter", ["all", "wrong", "not scored"])
    cat = c2.selectbox("Category", ["all"] + [c["category"] for c in res["by_category"]], key="pr_agr_cat")
    show = c3.radio("Show", ["all", "wrong", "not scored"], key="pr_agr_filter", horizontal=True)
    items = [it for it in res["items"] if cat == "all" or it["category"] == cat]
    if show == "wrong":
        items = [it for it in items if it["covered"] and not it["correct"]]
    elif show == "not scored":
        items = [it for it in items if not it["covered"]]
    table = pd.DataFrame(items, columns=["id", "category", "masked", "sentence", "good_word", "bad_word", "logp_good",
                                         "logp_bad", "preferred", "correct", "top_prediction", "reason"])
    st.dataframe(table, hide_index=True, key="pr_agr_items", column_config={
        "masked": st.column_config.TextColumn("masked sentence", width="large"),
        "logp_good": st.column_config.NumberColumn("log P(good)", format="%.2f"),
        "logp_bad": st.column_config.NumberColumn("log P(bad)", format="%.2f"),
        "preferred": "model preferred", "top_prediction": "top prediction at [MASK]"}, placeholder=NA)
    st.caption(f"{len(items)} pairs. A pair is right when the grammatical form is more probable at the masked position.")
    st.download_button("Download these pairs (CSV)", lambda items=items: ua.csv_bytes(items), file_name="xlviz-agreement-pairs.csv",
                       mime="text/csv", icon=":material/download:", key="pr_dl_agr_items", on_click="ignore")

# --- word in context -------------------------------------------------------------------------------------
else:
    if run is None or not run.has_world:
        st.info("Word-in-context pairs come from a run's generated world (a run on real corpora has none): start a "
                "run on the Runs page.")
        stop()
    st.caption("Same-word-different-sense pairs of the generated world (bat, seal, crane: animal or thing). In English "
               "both contexts contain the same word form, so only context can tell the senses apart. In the invented "
               "L2s the two senses are different words, so there the probe would only test whether two words are "
               "identical: those rows are left out, and models transferred into English (xx→en) are probed on the "
               "English pairs beside the English model, as Artetxe et al. (App. D) do.")
    c1, c2 = st.columns(2)
    within("pr_wic_n", 10, 2000, 200)
    within("pr_wic_folds", 2, 10, 5)
    n_pairs = c1.number_input("Sense pairs per language", min_value=10, max_value=2000, step=50, key="pr_wic_n")
    folds = c2.number_input("Cross-validation folds", min_value=2, max_value=10, key="pr_wic_folds")
    candidates = [m for m in models if m.role != "model" or m.language == "en"]
    wstamp = ua._world_stamp(str(run.path))
    with guard("Could not read the sense pairs", stop=True):
        informative = {lang: ua.sense_pairs_test_context(str(run.path), lang, int(n_pairs), wstamp)
                       for lang in dict.fromkeys(m.language for m in candidates)}
    wic_models = [m for m in candidates if informative[m.language]]
    skipped = [m for m in candidates if not informative[m.language]]
    if skipped:
        st.caption(md_text("Not probed (same sense = same word in " + ", ".join(sorted({m.language for m in skipped}))
                           + ", so the probe would test word identity): " + ", ".join(label(m) for m in skipped) + "."))
    if not wic_models:
        st.info("No model reads a language whose sense pairs test the context (pick the run's English model or a "
                "system transferred into English).")
        stop()
    progress = ua.Progress(len(wic_models), "Word in context …")
    results = {}
    rows = []
    for m in wic_models:
        with guard(f"Could not probe {label(m)}"):
            res = ua.word_in_context(m.spec, str(run.path), m.language, int(n_pairs), int(folds))
            results[label(m)] = (m, res)
            rows += [{"model": label(m), "system": m.name, "language": m.language, "role": m.role, **r} for r in res["layers"]]
        progress.step(label(m))
    progress.close()
    if not rows:
        stop()
    c1, c2 = st.columns(2)
    with c1:
        plotly(shared_figure(ua.layer_lines, rows, "accuracy", "Word-in-context probe accuracy (cross-validated)", color="system", dash="language",
                              y_label="accuracy (%)", baseline=rows[0]["majority"], colours=_by_model), key="pr_fig_wic")
    with c2:
        plotly(shared_figure(ua.layer_lines, rows, "spearman", "Contextual similarity: Spearman ρ of cosine vs. gold", percent=False,
                              color="system", dash="language", y_label="Spearman ρ", colours=_by_model), key="pr_fig_sim")
    st.caption("Gold similarity is binary here (same sense = 1, different sense = 0), so ρ is a rank-biserial "
               "correlation; the table also has ROC AUC and the mean cosine of each class.")
    df = pd.DataFrame(rows)
    grid = (df.pivot(index="model", columns="layer", values="accuracy") * 100).loc[list(dict.fromkeys(df["model"]))]
    grid.columns = [f"layer {c}" for c in grid.columns]
    st.dataframe(grid, key="pr_wic_grid", column_config={c: st.column_config.NumberColumn(c, format="%.1f") for c in grid.columns}, placeholder=NA)
    st.download_button("Download word-in-context table (CSV)", lambda rows=rows: ua.csv_bytes(rows), file_name="xlviz-wic.csv",
                       mime="text/csv", icon=":material/download:", key="pr_dl_wic", on_click="ignore")

    st.subheader("Pairs")
    c1, c2, c3 = st.columns([3, 2, 2])
    valid("pr_wic_drill", list(results))
    valid("pr_wic_filter", ["all", "wrong"])
    pick = c1.selectbox("Model", list(results), key="pr_wic_drill")
    m, res = results[pick]
    n_layers = len(res["layers"])
    within("pr_wic_layer", 0, n_layers - 1, n_layers - 1)
    layer = c2.slider("Layer", 0, n_layers - 1, key="pr_wic_layer")
    show = c3.radio("Show", ["all", "wrong"], key="pr_wic_filter", horizontal=True)
    items = [{"id": it["id"], "word": it["word"], "sentence 1": it["sentence1"], "sentence 2": it["sentence2"],
              "same sense": it["same_sense"], "cosine": it["cosine"][layer], "probe says same": it["predicted"][layer],
              "correct": it["predicted"][layer] == it["same_sense"]} for it in res["items"]]
    if show == "wrong":
        items = [it for it in items if not it["correct"]]
    st.dataframe(pd.DataFrame(items), hide_index=True, key="pr_wic_items",
                 column_config={"cosine": st.column_config.NumberColumn("cosine", format="%.3f")}, placeholder=NA)
    st.caption(f"{len(items)} pairs at layer {layer}; predictions are held-out (cross-validation).")
    st.download_button("Download these pairs (CSV)", lambda items=items: ua.csv_bytes(items), file_name="xlviz-wic-pairs.csv",
                       mime="text/csv", icon=":material/download:", key="pr_dl_wic_items", on_click="ignore")
write_url(URL_KEYS)
