"""Runs: start MONOTRANS transfer runs, watch them train, compare their results.

Training never happens in this script: the form starts ``xlviz transfer`` as a detached
process (xlviz.jobs) and the live view polls the run folder, so runs go on across reruns,
page switches, closed tabs and app restarts.
"""

import pandas as pd
import streamlit as st

from xlviz import jobs
from xlviz.errors import XlvizError
from xlviz.runs import KILLED, NOTE_MAX, Run, checkpoints_root
from xlviz.views import runs as runs_view
from xlviz.views.choices import run_languages
from xlviz.views.colours import system_colours
from xlviz.ui.common import NA, FIGURES_KEY, file_stamp, guard, open_only, plotly, shared_figure, tidied
from xlviz.ui.sidebar import page_setup
from xlviz.ui.tables import compare_column_config
from xlviz.ui.state import checked_float, fresh_label, url_state, write_url
from xlviz.views.text import md_join, md_text

page_setup()
URL_KEYS = ("runs_live_select", "runs_compare_pick", "runs_smoothing", "runs_curve_x")
url_state("runs", URL_KEYS)

POLL_S = 2.0
ACTIVE = ("running", "starting")
STATE_ICONS = {
    "running": ":green[:material/progress_activity:]", "starting": ":orange[:material/hourglass_top:]",
    "completed": ":green[:material/check_circle:]", "failed": ":red[:material/error:]",
    "cancelled": ":gray[:material/cancel:]", "stopped": ":orange[:material/pause_circle:]",
}

st.title("Runs")
root = checkpoints_root().resolve()
runs = runs_view.all_runs(root)
defaults = runs_view.TransferForm()


def option_input(where, opt):
    """One method option's widget, by its type (runs_view.option_widget), its default preset."""
    key, kind = f"runs_option_{opt.name}", runs_view.option_widget(opt)
    if kind == "checkbox":
        return where.checkbox(opt.name, value=opt.default, help=opt.help, key=key)
    if kind == "select":
        return where.selectbox(opt.name, list(opt.choices), index=list(opt.choices).index(opt.default), help=opt.help, key=key)
    if kind == "text":
        return where.text_input(opt.name, value=opt.default, help=opt.help, key=key)
    if kind == "integer":
        return int(where.number_input(opt.name, value=int(opt.default), step=1, help=opt.help, key=key))
    return float(where.number_input(opt.name, value=float(opt.default), step=runs_view.option_step(opt), format="%g",
                                    help=opt.help, key=key))


