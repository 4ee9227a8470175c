"""Sweeps: start a grid of transfer runs, watch its cells, plot transfer against typology.

Training never happens in this script: the form starts ``xlviz sweep`` as a detached process
(xlviz.jobs, its job record in ``<sweep>/sweep/``) and the page reads the sweep folder, so a
sweep goes on across reruns, closed tabs and app restarts. Each cell is an ordinary run
(``<sweep>/<cell>``) that every other page lists.
"""

import streamlit as st

from xlviz import jobs
from xlviz.runs import checkpoints_root
from xlviz.ui import analysis as ua
from xlviz.views import runs as runs_view, sweeps as sweeps_view
from xlviz.ui.common import NA, guard, open_only, plotly
from xlviz.ui.sidebar import page_setup
from xlviz.ui.state import fresh_label, url_state, write_url
from xlviz.views.text import md_text

page_setup()
URL_KEYS = ("sw_sweep", "sw_systems", "sw_pair_a", "sw_pair_b", "sw_metric")
url_state("sweeps", URL_KEYS)

POLL_S = 3.0
ACTIVE = ("running", "starting")
METRICS = {"ratio": "F1 L2/L1", "f1": "F1", "exact_match": "EM"}

# --- a cell opened in another page (set before that page draws the sidebar) ---------------------
OPEN_KEY = "_sw_open"
if st.session_state.get(OPEN_KEY):
    st.switch_page(st.session_state.pop(OPEN_KEY))


def _open(page: str, run: str, models: list[str], l2: str | None) -> None:
    """Open a cell in XQuAD or Attention: its exported systems in the sidebar, its questions or
    its world's pairs as the data (those pages take their run from the sidebar's models)."""
    st.session_state["xlviz_models"] = models
    if page.endswith("xquad.py"):
        st.session_state["xq_source"] = f"run:{run}"
    else:
        st.session_state.update(att_source=ua.run_pairs_label(), att_run=run)
        if l2:
            st.session_state["att_l2"] = l2
    st.session_state[OPEN_KEY] = page


st.title("Sweeps")
st.caption("A sweep runs every cell of a grid over any settings (grammars × seeds, step budgets, ...) as an ordinary "
           "transfer run, and reports each system's mean over seeds with its 95% interval (docs/sweep.md).")
root = checkpoints_root().resolve()
folders = sweeps_view.all_sweeps(root)

# --- start a sweep ------------------------------------------------------------------------------
defaults = sweeps_view.SweepForm()
def start_sweep_form() -> list | None:
    """The form that starts ``xlviz sweep``, drawn only while its expander is open (a visit to the
    page sends none of its widgets). Returns the sweeps listed afresh once one started."""
    started = None
    with st.form("start_sweep"):
        st.caption("One row per setting: KEY=V1,V2,... (the CLI's --grid). world.languages takes grammar presets "
                   "(svo step1 step2 step3 sov tr cy) or code:grammar entries, one L2 per value; seed, pretrain_steps, "
                   "world.preference, ... any setting. Every combination is a cell.")
        grid = st.text_area("Grid", value=defaults.grid, height=100)
        options = runs_view.system_options()
        systems = st.multiselect("Systems (methods)", list(options), default=list(defaults.methods),
                                 format_func=lambda s: f"{s} — {options[s]}")
        c1, c2, c3, c4, c5 = st.columns(5)
        model_size = c1.selectbox("Model size", runs_view.MODEL_SIZES, index=runs_view.MODEL_SIZES.index(defaults.model_size))
        pretrain = c2.number_input("Pre-training steps", min_value=1, value=defaults.pretrain_steps, step=50)
        transfer = c3.number_input("Transfer steps", min_value=1, value=defaults.transfer_steps, step=50)
        finetune = c4.number_input("Fine-tuning steps", min_value=1, value=defaults.finetune_steps, step=50)
        parallel = c5.number_input("Cells at once", min_value=1, max_value=64, value=defaults.parallel, step=1,
                                   help="Each cell's stages already use the cores (Stages at once); more cells at once "
                                   "pay off on many cores.")
        c1, c2, c3, c4, c5, c6 = st.columns(6)
        mlm_batch = c1.number_input("MLM batch", min_value=1, value=defaults.mlm_batch_size, step=16)
        batch = c2.number_input("QA batch", min_value=1, value=defaults.batch_size, step=8)
        docs = c3.number_input("Corpus documents", min_value=10, value=defaults.corpus_documents, step=500)
        qa_train = c4.number_input("QA training paragraphs", min_value=1, value=defaults.qa_train_paragraphs, step=100)
        qa_test = c5.number_input("QA test paragraphs", min_value=1, value=defaults.qa_test_paragraphs, step=20)
        workers = c6.number_input("Stages at once", min_value=0, max_value=64, value=defaults.workers, step=1,
                                  help="0: one per CPU core (at most 4).")
        name = st.text_input("Sweep name (optional)", placeholder="sweep-<date>-<time>")
        submitted = st.form_submit_button("Start sweep", type="primary", icon=":material/rocket_launch:")
    if submitted:
        with guard("Could not start the sweep"):
            form = sweeps_view.SweepForm(
                grid=grid, methods=tuple(systems), model_size=model_size, pretrain_steps=int(pretrain),
                transfer_steps=int(transfer), finetune_steps=int(finetune), batch_size=int(batch),
                mlm_batch_size=int(mlm_batch), corpus_documents=int(docs), qa_train_paragraphs=int(qa_train),
                qa_test_paragraphs=int(qa_test), workers=int(workers), parallel=int(parallel))
            folder, argv, n = sweeps_view.prepare_sweep(form, root, name)  # the CLI's checks, before any folder exists
            pid = sweeps_view.start(folder, argv)
            st.session_state["sw_sweep"] = folder.name
            st.success(f"Started sweep **{md_text(folder.name)}**: {n} cells (process {pid}).", icon=":material/check_circle:")
            started = sweeps_view.all_sweeps(root)
    return started


