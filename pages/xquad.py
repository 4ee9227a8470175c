"""XQuAD: the same question in several languages, side by side, with every model's answer.

Data: a run's generated parallel test set (``world/qa/test.<lang>.json``) or any folder of
SQuAD files sharing question ids (``../shared/data/xquad``). Models: the QA models picked in the
sidebar (a run's exported systems, QA folders). Predictions are computed once per model and
data file and cached.
"""

import math

import numpy as np
import streamlit as st

from xlviz.errors import XlvizError
from xlviz.views import qa, runs as runs_view
from xlviz.ui import why
from xlviz.ui import patching_view, renderings_view
from xlviz.ui.slices_section import slice_filter, slices_section
from xlviz.views.paths import REFUSED, confine, is_allowed
from xlviz.views.text import md_text
from xlviz.views.text import md_join
from xlviz.views.choices import dataset_from_folder, discover_qa_datasets
from xlviz.views.colours import system_colours
from xlviz.evaluation.squad_metric import mlqa_languages
from xlviz.ui.common import (CHUNK, NA, articles_of, cell_intervals, examples_of, guard, open_only, paired_tests, predict, qa_decoding,
                             same_model_key, saved_or_none, score_matrix_ci, shared_data_dir, data_readability)
from xlviz.views.runs import SETTING_NOTES, SETTINGS, export_setting
from xlviz.views.highlight import legend, model_colour
from xlviz.ui.sidebar import current
from xlviz.ui.sidebar import page_setup
from xlviz.ui.state import checked_int, url_state, write_url
from xlviz.ui.tables import SCORE_RULES, number_config, with_p_text
from xlviz.views.xquad import question_card

page_setup()
URL_KEYS = ("xq_source", "xq_folder", "xq_limit", "xq_filter", "xq_search", "xq_pick")
url_state("xquad", URL_KEYS)  # a bookmarked or shared view opens as it was
# "Why the L2 answer differs": its L2 and which of its views are open, drawn below the cards
WHY_URL_KEYS = ("xq_why_l2", "xq_rend", "xq_patch")
url_state("xquad_why", WHY_URL_KEYS)

FOLDER = "folder"
COLUMNS_PER_ROW = 3

st.title("XQuAD — answers across languages")
sel = current()
shared = shared_data_dir()

# --- data -----------------------------------------------------------------------------------
datasets = {d.key: d for d in discover_qa_datasets(shared=shared)}
options = list(datasets) + [FOLDER]
if st.session_state.get("xq_source") not in options:
    # default: the questions of the run the picked QA models come from (a run's models read its
    # own world's vocabulary; another run's test set is mostly [UNK] to them)
    model_runs = [m.run for m in sel.qa_models() if m.run]
    st.session_state["xq_source"] = next((f"run:{r}" for r in model_runs if f"run:{r}" in datasets), options[0])
c1, c2 = st.columns([2, 3])
source = c1.selectbox("Questions from", options, key="xq_source", persist_state="session",
                      format_func=lambda k: datasets[k].label if k in datasets else "a folder of SQuAD files …")
if source == FOLDER:
    default_folder = str(shared / "xquad") if shared and (shared / "xquad").is_dir() else ""
    folder = c2.text_input("Folder with <name>.<lang>.json files (question ids shared across languages)",
                           value=default_folder, key="xq_folder", persist_state="session")
    if not folder.strip():
        st.info("Type a folder of SQuAD-format files, one per language, e.g. `../shared/data/xquad`.")
        st.stop()
    try:  # only inside the app's roots; the refusal does not tell whether the folder exists
        typed_folder = confine(folder)
    except XlvizError as e:
        st.error(str(e), icon=":material/error:")
        st.stop()
    if not typed_folder.is_dir():
        st.error("Folder not found: " + md_text(folder), icon=":material/error:")
        st.stop()
    dataset = dataset_from_folder(typed_folder)
    if not all(is_allowed(dataset.file(lang)) for lang in dataset.languages()):  # a file linked out of the roots
        st.error(REFUSED, icon=":material/error:")
        st.stop()
else:
    dataset = datasets[source]
if not dataset.languages():
    st.error("No <name>.<lang>.json files in " + md_text(dataset.folder), icon=":material/error:")
    st.stop()
if st.session_state.get("_xq_dataset", dataset.key) != dataset.key:
    # a filter or search carried over from another data set can leave nothing to show
    for k in ("xq_filter", "xq_search", "xq_pick", "xq_limit"):
        st.session_state.pop(k, None)