# --- start a run --------------------------------------------------------------------------
def start_run_form() -> list[Run] | None:
    """The form that starts ``xlviz transfer``: about 65 widgets, drawn only while its expander is
    open, so a visit to the page sends none of them. Returns the runs listed afresh once one started."""
    started = None
    with st.form("start_run"):
        st.caption("Defaults finish in a few minutes on a CPU. The run goes on in the background; "
                   "you can close the tab and come back.")
        c1, c2, c3, c4 = st.columns([3, 2, 1, 1])
        languages = c1.multiselect("Target languages", runs_view.L2_LANGUAGES, default=list(defaults.languages),
                                   help="Invented L2s of the generated world, one per grammar preset (docs/typology.md): svo keeps "
                                   "English's grammar, sov is verb-final with another script, tr is head-final like Turkish, "
                                   "cy verb-initial like Welsh, step1-step3 go from svo to sov one feature at a time.")
        extra = c1.text_input("More L2s with their own grammar (optional)", placeholder="x:tr+determiner=before, y:cy+adjective=before",
                              help="code:grammar entries, comma-separated: a preset and feature=value changes (features: "
                              "word_order, adposition, adjective, modifier, determiner, question).")
        model_size = c2.selectbox("Model size", runs_view.MODEL_SIZES, index=runs_view.MODEL_SIZES.index(defaults.model_size))
        seed = c3.number_input("Seed", min_value=0, value=defaults.seed, step=1)
        workers = c4.number_input("Stages at once", min_value=0, max_value=64, value=defaults.workers, step=1,
                                  help="Independent stages (the pair models, step 2 per language, the fine-tunings) train "
                                  "side by side in worker processes; 0: one per CPU core (at most 4). Small models gain "
                                  "little from a second thread and a lot from a second core.")
        c1, c2, c3 = st.columns(3)
        pretrain = c1.number_input("Pre-training steps (L1 MLM)", min_value=1, value=defaults.pretrain_steps, step=50)
        transfer = c2.number_input("Transfer steps (L2 embeddings)", min_value=1, value=defaults.transfer_steps, step=50)
        finetune = c3.number_input("Fine-tuning steps (L1 QA)", min_value=1, value=defaults.finetune_steps, step=50)
        sources = runs_view.source_options()
        source = st.selectbox("Data source", list(sources), index=list(sources).index(defaults.source),
                              format_func=lambda s: f"{s} — {sources[s]}",
                              help="What the run trains and scores on (xlviz.data.sources). The languages and world sizes "
                              "below apply to the generated world; a method whose premise the source cannot meet is refused.")
        options = runs_view.system_options()
        systems = st.multiselect("Systems (methods)", list(options), default=list(defaults.methods),
                                 format_func=lambda s: f"{s} — {options[s]}",
                                 help="Every method of the registry (xlviz.methods), trained on the same world, data, "
                                 "model size and step budget; shared stages run once.")
        c1, c2, c3, c4, c5 = st.columns(5)
        mlm_batch = c1.number_input("MLM batch (blocks)", min_value=1, value=defaults.mlm_batch_size, step=16,
                                    help="Token blocks per masked-LM step (steps 1 and 2); many short blocks train fastest.")
        batch = c2.number_input("QA batch size", min_value=1, value=defaults.batch_size, step=8)
        docs = c3.number_input("Corpus documents per language", min_value=10, value=defaults.corpus_documents, step=500)
        qa_train = c4.number_input("QA training paragraphs (L1)", min_value=1, value=defaults.qa_train_paragraphs, step=100)
        qa_test = c5.number_input("QA test paragraphs (per language)", min_value=1, value=defaults.qa_test_paragraphs, step=20)
        st.caption("Method options: each method's own settings (its options dataclass, xlviz.methods); "
                   "they apply to its systems only, and the defaults are the CLI's.")
        option_values = {}
        method_opts = runs_view.method_option_fields()
        for tab, (method, opts) in zip(st.tabs(list(method_opts)), method_opts.items()):
            cols = tab.columns(3)
            for i, opt in enumerate(opts):
                option_values[opt.name] = option_input(cols[i % 3], opt)
        name = st.text_input("Run name (optional)", placeholder="transfer-<date>-<time>")
        submitted = st.form_submit_button("Start run", type="primary", icon=":material/rocket_launch:")
    if submitted:
        with guard("Could not start the run"):
            form = runs_view.TransferForm(
                languages=tuple(languages) + tuple(e.strip() for e in extra.split(",") if e.strip()), model_size=model_size, pretrain_steps=int(pretrain), transfer_steps=int(transfer),
                finetune_steps=int(finetune), methods=tuple(systems), seed=int(seed), batch_size=int(batch),
                mlm_batch_size=int(mlm_batch), corpus_documents=int(docs), qa_train_paragraphs=int(qa_train),
                qa_test_paragraphs=int(qa_test), workers=int(workers), source=source, options=option_values)
            run_dir, argv = runs_view.prepare_run(form, root, name)  # the CLI's checks, before any folder exists
            pid = jobs.start_job(argv, run_dir)
            st.session_state["runs_watch"] = run_dir.name
            st.session_state["runs_live_select"] = run_dir.name  # show the new run in the live view
            st.success(f"Started **{md_text(run_dir.name)}** (process {pid}).", icon=":material/check_circle:")
            started = runs_view.all_runs(root)
    return started


runs = open_only("Start a transfer run", start_run_form, key="runs_start", expanded=not runs,
                 icon=":material/play_arrow:") or runs


# --- live view ------------------------------------------------------------------------------
def _cancel(path):
    with guard("Could not cancel"):
        jobs.cancel(path)