folders = open_only("Start a sweep", start_sweep_form, key="sw_start", expanded=not folders,
                    icon=":material/play_arrow:") or folders

if not folders:
    st.info("No sweeps yet — start one above, or run `xlviz sweep --out <checkpoints>/<name> ...`.", icon=":material/info:")
    write_url(URL_KEYS)
    st.stop()

# --- all sweeps ---------------------------------------------------------------------------------
summaries = {f.name: sweeps_view.sweep_summary(f) for f in folders}
st.subheader("All sweeps")
st.dataframe(sweeps_view.sweeps_table(list(summaries.values())), hide_index=True, width="stretch", key="sw_table",
             placeholder=NA)
names = list(summaries)
if st.session_state.get("sw_sweep") not in names:
    st.session_state["sw_sweep"] = names[0]
chosen = st.selectbox("Sweep", names, key="sw_sweep",
                      format_func=fresh_label("sw_sweep", lambda n: f"{n} ({sweeps_view.state(summaries[n])})"))


def _cancel(folder) -> None:
    with guard("Could not cancel"):
        jobs.cancel(sweeps_view.record_dir(folder))


def _resume(folder) -> None:
    with guard("Could not resume"):
        sweeps_view.resume(folder)


def watch(name: str) -> None:
    """The sweep's state, each cell's state and the sweep's log; re-drawn while it runs."""
    summary = sweeps_view.sweep_summary(root / name)
    state = sweeps_view.state(summary)
    if st.session_state.get("_sw_drawn") not in (None, (name, state)) and st.session_state["_sw_drawn"][0] == name:
        st.session_state["_sw_drawn"] = (name, state)
        st.rerun()  # finished or started: the whole page (results, polling) follows
    st.session_state["_sw_drawn"] = (name, state)
    counts = summary.counts()
    head, b1, b2 = st.columns([6, 1, 1], vertical_alignment="center")
    head.markdown(f"#### {md_text(name)} · {state}")
    if state in ACTIVE:
        b1.button("Cancel", key=f"sw_cancel_{name}", on_click=_cancel, args=(summary.path,), icon=":material/stop:",
                  help="Stops the sweep's process (and the cell it runs); re-run or Resume continues it.")
    elif state in ("stopped", "cancelled", "failed") and sweeps_view.restart_argv(summary.path):
        b2.button("Resume", key=f"sw_resume_{name}", on_click=_resume, args=(summary.path,), icon=":material/replay:")
    from xlviz.runs import Run

    record = sweeps_view.record_dir(summary.path)
    log = Run(record).log_tail(15) or jobs.job_output_tail(record, 15)
    if summary.problem:
        if state == "starting":
            st.caption("The sweep's process is starting: it records the grid and its cells in a moment.")
        else:
            st.error(md_text(summary.problem), icon=":material/error:")
        st.code(jobs.job_output_tail(record, 15) or log or "(no output)", language=None)
        return
    done = counts.get("completed", 0)
    st.progress(done / max(len(summary.cells), 1), text=md_text(f"{done} of {len(summary.cells)} cells completed"
                                                               + "".join(f" · {v} {k}" for k, v in counts.items() if k != "completed")))
    st.dataframe(sweeps_view.cells_table(summary), hide_index=True, width="stretch", key=f"sw_cells_{name}", placeholder=NA)
    open_only("Sweep log", lambda: st.code(log or "(empty)", language=None), key=f"sw_log_open_{name}",
              expanded=state == "failed")


with st.container(border=True):
    every = POLL_S if sweeps_view.state(summaries[chosen]) in ACTIVE else None
    st.fragment(watch, run_every=every)(chosen)
summary = summaries[chosen]

# --- results ------------------------------------------------------------------------------------
st.subheader("Results over seeds")
rows = []
with guard("Could not read the sweep's results"):
    rows = sweeps_view.sweep_rows(summary.path)
if not rows:
    st.info("No cell has results yet (results.json is written when a cell's evaluation ends).", icon=":material/info:")
    write_url(URL_KEYS)
    st.stop()
