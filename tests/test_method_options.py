"""Each method's options live in one dataclass in its module: the CLI's flags, the Runs form's
fields and the run config's settings all come from it, a bad value is one line naming the
field, and configs written before (flat keys) load unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from xlviz.cli import build_parser
from xlviz.errors import XlvizError
from xlviz.methods import all_systems, methods, resolve
from xlviz.methods.options import MethodOptions, all_option_fields, option_fields
from xlviz.transfer.config import TransferConfig, TransferSettings
from xlviz.views import runs as runs_view

OPTIONS = all_option_fields()
# A value of the wrong kind for each type, and one out of range where the type has a range.
WRONG_TYPE = {int: "12", float: "x", str: 7, bool: "yes"}


def _transfer_parser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None) and "transfer" in a.choices)
    return sub.choices["transfer"]


def test_the_methods_with_settings_declare_options_dataclasses():
    with_options = {m.name: m.options for m in methods().values() if m.options is not None}
    assert {"monotrans", "joint", "clwe", "veco", "ppa", "forgetting", "wechsel"} <= set(with_options)
    for name, cls in with_options.items():
        assert dataclasses.is_dataclass(cls) and issubclass(cls, MethodOptions), name
        cls()  # the defaults are valid
        for f in option_fields(cls, name):
            assert f.type in (int, float, str, bool) and f.help, (name, f.name)
    names = [f.name for f in OPTIONS]
    assert len(names) == len(set(names)), "no option is declared by two methods"


def test_the_config_stores_every_option_flat_with_the_same_default():
    shared = {f.name for f in dataclasses.fields(TransferSettings)}
    cfg = TransferConfig()
    for opt in OPTIONS:
        assert opt.name not in shared, f"{opt.name} is declared twice"
        assert getattr(cfg, opt.name) == opt.default
    assert set(cfg.to_dict()) == shared | {f.name for f in OPTIONS}


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_every_option_has_a_generated_flag(opt):
    p = _transfer_parser()
    action = next((a for a in p._actions if opt.flag in a.option_strings), None)
    assert action is not None, f"no {opt.flag}"
    assert action.dest == opt.name and action.default is None
    assert opt.help.split()[0] in (action.help or "")
    if opt.choices:
        assert tuple(action.choices) == tuple(opt.choices)


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_a_bad_value_is_one_line_naming_the_field(opt):
    with pytest.raises(XlvizError) as e:
        TransferConfig.from_dict({opt.name: WRONG_TYPE[opt.type]}, path="run.json")
    assert e.value.field == opt.name
    assert "\n" not in str(e.value) and str(e.value).startswith(f"run.json field '{opt.name}'")


def test_ranges_and_choices_are_checked_with_the_field_named():
    cases = {"ppa_momentum": 1.0, "language_alpha": 1.5, "joint_vocab_size": 20, "noise_rule": "loud", "veco_ca_steps": 0,
             "wechsel_temperature": 0.0, "forget_every": -1, "dropout": 1.0, "ppa_base": "  "}
    for name, value in cases.items():
        with pytest.raises(XlvizError) as e:
            TransferConfig.from_dict({name: value})
        assert e.value.field == name, (name, str(e.value))
    # 0 as the documented "use the default" value is accepted where the option says so
    assert TransferConfig.from_dict({"joint_vocab_size": 0, "ppa_pairs": 0, "forget_every": 0}).joint_vocab_size == 0
    # a check against the rest of the run's config (the world's sizes)
    with pytest.raises(XlvizError, match="parallel training pairs") as e:
        TransferConfig.from_dict({"ppa_pairs": 50, "world": {"parallel_train_pairs": 40}})
    assert e.value.field == "ppa_pairs"


def test_flags_reach_the_config_and_leave_the_file_values_alone(tmp_path):
    from xlviz.commands.transfer import build_config

    args = _transfer_parser().parse_args(["--ppa-steps", "7", "--noise-rule", "absolute", "--mlm-head-mask-row", "false",
                                          "--language-alpha", "0.5"])
    cfg = build_config(args, {"veco_init": "jointpair-disjoint", "ppa_steps": 3})
    assert (cfg.ppa_steps, cfg.noise_rule, cfg.mlm_head_mask_row, cfg.language_alpha) == (7, "absolute", False, 0.5)
    assert cfg.veco_init == "jointpair-disjoint"  # the file's, no flag given
    with pytest.raises(SystemExit):
        _transfer_parser().parse_args(["--noise-rule", "loud"])


def test_an_old_flat_config_loads_and_resumes(tmp_path):
    """A run folder written before the options dataclasses: its config.json lists every setting
    flat (``"ppa_steps": 1000``); it loads to the same config and writes the same keys back."""
    from xlviz.transfer.pipeline import Pipeline

    old = {"name": "old", "seed": 2, "methods": ["monotrans", "ppa"], "model_size": "tiny", "ppa_steps": 17, "ppa_queue_size": 16,
           "ppa_batch_size": 8, "noise_rule": "absolute", "clwe_init": "identical", "veco_init": "jointpair-disjoint",
           "wechsel_dictionary": "seed", "joint_vocab_size": 64, "mlm_head_top_layers": 1, "adapter_size": 16,
           "world": {"parallel_train_pairs": 40}, "versions": {"xlviz": "0"}}
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(old))
    pipeline = Pipeline.resume(run)
    cfg = pipeline.cfg
    assert (cfg.ppa_steps, cfg.noise_rule, cfg.clwe_init, cfg.veco_init, cfg.wechsel_dictionary, cfg.joint_vocab_size,
            cfg.mlm_head_top_layers, cfg.adapter_size) == (17, "absolute", "identical", "jointpair-disjoint", "seed", 64, 1, 16)
    record = pipeline.config_record()
    assert {k: record[k] for k in old if k not in ("world", "versions", "methods")} == {k: v for k, v in old.items()
                                                                                         if k not in ("world", "versions", "methods")}
    assert {f.name for f in OPTIONS} <= set(record), "the recorded config lists every setting"
    assert TransferConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_the_runs_form_offers_every_option_and_passes_changed_ones():
    offered = {f.name for fs in runs_view.method_option_fields().values() for f in fs}
    assert offered == {f.name for f in OPTIONS}
    kinds = {runs_view.option_widget(f) for f in OPTIONS}
    assert kinds == {"checkbox", "select", "text", "integer", "number"}
    form = runs_view.TransferForm(options={**{f.name: f.default for f in OPTIONS}, "ppa_steps": 9, "noise_rule": "absolute",
                                           "mlm_head_mask_row": False, "ppa_lr": 0.002})
    argv = form.argv("/tmp/x")
    tail = argv[argv.index("--workers") + 2:]
    assert dict(zip(tail[::2], tail[1::2])) == {"--mlm-head-mask-row": "false", "--noise-rule": "absolute", "--ppa-steps": "9",
                                                "--ppa-lr": "0.002"}
    args = _transfer_parser().parse_args(argv[1:])
    assert (args.ppa_steps, args.noise_rule, args.mlm_head_mask_row, args.ppa_lr) == (9, "absolute", False, 0.002)
    assert runs_view.TransferForm().argv("/tmp/x")[-2:] == ["--workers", "0"], "unchanged options add no flags"
    with pytest.raises(XlvizError) as e:
        runs_view.TransferForm(options={"ppa_momentum": 2.0}).validate()
    assert e.value.field == "ppa_momentum"


def test_the_runs_page_draws_one_widget_per_option(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from xlviz import jobs

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tmp_path))
    calls = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir: calls.append(list(argv)) or 1)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    widgets = {w.key: w for kind in (at.checkbox, at.selectbox, at.text_input, at.number_input) for w in kind
               if (w.key or "").startswith("runs_option_")}
    assert set(widgets) == {f"runs_option_{f.name}" for f in OPTIONS}
    widgets["runs_option_veco_ca_steps"].set_value(5)
    widgets["runs_option_clwe_init"].set_value("identical")
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not at.exception and len(calls) == 1, [e.value for e in at.error]
    opts = dict(zip(calls[0][1::2], calls[0][2::2]))
    assert opts["--veco-ca-steps"] == "5" and opts["--clwe-init"] == "identical"
    assert "--ppa-steps" not in opts


def test_another_vocabulary_size_is_one_row_of_the_joint_table(monkeypatch):
    """JOINTMULTI at another vocabulary size: one row in xlviz/methods/joint.py, and the
    registry, the CLI's choices and the Runs form list it."""
    from xlviz.commands.transfer import methods_help
    from xlviz.methods import joint

    monkeypatch.setitem(joint.VARIANTS, "jointmulti-64k", joint.JointVariant(pair=False, disjoint=False, paper_vocab=64_000,
                                                                              paper_row="JOINTMULTI 64k voc"))
    assert "jointmulti-64k" in all_systems() and resolve(["jointmulti-64k"]) == ["jointmulti-64k"]
    assert "jointmulti-64k" in resolve(["joint"])
    assert "jointmulti-64k" in methods_help()
    assert "jointmulti-64k" in runs_view.system_options()
    cfg = TransferConfig.from_dict({"methods": ["jointmulti-64k"], "vocab_size": 100})
    assert joint.joint_vocab_size(cfg, "jointmulti-64k") == 200
    assert "64k" in runs_view.describe("jointmulti-64k")