def _resume(path):
    with guard("Could not resume"):
        jobs.resume(path)


def _remove(name: str, how: str) -> None:
    with guard(f"Could not {how} the run"):
        (jobs.delete_run if how == "delete" else jobs.archive_run)(root, name)
        st.toast(f"{'Deleted' if how == 'delete' else 'Archived'} {md_text(name)}.")


def manage_panel(run: Run, state: str) -> None:
    """Notes and tags (notes.json, shown as text), the run's config (read-only) and, once it
    is not running, delete or archive behind a confirmation."""
    open_only("Notes, tags and config", notes_panel, run, key=f"runs_notes_open_{run.name}", icon=":material/edit_note:")
    if state in ACTIVE:
        return
    open_only("Delete or archive", remove_panel, run, key=f"runs_remove_open_{run.name}", icon=":material/delete:")


def notes_panel(run: Run) -> None:
    """The run's notes and tags (a form) and its config (read-only)."""
    with guard("Could not read the notes"):
        notes = run.notes()
        with st.form(f"runs_notes_{run.name}", border=False):
            note = st.text_area("Note", value=notes["note"], max_chars=NOTE_MAX, key=f"runs_note_{run.name}")
            tags = st.text_input("Tags (comma-separated)", value=", ".join(notes["tags"]), key=f"runs_tags_{run.name}")
            if st.form_submit_button("Save notes", icon=":material/save:"):
                with guard("Could not save the notes"):
                    run.write_notes(note=note, tags=runs_view.parse_tags(tags))
                    st.success("Saved.", icon=":material/check_circle:")
    with guard("Could not read the config"):
        cfg = runs_view.config_table(run)
        if cfg.empty:
            st.caption("No config.json yet: the run has not started writing.")
        else:
            st.dataframe(cfg, hide_index=True, width="stretch", key=f"runs_config_{run.name}")


def remove_panel(run: Run) -> None:
    """Delete or archive, behind a confirmation."""
    sure = st.checkbox(f"Remove {md_text(run.name)} from the list", key=f"runs_confirm_{run.name}",
                       help="Archive moves the folder into .archive/ under the checkpoints root; delete removes it for good.")
    c1, c2 = st.columns(2)
    c1.button("Archive", key=f"runs_archive_{run.name}", disabled=not sure, on_click=_remove, args=(run.name, "archive"),
              icon=":material/archive:")
    c2.button("Delete for good", key=f"runs_delete_{run.name}", disabled=not sure, on_click=_remove,
              args=(run.name, "delete"), type="primary", icon=":material/delete_forever:")


@st.cache_resource(show_spinner=False, max_entries=32)
def loss_figure(run_path: str, stamp: str, _metrics: list[dict]):
    """The run's loss chart (``_metrics``: what ``metrics.jsonl`` holds, ``stamp`` says which
    state of it), built once per state of that file and shared by every session (never changed
    after: tidied here): plotly express takes 0.2-0.4 s for a finished run's twenty panels, and
    a copy out of ``st.cache_data`` 0.3 s more, every time a tab opens the run."""
    return tidied(runs_view.loss_figure(_metrics))


