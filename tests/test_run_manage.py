"""Managing runs: cancel at any moment leaves a resumable or deletable run; delete and archive
(confined to the checkpoints root, never through a link); notes and tags; the config panel;
the same jobs from the command line (``xlviz runs``) and from the Runs page.

A sleeping Python stands in for the job, so no test trains anything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.app_fixtures import open_panel
from xlviz import jobs
from xlviz.cli import main
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.runs import Run, explicit_run_dir, list_runs
from xlviz.views import runs as runs_view


def _start_starting_run(root: Path, monkeypatch, tmp_path: Path) -> tuple[Path, list[str]]:
    """A run folder as the app leaves it while its job is "starting": ``python -m xlviz
    transfer --run-dir ...`` runs (an ``xlviz`` package on its PYTHONPATH that only sleeps, so
    the recorded command line is the real one) and has not written its config."""
    fake = tmp_path / "fake-xlviz"
    (fake / "xlviz").mkdir(parents=True)
    (fake / "xlviz" / "__init__.py").write_text("")
    (fake / "xlviz" / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    run_dir = root / "fresh-run"
    form_argv = runs_view.TransferForm().argv(run_dir)
    pid = jobs.start_job(form_argv, run_dir, env={"PYTHONPATH": str(fake)})
    assert jobs.effective_state(run_dir) == "starting" and pid == jobs.job_info(run_dir)["pid"]
    return run_dir, form_argv


def test_cancel_while_starting_leaves_a_resumable_deletable_run(tmp_path, monkeypatch):
    root = tmp_path / "checkpoints"
    run_dir, form_argv = _start_starting_run(root, monkeypatch, tmp_path)
    assert jobs.cancel(run_dir, grace_s=2.0)
    assert not jobs.is_alive(run_dir)
    # one state everywhere: cancelled (not "failed" in the panel and "cancelled" in the log)
    assert jobs.effective_state(run_dir) == "cancelled"
    table = runs_view.run_table(runs_view.all_runs(root))
    assert table.set_index("run").loc["fresh-run", "state"] == "cancelled"  # not "unreadable: run config not found"
    assert "cancelled" in jobs.job_output_tail(run_dir)
    # the folder is still one the transfer command accepts, so the same command can start again
    explicit_run_dir(run_dir, root, {"name": "fresh-run"})
    assert jobs.can_resume(run_dir)
    started = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, path: started.append((list(argv), Path(path))) or 1)
    assert jobs.resume(run_dir) == 1
    assert started == [(form_argv, run_dir)]
    # ... or it is deleted cleanly
    jobs.delete_run(root, "fresh-run")
    assert not run_dir.exists() and runs_view.all_runs(root) == []


def test_restart_refuses_a_recorded_command_for_another_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tmp_path))
    run_dir = tmp_path / "a"
    run_dir.mkdir()
    other = runs_view.TransferForm().argv(tmp_path / "b")
    atomic_write_json(run_dir / jobs.JOB_FILE, {"pid": 0, "argv": [sys.executable, "-m", "xlviz", *other], "cancelled": "x"})
    assert jobs.restart_argv(run_dir) is None and not jobs.can_resume(run_dir)
    atomic_write_json(run_dir / jobs.JOB_FILE, {"pid": 0, "argv": ["sh", "-c", "rm -rf /"], "cancelled": "x"})
    with pytest.raises(XlvizError, match="not a run folder"):
        jobs.resume(run_dir)


def _finished(root: Path, name: str) -> Run:
    run = Run(root / name)
    run.write_config({"name": name, "seed": 3, "world": {"languages": [{"code": "en"}, {"code": "sov"}]}})
    run.update_status(state="completed", stages_done=["s1"])
    return run


def test_delete_is_confined_to_the_root_and_never_follows_links(tmp_path):
    root = tmp_path / "checkpoints"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    run = _finished(root, "r1")
    (run.path / "link-out").symlink_to(outside)
    (root / "linked-run").symlink_to(outside)
    for name in ("../outside", "..", ".archive", "a/b", "linked-run", "missing"):
        with pytest.raises(XlvizError):
            jobs.delete_run(root, name)
    assert (outside / "keep.txt").read_text() == "precious"
    jobs.delete_run(root, "r1")
    assert not run.path.exists()
    assert (outside / "keep.txt").read_text() == "precious", "a link inside the run is removed, not followed"
    assert (root / "linked-run").is_symlink()


def test_a_running_run_is_neither_deleted_nor_archived(tmp_path, monkeypatch):
    root = tmp_path / "checkpoints"
    run = _finished(root, "busy")
    monkeypatch.setattr(jobs, "is_alive", lambda d: Path(d).name == "busy")
    for remove in (jobs.delete_run, jobs.archive_run):
        with pytest.raises(XlvizError, match="cancel it first"):
            remove(root, "busy")
    assert run.exists()


def test_archive_moves_into_dot_archive_and_out_of_the_lists(tmp_path):
    root = tmp_path / "checkpoints"
    _finished(root, "old")
    dest = jobs.archive_run(root, "old")
    assert dest == root / ".archive" / "old" and Run(dest).exists()
    assert list_runs(root) == [] and runs_view.all_runs(root) == []
    _finished(root, "old")
    assert jobs.archive_run(root, "old") == root / ".archive" / "old-2"


def test_notes_and_tags_round_trip_and_bad_ones_get_one_line(tmp_path):
    run = _finished(tmp_path, "noted")
    assert run.notes() == {"note": "", "tags": []}
    run.write_notes(note="**not bold** <script>x</script>\nsecond line", tags=["baseline", "lr-3e4", "baseline"])
    assert run.notes() == {"note": "**not bold** <script>x</script>\nsecond line", "tags": ["baseline", "lr-3e4"]}
    run.write_notes(tags=["b"])
    assert run.notes()["note"].startswith("**not bold**"), "writing tags keeps the note"
    with pytest.raises(XlvizError, match="tag") as e:
        run.write_notes(tags=["../etc"])
    assert e.value.field == "tags"
    assert run.notes()["tags"] == ["b"], "a refused write loses nothing"
    run.notes_path.write_text('{"note": 3}')
    with pytest.raises(XlvizError, match="note"):
        run.notes()
    table = runs_view.run_table([run])
    assert table.loc[0, "tags"] == "unreadable notes.json" and table.loc[0, "state"] == "completed"


def test_config_table_shows_the_whole_config(tmp_path):
    run = _finished(tmp_path, "cfg")
    table = runs_view.config_table(run)
    values = dict(zip(table["setting"], table["value"]))
    assert values["seed"] == "3" and values["name"] == "cfg" and "world.languages" in values
    assert runs_view.config_table(Run(tmp_path / "none")).empty


def test_cli_runs_delete_archive_note_tag(tmp_path, capsys):
    root = tmp_path / "checkpoints"
    _finished(root, "c1")
    _finished(root, "c2")
    out = ["--out", str(root)]
    assert main(["runs", "note", "c1", "first try", *out]) == 0
    assert main(["runs", "tag", "c1", "baseline", "seed3", *out]) == 0
    assert main(["runs", "tag", "c1", "--remove", "seed3", *out]) == 0
    capsys.readouterr()
    assert main(["runs", "note", "c1", *out]) == 0 and capsys.readouterr().out.strip() == "first try"
    assert main(["runs", "tag", "c1", *out]) == 0 and capsys.readouterr().out.strip() == "baseline"
    assert main(["runs", "delete", "c1", *out]) == 2, "delete needs --yes"
    assert "--yes" in capsys.readouterr().err and (root / "c1").exists()
    assert main(["runs", "delete", "c1", "--yes", *out]) == 0 and not (root / "c1").exists()
    # a path names a run only in the checkpoints root (--out, else $XLVIZ_CHECKPOINTS): never another folder's
    assert main(["runs", "archive", str(root / "c2")]) == 2 and (root / "c2").exists()
    assert main(["runs", "archive", str(root / "c2"), *out]) == 0 and (root / ".archive" / "c2" / "config.json").exists()
    assert main(["runs", "delete", "../x", "--yes", *out]) == 2
    assert main(["runs", "tag", "c2", "bad/tag", *out]) == 2


# --- the Runs page ---------------------------------------------------------------------------

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _runs_page(root: Path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_a_picker_sends_its_label_again_when_only_the_label_changed(tmp_path):
    """A run picker's label carries the run's state; when the state changes and the pick does
    not, the page must send the new label (the browser shows the last one it got)."""
    from streamlit.testing.v1 import AppTest

    script = tmp_path / "picker.py"
    script.write_text(
        "import streamlit as st\n"
        "from xlviz.ui.state import fresh_label\n"
        "states = st.session_state.setdefault('states', {'a': 'starting', 'b': 'completed'})\n"
        "st.selectbox('Run', ['a', 'b'], key='pick', format_func=fresh_label('pick', lambda n: f'{n} ({states[n]})', 'a'))\n")
    at = AppTest.from_file(str(script)).run()
    assert at.selectbox(key="pick").value == "a"
    at.session_state["states"] = {"a": "cancelled", "b": "completed"}
    at.run()
    picker = at.selectbox(key="pick")
    assert picker.value == "a" and picker.proto.set_value and picker.proto.raw_value == "a (cancelled)"
    at.run()  # nothing changed: nothing to send again (the user's pick is not overridden)
    assert not at.selectbox(key="pick").proto.set_value
    at.selectbox(key="pick").select("b").run()
    assert at.selectbox(key="pick").value == "b"


def test_runs_page_notes_config_and_delete(tmp_path, monkeypatch):
    root = tmp_path / "checkpoints"
    run = _finished(root, "page-run")
    run.write_notes(note="**kept as text**", tags=["t1"])
    at = _runs_page(root, monkeypatch)
    assert not at.text_area, "a closed panel sends nothing"
    at.session_state["runs_remove_open_page-run"] = True
    at = open_panel(at, "runs_notes_open_page-run")
    note = at.text_area(key="runs_note_page-run")
    assert note.value == "**kept as text**"
    assert at.text_input(key="runs_tags_page-run").value == "t1"
    config = next(d.value for d in at.dataframe if list(d.value.columns) == ["setting", "value"])
    assert dict(zip(config["setting"], config["value"]))["seed"] == "3"
    table = next(d.value for d in at.dataframe if "tags" in d.value.columns)
    assert table.set_index("run").loc["page-run", "tags"] == "t1"
    note.set_value("changed")
    at.text_input(key="runs_tags_page-run").set_value("t1, t2")
    at.button(key="FormSubmitter:runs_notes_page-run-Save notes").click().run()
    assert not at.exception
    assert run.notes() == {"note": "changed", "tags": ["t1", "t2"]}
    assert at.button(key="runs_delete_page-run").disabled, "delete waits for the confirmation"
    at.checkbox(key="runs_confirm_page-run").check().run()
    at.button(key="runs_delete_page-run").click().run()
    assert not at.exception and not run.path.exists()
    assert "No runs yet" in "\n".join(str(e.value) for e in at.info)


def test_runs_page_offers_resume_after_cancel_while_starting(tmp_path, monkeypatch):
    root = tmp_path / "checkpoints"
    run_dir, form_argv = _start_starting_run(root, monkeypatch, tmp_path)
    try:
        at = _runs_page(root, monkeypatch)
        assert "(starting)" in at.selectbox(key="runs_live_select").format_func("fresh-run")
        at.button(key="cancel_fresh-run").click().run()
        assert not at.exception
        picker = at.selectbox(key="runs_live_select")
        assert picker.format_func("fresh-run") == "fresh-run (cancelled)"
        # the browser keeps the label it was last sent: the new one must be sent, not only computed
        assert picker.proto.set_value and picker.proto.raw_value == "fresh-run (cancelled)", picker.proto
        assert not [e for e in at.error if "failed" in str(e.value)]
        started = []
        monkeypatch.setattr(jobs, "start_job", lambda argv, path: started.append(list(argv)) or 1)
        at.button(key="resume_fresh-run").click().run()
        assert started == [form_argv]
    finally:
        info = jobs.job_info(run_dir) or {}
        if jobs.is_alive(run_dir):
            os.killpg(int(info["pgid"]), 9)