st.session_state["_xq_dataset"] = dataset.key

langs = [l for l in sel.languages if l in dataset.languages()]
missing = [l for l in dataset.languages() if l not in langs]
if len(langs) < 2 and missing:  # side by side needs two languages: fill up from the data set
    added = missing[: 2 - len(langs)]
    langs += added
    c2.caption(f"Languages: {md_join(langs)} ({md_join(added)} added: the sidebar's languages are not all in "
               f"this data set, which has {md_join(dataset.languages())}).")
else:
    c2.caption(f"Languages (from the sidebar): {md_join(langs)} — this data set has {md_join(dataset.languages())}.")

examples = {}
with guard("Could not read the questions", stop=True):
    for lang in langs:
        examples[lang] = examples_of(dataset.file(lang))
all_ids = qa.shared_ids(examples)
if not all_ids:
    st.warning("These language files share no question ids, so nothing can be shown side by side.")
    st.stop()
limit_default = len(all_ids) if len(all_ids) <= 500 else 200
if problem := checked_int("xq_limit", 1, len(all_ids), limit_default):
    st.warning(md_text(problem), icon=":material/warning:")
limit = st.number_input(f"Questions to answer (of {len(all_ids)} shared by {md_join(langs)})", min_value=1,
                        max_value=len(all_ids), step=50, key="xq_limit",
                        help="Each model answers the first N questions in every language; raising N only computes the new ones.")
ids = all_ids[: int(limit)]

# --- predictions ------------------------------------------------------------------------------
models = sel.qa_models()
data_run = dataset.run
origin = [f"questions: {'run ' + data_run + ' (its generated test set)' if data_run else dataset.label}"]
origin += [f"{m.name}: {'run ' + m.run if m.run else 'typed folder / hub id'}" for m in models]
st.caption(md_join(origin, " · "))
unreadable: set[tuple[str, str]] = set()  # (model, language) whose tokenizer cannot read these questions
with guard("Could not check the vocabularies"):
    for m in models:
        for lang in langs:
            if m.covers(lang):
                r = data_readability(m.ref_for(lang), dataset.file(lang), who=f"{m.name}'s tokenizer")
                if not r.ok:
                    unreadable.add((m.name, lang))
                    where = (f" ({m.name} comes from run {m.run}" + (f", the questions from run {data_run})" if data_run else ")")
                             if m.run else "")
                    st.warning(md_text(f"{lang} questions: {r.line}{where}"), icon=":material/translate:")
if not models:
    st.info("Pick one or more QA models in the sidebar (a run's “· system QA” exports, or a fine-tuned QA folder) "
            "to see their answers. Showing the gold answers only.", icon=":material/info:")
predictions: dict[tuple[str, str], dict] = {}
jobs = [(m, lang) for m in models for lang in langs if m.covers(lang)]
total = sum(math.ceil(len(ids) / CHUNK) for _ in jobs)
bar = st.progress(0.0, text="Answering questions …") if jobs else None
done = 0
computed: dict[tuple[str, str], dict] = {}  # (model files, data file) -> predictions: one model is run once
how_decoded: list[str] = []
for m, lang in jobs:
    ref = m.ref_for(lang)
    with guard(f"{m.name} on {lang}"):
        saved = saved_or_none(ref, dataset.file(lang), ids)
        if saved is not None:
            predictions[(m.name, lang)] = saved
            how_decoded.append(f"{m.name} · {lang}: the run's saved predictions")
        else:
            dec = qa_decoding(ref)
            key = (same_model_key(ref), dataset.file(lang), dec.max_length, dec.doc_stride, dec.max_answer_length)
            if key not in computed:
                computed[key] = predict(ref, dataset.file(lang), ids, progress=bar, done=done, total=total)
            predictions[(m.name, lang)] = computed[key]
            how_decoded.append(f"{m.name} · {lang}: decoded with {dec.source} (window {dec.max_length}, "
                               f"stride {dec.doc_stride}, answers ≤ {dec.max_answer_length} tokens)")
    done += math.ceil(len(ids) / CHUNK)
if bar is not None:
    bar.empty()