def live_view(path) -> None:
    """One run's state, progress, loss curves and log; re-drawn every POLL_S while it runs."""
    run = Run(path)
    state = jobs.effective_state(path)
    drawn = st.session_state.get("runs_page_states", {}).get(run.name)
    if drawn is not None and drawn != state:
        # The fragment's polling interval and the run picker's "(state)" labels were fixed
        # when the whole page last ran: any change (finished, resumed, started) redraws it all.
        st.rerun()
    prog = runs_view.run_progress(run, state)
    head, b1, b2 = st.columns([6, 1, 1], vertical_alignment="center")
    head.markdown(f"#### {STATE_ICONS.get(state, ':gray[:material/radio_button_unchecked:]')} {md_text(run.name)}")
    if state in ACTIVE:
        b1.button("Cancel", key=f"cancel_{run.name}", on_click=_cancel, args=(path,), icon=":material/stop:")
    if jobs.can_resume(path):
        b2.button("Resume", key=f"resume_{run.name}", on_click=_resume, args=(path,), icon=":material/replay:")
    st.progress(prog.fraction or 0.0, text=md_text(prog.text))  # stage names from status.json
    if prog.problem:
        st.warning(md_text(prog.problem), icon=":material/warning:")
    try:
        status = run.status()
    except Exception:  # noqa: BLE001 - a torn read is retried at the next poll
        status = {}
    if status.get("stages_done"):
        st.caption("Stages done: " + md_join(status["stages_done"]))
    verdicts = runs_view.stage_verdicts(run)
    if not verdicts.empty:  # each judged stage's verdict, as soon as it ends
        if (verdicts["verdict"] == "degenerate").any():
            st.warning("A stage is degenerate (see its verdict below): its model did not learn, and the result rows "
                       "that depend on it are no results.", icon=":material/warning:")
        st.dataframe(verdicts, hide_index=True, width="stretch", key=f"verdicts_{run.name}")
    if state == "failed":
        # status.json still says running though the process is gone (killed by the system): say so
        error = KILLED if status.get("state") == "running" else status.get("error")
        st.error("The run failed: " + (md_text(error) if error else "see the log below"), icon=":material/error:")
    elif state == "stopped":
        st.warning("The run's process is gone (killed, or the machine restarted). Resume goes on from the last "
                   "finished stage.", icon=":material/pause_circle:")
    try:  # a metrics file linked out of the folder, a FIFO or one over its size limit: say so
        metrics = run.metrics(all_attempts=True)
    except XlvizError as e:
        st.warning(md_text(e), icon=":material/warning:")
        metrics = []
    fig = loss_figure(str(run.path), file_stamp(run.metrics_path), metrics)
    if run.skipped_metrics:
        st.warning(md_text(f"{run.metrics_path}: skipped {len(run.skipped_metrics)} unreadable line(s), e.g. {run.skipped_metrics[0]}"),
                   icon=":material/warning:")
    if fig is not None:
        # A completed run opens on its results, its curves one click away: the chart library's
        # code alone costs a new tab about two seconds on 2 cores (docs/results.md, "How fast do
        # the pages open?"). A run in any other state shows them. The default is fixed the first
        # time this session shows the run: the panel stays open while its run finishes.
        shown = st.session_state.setdefault("runs_loss_default", {}).setdefault(run.name, state != "completed")
        open_only("Loss curves", lambda: plotly(fig, key=f"loss_{run.name}"), key=f"runs_loss_open_{run.name}",
                  expanded=shown, icon=":material/show_chart:")
    else:
        st.caption("No training steps logged yet.")
    log = run.log_tail(25) or jobs.job_output_tail(path, 25)
    open_only("Log", lambda: st.code(log or "(empty)", language=None), key=f"runs_log_open_{run.name}",
              expanded=state in ("failed",) or fig is None)
    if state == "failed" and not run.log_tail(1):
        st.code(jobs.job_output_tail(path, 25) or "(no output)", language=None)
    if state == "completed":
        finished_run_panel(run)


def show_results_by_setting(table: pd.DataFrame, languages: list[str]) -> None:
    """F1 by system and language, one table per setting: zero-shot and translate-train numbers
    are never in one table (a system that saw L2 labels is a ceiling, not a transfer result)."""
    for setting, wide in runs_view.results_by_setting(table, languages, ("exact_match", "f1")):  # each cell: score [95% CI]
        st.caption(f"Exact match and F1 (%) by system and language — **{setting}** ({runs_view.SETTING_NOTES[setting]})")
        # n/a, not an empty cell: that system has no row for that language (e.g. the floor in L1)
        st.dataframe(wide, width="stretch", key=f"runs_results_{runs_view.SETTINGS.index(setting)}_{table['run'].iloc[0]}", placeholder=NA)
    st.caption(runs_view.interval_caption(table))