systems_all = list(dict.fromkeys(r["system"] for r in rows))
if "sw_systems" in st.session_state:
    st.session_state["sw_systems"] = [s for s in st.session_state["sw_systems"] if s in systems_all] or systems_all
picked = st.multiselect("Systems", systems_all, default=systems_all, key="sw_systems")
st.caption("Mean over seeds [95% Student-t interval over the seeds' values; none with one seed; 2 seeds: one degree "
           "of freedom, wide]; [seeds+paragraphs]: the t widened by the test set's own paragraph-sampling variance "
           "(one seed: paragraph bootstrap, test-set noise only). F1 L2/L1 "
           "divides by the same system's English F1 in the same cell; distance: typological features that differ from "
           "English (docs/typology.md). EM beside F1: the floor's F1 is mostly partial credit.")
st.dataframe(sweeps_view.results_table(rows, picked), hide_index=True, width="stretch", key="sw_results", placeholder=NA)
excluded = sweeps_view.excluded_lines(rows)
if excluded:
    st.warning("Left out as degenerate (the model failed to learn; not a result, in no mean, ratio or difference):\n\n"
               + "\n".join(f"- {md_text(line)}" for line in excluded), icon=":material/warning:")
with guard("Could not read the cells' stage times"):
    timing = sweeps_view.timing_line(summary.path)
    if timing:
        st.caption(timing)
charted = sweeps_view.live_rows(rows)  # only rows with a live seed are drawn or paired
if not charted:
    st.info("Every row of this sweep is degenerate: nothing to chart or pair.", icon=":material/info:")
else:
    with guard("Could not draw the figure"):
        fig = sweeps_view.ratio_figure(charted, picked or None)
        fig.update_layout(title_text="Transfer ratio against typological distance (mean over seeds, 95% band)")
        plotly(fig, key="sw_ratio_fig")

st.subheader("Paired difference")
c1, c2, c3 = st.columns(3)
for key, i in (("sw_pair_a", 0), ("sw_pair_b", 1)):
    if st.session_state.get(key) not in systems_all:
        st.session_state[key] = systems_all[min(i, len(systems_all) - 1)]
a = c1.selectbox("System A", systems_all, key="sw_pair_a")
b = c2.selectbox("minus system B", systems_all, key="sw_pair_b")
if st.session_state.get("sw_metric") not in METRICS:
    st.session_state["sw_metric"] = "ratio"
metric = c3.selectbox("In", list(METRICS), key="sw_metric", format_func=METRICS.get)
if a == b:
    st.info("Pick two different systems.", icon=":material/info:")
else:
    with guard("Could not pair the systems"):
        diff = sweeps_view.paired_table(summary.path, a, b, metric)
        dead = [x for x in (a, b) if not any(r["system"] == x for r in charted)]
        if diff.empty and dead:
            st.info(md_text(f"Every row of {' and '.join(dead)} is degenerate: no paired difference."), icon=":material/info:")
        elif diff.empty:
            st.info("The two systems share no cell and L2.", icon=":material/info:")
        else:
            st.caption("Paired by cell (same seed, world and English body): the mean of the per-seed differences, its "
                       "95% t interval, the paired t p and the Holm-adjusted p over this table's rows (the verdict reads "
                       "it), the exact sign-flip p over seeds (all 2^n patterns; cannot reach 0.05 below 6 seeds). A "
                       "verdict needs 3 seeds or more; seeds for 80% power: what a difference of the observed size "
                       "needs at the observed spread between seeds.")
            st.dataframe(diff, hide_index=True, width="stretch", key="sw_paired", placeholder=NA)

# --- cells as runs ------------------------------------------------------------------------------
st.subheader("Open a cell in the other pages")
cells = [c for c in summary.cells if c.state == "completed"]
if not cells:
    st.caption("No cell has completed yet.")
for cell in cells:
    l2s = sweeps_view.cell_l2s(cell.run, root)
    models = sweeps_view.cell_models(cell.run, root)
    with st.container(border=True):
        st.markdown(f"**{md_text(cell.name)}** · {md_text(cell.setting)}")
        cols = st.columns(2 + 2 * len(l2s))
        cols[0].button("XQuAD", key=f"sw_xq_{cell.name}", on_click=_open, args=("pages/xquad.py", cell.run, models, None),
                       icon=":material/quiz:", disabled=not models, help="Its exported QA systems in the sidebar, its questions")
        cols[1].button("Attention", key=f"sw_att_{cell.name}", on_click=_open,
                       args=("pages/attention.py", cell.run, models, l2s[0] if l2s else None), icon=":material/grid_on:",
                       disabled=not models, help="Its exported systems in the sidebar, its world's sentence pairs")
        for i, l2 in enumerate(l2s):
            cols[2 + 2 * i].page_link("pages/alignment.py", label=f"Alignment · {md_text(l2)}", icon=":material/join_inner:",
                                      query_params={"run": cell.run, "l2": l2})
            cols[3 + 2 * i].page_link("pages/probing.py", label=f"Probing · {md_text(l2)}", icon=":material/science:",
                                      query_params={"run": cell.run, "l2": l2})
write_url(URL_KEYS)