articles = {lang: articles_of(dataset.file(lang)) for lang in langs}
# real data (not a run's generated test set) is scored as MLQA's script scores its language
mlqa = {lang: lang for lang in langs if data_run is None and articles[lang] is None and lang in mlqa_languages()}
rows = qa.prediction_rows(examples, predictions, ids, articles=articles, mlqa=mlqa)
# a run export whose row depends on a degenerate stage is no result: its rows keep a verdict
# (the CSV), its cells read "degenerate", and no average, interval or test uses them (runs_view.live)
degenerate_of = {m.name: runs_view.export_degenerate(m.run, m.system) for m in models}
if not rows.empty:
    verdict = np.full(len(rows), "ok", dtype=object)  # by (model, language) mask, not row by row (a fifth of the page's run)
    for model, langs_ in degenerate_of.items():
        for lang in langs_:
            verdict[((rows["model"] == model) & (rows["language"] == lang)).to_numpy()] = runs_view.DEGENERATE
    rows["verdict"] = list(verdict)
results = runs_view.live(rows)
names = [m.name for m in models]
# a run's system keeps its app-wide colour (Runs page, analysis pages); other picks and a second
# pick of the same system (another run) take the next free colours
by_system = system_colours()
colours: dict[str, str] = {}
for i, m in enumerate(models):
    system = m.system
    c = by_system.get(system) if system else None
    colours[m.name] = c if c and c not in colours.values() else next(
        (model_colour(j) for j in range(i, i + 50) if model_colour(j) not in colours.values()), model_colour(i))

# --- aggregate matrix (Table 3 layout) -------------------------------------------------------
def per_question_table(results, examples) -> None:
    """Every question's F1 per system and language: sort a column to find where a system fails."""
    table = qa.question_table(results, examples)
    st.dataframe(table, hide_index=True, width="stretch", key="xq_questions", placeholder=NA,
                 column_config=number_config(table, SCORE_RULES, config={"id": st.column_config.TextColumn(width="small")}))