def finished_run_panel(run: Run) -> None:
    """Results of a finished run and links that open the analysis pages preset to it."""
    with guard("Could not read the results"):
        table = runs_view.results_frame([run])
        if not table.empty:
            show_results_by_setting(table, run_languages(run))
    from xlviz.views.export import run_report_html

    figures = dict(st.session_state.get(FIGURES_KEY, {}))
    st.download_button("Run report (HTML)", lambda: run_report_html(run, figures).encode("utf-8"),
                       file_name=f"xlviz-report-{run.name}.html", mime="text/html", icon=":material/description:",
                       key=f"report_{run.name}", on_click="ignore",
                       help="One self-contained file (plotly inlined, no network): config, curves, results and the "
                            "analysis figures drawn in this session.")
    l2s = [l for l in run_languages(run)[1:]]
    if not l2s:
        return
    cols = st.columns(2 * len(l2s))
    for i, l2 in enumerate(l2s):
        cols[2 * i].page_link("pages/alignment.py", label=f"Analyse this run · {md_text(l2)}", icon=":material/join_inner:",
                              query_params={"run": run.name, "l2": l2})
        cols[2 * i + 1].page_link("pages/probing.py", label=f"Probe this run · {md_text(l2)}", icon=":material/science:",
                                  query_params={"run": run.name, "l2": l2})


st.subheader("Live view")
if not runs:
    st.info(runs_view.no_runs_message(root), icon=":material/info:")
else:
    names = [r.name for r in runs]
    if st.session_state.get("runs_live_select") not in names:
        watch = st.session_state.get("runs_watch")
        st.session_state["runs_live_select"] = watch if watch in names else names[0]
    page_states = {n: jobs.effective_state(root / n) for n in names}
    st.session_state["runs_page_states"] = page_states  # what this full render shows; see live_view
    chosen = st.selectbox("Run", names, key="runs_live_select",
                          format_func=fresh_label("runs_live_select", lambda n: f"{n} ({page_states[n]})"))
    st.session_state["runs_watch"] = chosen
    active = [r for r in runs if r.name != chosen and page_states[r.name] in ACTIVE]
    for path in [root / chosen] + [r.path for r in active]:
        every = POLL_S if page_states[path.name] in ACTIVE else None
        with st.container(border=True):
            st.fragment(live_view, run_every=every)(path)
            if path.name == chosen:
                manage_panel(Run(path), page_states[chosen])