if not rows.empty:
    st.subheader("Scores: model × language")
    own = [lang for lang in langs if articles[lang]]
    if mlqa:
        st.caption(f"{', '.join(mlqa)}: scored as MLQA's evaluation script scores each language (Unicode punctuation "
                   "and the language's articles stripped; Chinese and Thai answers compared character by character).")
    if own:
        st.caption(f"{md_join(own)}: the answer language's own articles are stripped before scoring (MLQA-style), "
                   "as in the run's results; other languages use the official SQuAD v1.1 normalisation.")
    # zero-shot, translate-train (L2 QA labels) and translate-test (the test's gold translation) are never one table
    setting_of = {m.name: export_setting(m.run, m.system) for m in models}
    resources_of = {m.name: runs_view.export_resources(m.run, m.system) for m in models}
    if any(degenerate_of.values()):  # names from disk go into a table (text), never into markdown
        st.warning("Some picked run exports depend on a degenerate stage: the model did not learn, so their scores "
                   "are no result and read “degenerate” below.", icon=":material/warning:")
        st.dataframe([{"model": n, "language": lang, "degenerate stages": ", ".join(stages)}
                      for n, langs_ in degenerate_of.items() for lang, stages in langs_.items()],
                     hide_index=True, width="stretch", key="xq_degenerate")
    groups: dict[str | None, list[str]] = {}
    for name in names:
        groups.setdefault(setting_of[name][0], []).append(name)
    order = [*SETTINGS, None]
    scored = set(rows["model"].unique())
    for gi, setting in enumerate(sorted(groups, key=order.index)):
        members = groups[setting]
        # every table says its setting, also when all picked models share one
        st.markdown(f"**{setting or 'other models (not a run export: setting unknown)'}**"
                    + (f" — {SETTING_NOTES[setting]}" if setting else ""))
        # what each run export read beyond L1 labels, once per setting above its two score tables
        # (as a column of each it pushed the last language off a 1,400 px screen)
        read = runs_view.resources_table(members, resources_of, {n: setting_of[n][1] for n in members})
        if read is not None:
            st.dataframe(read, hide_index=True, key=f"xq_read_{gi}")
        e, f = st.columns(2)
        for col, metric, title, k in ((e, "exact_match", "Exact match (%)", "xq_em"), (f, "f1", "F1 (%)", "xq_f1")):
            # each cell: mean [95% paragraph bootstrap], over live rows only; a model with a degenerate
            # language has no average (it would average a non-result, or fewer languages than the columns)
            matrix = score_matrix_ci(results, metric, members, langs)
            if matrix.empty and not any(degenerate_of.get(n) for n in members):
                continue
            matrix = matrix.reindex(index=[n for n in members if n in scored], columns=langs + ["avg"])
            # a run export whose row depends on a degenerate stage: no result, shown as "degenerate"
            matrix = runs_view.with_degenerate(matrix, [(n, c) for n in matrix.index for c in [*langs, "avg"]
                                                        if c in matrix.columns and degenerate_of.get(n)
                                                        and (c in degenerate_of[n] or c == "avg")])
            col.markdown(f"**{title}**")
            col.dataframe(matrix.style.format(precision=1, na_rep=NA), width="stretch", key=k if gi == 0 else f"{k}_{gi}", placeholder=NA)
    if unreadable:  # beside the numbers: which of them are not a result of transfer
        st.warning(md_text("Not meaningful: " + ", ".join(f"{n} · {lang}" for n, lang in sorted(unreadable))
                           + " — the model's tokenizer cannot read these questions (see the line above): its scores "
                           "here say nothing about transfer."), icon=":material/translate:")
    st.caption(f"[low, high]: 95% intervals resampling whole paragraphs (a context's questions go together; {qa.N_RESAMPLES} "
               "resamples, as in the run's results); each model is one seed, so the spread over training seeds is not in them.")
    uncertainty = st.expander("Uncertainty: 95% paragraph bootstrap intervals" + (" and paired tests" if len(names) > 1 else ""), key="xq_uncertainty", on_change="rerun")
    with uncertainty:
        if uncertainty.open:
            from xlviz.evaluation.seeds import ONE_SEED_NOTE

            st.caption(f"Each cell resampled by paragraph ({qa.N_RESAMPLES} bootstrap samples). {ONE_SEED_NOTE}: each model "
                       "is one training seed (`xlviz report RUN... --compare A B` over seeds decides about methods).")
            if results.empty:
                st.info("Every picked row is degenerate: no interval, no test.", icon=":material/info:")
            elif len(results) < len(rows):
                st.caption("Left out: " + md_join([f"{n} · {lang}" for n, ls in degenerate_of.items() for lang in ls if lang in langs])
                           + " (degenerate: no result).")
            cells = cell_intervals(results)
            st.dataframe(cells, hide_index=True, width="stretch", key="xq_ci", placeholder=NA,
                         column_config=number_config(cells, SCORE_RULES))
            if len(names) > 1:
                st.caption("Two models of the same setting on the same questions (zero-shot, translate-train and "
                           "translate-test are never paired): the F1 difference with its paired paragraph-bootstrap "
                           "interval, and paired permutation tests flipping whole paragraphs for F1 and EM ('p from' says "
                           "whether every sign pattern was enumerated or random patterns drawn); 'Holm': adjusted over every "
                           f"p of this table. {ONE_SEED_NOTE}.")
                paired = with_p_text(paired_tests(results, setting_of={n: setting_of[n][0] for n in names}))  # p < 0.0005 reads "< 0.001"
                st.dataframe(paired, hide_index=True, width="stretch", key="xq_paired", placeholder=NA,
                             column_config=number_config(paired, SCORE_RULES))
    open_only("Per-question F1 (%) — sort a column to find where a system fails", per_question_table, results, examples,
              key="xq_per_question")
    slices_section(rows, dataset, langs, names)
    if how_decoded:
        open_only("How each cell was computed", lambda: st.markdown("\n".join(f"- {md_text(line)}" for line in how_decoded)),
                  key="xq_how")
    uncovered = [f"{m.name} has no {lang} model" for m in models for lang in langs if not m.covers(lang)]
    if uncovered:
        st.caption("Not scored: " + md_join(uncovered, "; ") + ".")

# --- one question side by side ----------------------------------------------------------------
st.subheader("Question")
f1c, f2c = st.columns([2, 3])
how = f1c.selectbox("Show", list(qa.DISAGREEMENT_FILTERS), key="xq_filter",
                    help="Keep the questions where models (or languages) get different exact-match scores.")
query = f2c.text_input("Search id, question or context", key="xq_search", placeholder="e.g. 56beb4343aeaaa14008c925c or Panthers")
nav = ids
if not results.empty:
    nav = [i for i in qa.disagreeing_ids(results, qa.DISAGREEMENT_FILTERS[how]) if i in set(ids)]
nav = slice_filter(qa.search_ids(examples, nav, query))
if not nav:
    st.info("No question matches this filter and search.")
    st.stop()
first = qa.index_by_id(examples[langs[0]])
if st.session_state.get("xq_pick") not in nav:
    st.session_state["xq_pick"] = nav[0]


def _step(delta: int, nav_ids: list[str]) -> None:
    cur = st.session_state.get("xq_pick")
    i = nav_ids.index(cur) if cur in nav_ids else 0
    st.session_state["xq_pick"] = nav_ids[(i + delta) % len(nav_ids)]


p, s, n = st.columns([1, 8, 1], vertical_alignment="bottom")
p.button("◀ Prev", on_click=_step, args=(-1, nav), key="xq_prev", width="stretch")
write_url(URL_KEYS)
qid = s.selectbox(f"Question ({nav.index(st.session_state['xq_pick']) + 1} of {len(nav)})", nav, key="xq_pick",
                  format_func=lambda i: f"{i} — {first[i].question[:90]}")
n.button("Next ▶", on_click=_step, args=(1, nav), key="xq_next", width="stretch")

st.html(legend([("gold answer", None)] + [(name, colours[name]) for name in names if any(k[0] == name for k in predictions)]))
if predictions:  # "why this answer": integrated gradients, computed only for an opened expander
    w1, w2, w3, w4 = st.columns([1, 1, 1, 3], vertical_alignment="bottom")
    ig_steps = w1.number_input("Salience: IG steps", min_value=2, max_value=256, value=why.DEFAULT_STEPS,
                               step=8, key="xq_ig_steps", help="Integrated gradients: each step is one forward and backward pass of the window; "
                               "more steps, a smaller convergence delta.")
    ig_target = w2.selectbox("Salience of", list(why.TARGET_LABELS), key="xq_ig_target",
                             format_func=lambda t: why.TARGET_SHORT[t], help="The logit explained: the answer's start, its end, or "
                             "both (the span's score; integrated gradients add up).")
    ig_top = w3.number_input("Linked words (top k)", min_value=1, max_value=30, value=5, key="xq_ig_top")
    gold_links = None
    with guard("Could not read the world's gold word alignments"):
        gold_links = why.world_alignment(dataset, langs)
    w4.caption(why.alignment_note(dataset, gold_links))
for r0 in range(0, len(langs), COLUMNS_PER_ROW):
    cols = st.columns(min(COLUMNS_PER_ROW, len(langs) - r0))
    for col, lang in zip(cols, langs[r0 : r0 + COLUMNS_PER_ROW]):
        ex = qa.index_by_id(examples[lang]).get(qid)
        if ex is None:
            col.warning(md_text(f"{qid} is missing in {lang}"))
            continue
        answers = [(name, predictions[(name, lang)].get(qid)) for name in names if (name, lang) in predictions]
        card = question_card(lang, ex, answers, colours, articles[lang], mlqa.get(lang))
        with col:
            st.html(card)
            for mi, m in enumerate(models):
                if (m.name, lang) in predictions:
                    why.why_this_answer(m, lang, ex, predictions, dataset, int(ig_steps), ig_target, int(ig_top),
                                        gold_links, key=f"xq_why_{lang}_{mi}")

# --- why the L2 answer differs (a run's generated world only) ------------------------------------
l2s = []
with guard("Could not read the run's generated world"):
    l2s = renderings_view.world_l2s(dataset)
if l2s:
    st.subheader("Why the L2 answer differs")
    if st.session_state.get("xq_why_l2") not in l2s:  # default: the first L2 on the cards
        st.session_state["xq_why_l2"] = next((l for l in langs if l in l2s), l2s[0])
    why_l2 = st.selectbox("L2", l2s, key="xq_why_l2", help="The L2 of both views below; English is the world's L1.")
    write_url(("xq_why_l2",))
    renderings_view.renderings_section(models, dataset, why_l2, qid, colours, int(ig_steps) if predictions else why.DEFAULT_STEPS,
                                       ig_target if predictions else "total")
    patching_view.patching_section(dataset, why_l2, models, colours)

# --- export -----------------------------------------------------------------------------------
if not rows.empty:
    st.download_button("Download predictions and scores (CSV)", lambda rows=rows: rows.to_csv(index=False).encode("utf-8"),
                       file_name="xlviz-xquad-predictions.csv", mime="text/csv", icon=":material/download:",
                       key="xq_download", on_click="ignore")