# --- all runs + comparison ----------------------------------------------------------------
st.subheader("All runs")
if runs:
    names = [r.name for r in runs]
    with guard("Could not read the runs"):
        table = runs_view.run_table(runs)
        # the scores next to the run's name: at the far right they hid behind the table's scroll
        first = ["run", "state", "best L2 F1, zero-shot", "best L2 F1, L2 labels", "best L2 F1, translate-test", "systems"]
        st.dataframe(table, hide_index=True, width="stretch", key="runs_table",
                     column_order=first + [c for c in table.columns if c not in first],
                     column_config=compare_column_config(table) | {c: st.column_config.NumberColumn(f"{c} (%)", format="%.1f")
                                    for c in ("best L2 F1, zero-shot", "best L2 F1, L2 labels", "best L2 F1, translate-test")},
                     placeholder=NA)
        st.button("Refresh", icon=":material/refresh:", key="runs_refresh",
                  help=f"States refresh with the page ({len(runs)} run{'s' if len(runs) != 1 else ''}).")

    st.subheader("Compare runs")
    # Picked by run name, not table row: a new run shifts the rows, never the comparison.
    if "runs_compare_pick" in st.session_state:
        st.session_state["runs_compare_pick"] = [n for n in st.session_state["runs_compare_pick"] if n in names]
    picked = st.multiselect("Runs to compare", names, key="runs_compare_pick",
                            placeholder="pick two or more runs")
    if len(picked) < 2:
        st.info("Pick two or more runs to compare their curves, configs and exact match / F1 per system and language.",
                icon=":material/info:")
    if picked:
        chosen_runs = [Run(root / n) for n in picked]
        with guard("Could not draw the curves"):
            curves = runs_view.curves_frame(chosen_runs)
            if not curves.empty:
                stages = list(dict.fromkeys(curves["stage"]))
                c1, c2, c3, c4 = st.columns([3, 2, 2, 2], vertical_alignment="bottom")
                keep = c1.multiselect("Stages", stages, default=stages, key="runs_curve_stages")
                # its value through session state only (a URL's value, else 0): a widget given both a
                # default and a session-state value logs Streamlit's warning with a stack trace
                checked_float("runs_smoothing", 0.0, 0.99, 0.0)
                smoothing = c2.slider("Smoothing", 0.0, 0.99, step=0.01, key="runs_smoothing",
                                      help="Exponential moving average, as in TensorBoard (the raw curve stays faint).")
                x_axis = c3.radio("x", ["step", "time (s)"], key="runs_curve_x", horizontal=True)
                logs = c4.segmented_control("Log scale", ["x", "y"], selection_mode="multi", key="runs_curve_log")
                visible = curves[curves["stage"].isin(keep)]
                if not visible.empty:
                    plotly(shared_figure(runs_view.overlay_figure, visible, x="step" if x_axis == "step" else "elapsed",
                                                    smoothing=float(smoothing), log_x="x" in (logs or []),
                                                    log_y="y" in (logs or [])), key="runs_curves_fig")
        if len(picked) >= 2:
            with guard("Could not compare the configs"):
                diff = runs_view.config_diff(chosen_runs)
                with st.expander(f"Config: {len(diff)} key{'s' if len(diff) != 1 else ''} differ", expanded=bool(len(diff))):
                    if diff.empty:
                        st.caption("The runs' configs are the same (names aside).")
                    else:
                        st.dataframe(diff, hide_index=True, width="stretch", key="runs_config_diff", placeholder=NA)
        with guard("Could not compare the runs"):
            long = runs_view.results_frame(chosen_runs)
            if long.empty:
                st.warning("The selected runs have no results yet (results.json is written after evaluation).")
            else:
                st.markdown("**Exact match and F1 (%)**; F1 L2/L1: the share of its L1 F1 a system keeps in the L2; "
                            "parallel pairs: the translation pairs a system trained on.")
                compared = runs_view.compare_table(long)
                for i, setting in enumerate(runs_view.SETTINGS):  # one table per setting, never mixed
                    part = compared[compared["setting"] == setting].drop(columns="setting")
                    if part.empty:
                        continue
                    st.caption(f"**{setting}** — {runs_view.SETTING_NOTES[setting]}; [95% CI]: paragraph bootstrap, 1 seed")
                    part = part.dropna(axis=1, how="all")
                    st.dataframe(part, hide_index=True, width="stretch", key=f"runs_compare_{i}", placeholder=NA,
                                 column_order=runs_view.compare_column_order(part),  # F1 in view at 1,400 px
                                 column_config=compare_column_config(part))
                groups = runs_view.seed_groups(chosen_runs)
                if groups:
                    st.markdown("**Mean ± sd over runs that differ only in their seed**, with the mean's 95% t interval over them")
                    seeds = runs_view.seed_summary(long, groups)
                    st.dataframe(seeds, hide_index=True, width="stretch", key="runs_seeds", placeholder=NA,
                                 column_config=compare_column_config(seeds))
                gone = runs_view.dead(long)
                if len(gone):  # no bar for a row that is no result (the tables above say "degenerate")
                    st.caption(f"Not drawn: {len(gone)} degenerate row{'s' if len(gone) != 1 else ''} (no result); "
                               "the chart's CSV lists them with their verdict.")
                if runs_view.live(long).empty:
                    st.info("Every row of these runs is degenerate: no chart.", icon=":material/info:")
                else:
                    plotly(shared_figure(runs_view.compare_figure, long, system_colours(root)), key="runs_compare_fig")
                st.download_button("Download results (CSV)", lambda long=long: long.to_csv(index=False), file_name="xlviz-results.csv",
                                   mime="text/csv", icon=":material/download:", key="runs_results_csv", on_click="ignore")
else:
    st.info(runs_view.no_runs_message(root), icon=":material/info:")
write_url(URL_KEYS)
