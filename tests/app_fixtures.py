"""A fake but complete run folder for app tests, the browser test and the app benchmark.

Written with ``xlviz.runs.Run`` (the same writers a real run uses): config, status, metrics,
log and results, a small generated world (QA test sets with shared ids, parallel pairs with
gold alignment) and tiny random models saved with ``save_pretrained``: ``s1_pretrain`` (English
MLM) and ``export/monotrans-<lang>`` (BertForQuestionAnswering + tokenizer). Builds in about a
second.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from xlviz.io import atomic_write_json, atomic_write_text
from xlviz.runs import Run

L2 = "sov"


def _world(seed: int = 0):
    from xlviz.data.world import World, WorldConfig

    return World(WorldConfig(seed=seed, qa_test_paragraphs=4, parallel_pairs=12, corpus_documents=50))


def _words(texts) -> list[str]:
    out = set()
    for t in texts:
        for w in t.replace(".", " . ").replace("?", " ? ").replace(",", " , ").split():
            out.add(w.lower())
    return sorted(out)


SUPERVISED = "mono-l2-supervised"  # translate-train: trained on L2 QA labels
PARALLEL = "jointpair-disjoint"   # zero-shot, trained on parallel pairs
PARALLEL_PAIRS = 12


def make_run(root: str | Path, name: str = "demo-run", *, models: bool = True, results_shift: float = 0.0,
             state: str = "completed", translate_train: bool = False) -> Path:
    """Create ``root/name`` as a finished two-language (en + sov) transfer run.

    ``translate_train``: the results also hold a system trained on L2 QA labels (``SUPERVISED``,
    ``l2_labels``, F1 far above every zero-shot row) with its exported sov model, and a
    zero-shot system that used ``PARALLEL_PAIRS`` translation pairs, as rows carry them since
    systems declare what they learn from."""
    from tests.tiny_models import make_tiny

    path = Path(root) / name
    run = Run(path)
    run.write_config({
        "name": name, "seed": 0, "languages": [L2], "model_size": "tiny",
        "steps": {"pretrain": 30, "transfer": 20, "finetune": 20}, "variants": ["base", "floor"],
        # the run's QA decoding settings: the XQuAD page must decode as the run did
        "qa_max_length": 48, "doc_stride": 24, "max_answer_length": 6,
    })
    stages = ["s1_pretrain", f"s2_transfer-{L2}", "s3_finetune"]
    run.update_status(state=state, stage=stages[-1] if state == "completed" else stages[1],
                      progress=1.0 if state == "completed" else 0.5, stages_done=stages if state == "completed" else stages[:1],
                      started=(_dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(minutes=3)).isoformat(timespec="seconds"))
    for stage, n, base in ((stages[0], 30, 9.0), (stages[1], 20, 7.0), (stages[2], 20, 5.5)):
        for step in range(0, n, 5):
            run.log_metric(stage=stage, step=step, loss=base * (0.97 ** step), elapsed=float(step))
    run.log("start")
    run.log("evaluate: done")
    run.write_results([
        {"system": "monotrans", "language": "en", "exact_match": 40.0 + results_shift, "f1": 50.0 + results_shift},
        {"system": "monotrans", "language": L2, "exact_match": 20.0 + results_shift, "f1": 30.0 + results_shift},
        {"system": "floor", "language": L2, "exact_match": 5.0, "f1": 9.0},
    ] + ([
        {"system": PARALLEL, "language": "en", "exact_match": 38.0, "f1": 48.0, "parallel_pairs": PARALLEL_PAIRS, "l2_labels": False},
        {"system": PARALLEL, "language": L2, "exact_match": 25.0, "f1": 35.0, "parallel_pairs": PARALLEL_PAIRS, "l2_labels": False},
        {"system": SUPERVISED, "language": L2, "exact_match": 70.0, "f1": 80.0, "parallel_pairs": 0, "l2_labels": True},
    ] if translate_train else []))

    world = _world()
    wdir = path / "world"
    atomic_write_json(wdir / "world.json", {"config": world.config.to_dict(), "languages": world.languages})
    contexts = {}
    # a real run's world also holds the English training set, sorting after test.en.json
    atomic_write_json(wdir / "qa" / "train.en.json", world.qa("test", "en"))
    for lang in ("en", L2):
        data = world.qa("test", lang)
        atomic_write_json(wdir / "qa" / f"test.{lang}.json", data)
        contexts[lang] = [p["context"] for a in data["data"] for p in a["paragraphs"]] + [
            q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    pairs = world.parallel_pairs(L2)
    atomic_write_text(wdir / "parallel" / f"en-{L2}.jsonl", "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))

    if models:
        words = {"en": _words(contexts["en"] + [p["src"] for p in pairs]), L2: _words(contexts[L2] + [p["tgt"] for p in pairs])}
        make_tiny("bert", path / "s1_pretrain", task="mlm", words=words["en"])
        _make_transferred(path, words[L2])
        for lang in ("en", L2):
            make_tiny("bert", path / "export" / f"monotrans-{lang}", task="qa", words=words[lang], seed=1)
        if translate_train:
            make_tiny("bert", path / "export" / f"{SUPERVISED}-{L2}", task="qa", words=words[L2], seed=2)
        # the run's saved predictions ({id: text}, as step 4 writes them): English all gold, so
        # a page that reuses them shows EM 100 where the tiny random model would score ~0
        en = world.qa("test", "en")
        atomic_write_json(path / "predictions" / "monotrans-en.json", {
            q["id"]: q["answers"][0]["text"] for a in en["data"] for p in a["paragraphs"] for q in p["qas"]})
    return path


def _make_transferred(path: Path, l2_words: list[str]) -> None:
    """``s2_transfer-<L2>``: the s1 body with new L2 embeddings, as step 2 leaves it."""
    import tempfile

    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tests.tiny_models import make_tiny
    from xlviz.models.floor import make_l2_mlm

    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(make_tiny("bert", Path(tmp) / "l2", task="mlm", words=l2_words))
    l1 = AutoModelForMaskedLM.from_pretrained(path / "s1_pretrain", use_safetensors=True)
    l2 = make_l2_mlm(l1, len(tok), seed=1)
    l2.save_pretrained(path / f"s2_transfer-{L2}")
    tok.save_pretrained(path / f"s2_transfer-{L2}")


def make_qa_folder(root: str | Path) -> Path:
    """A folder of SQuAD files ``xquad.<lang>.json`` (like ../shared/data/xquad), from the world."""
    world = _world(1)
    folder = Path(root) / "xquad-like"
    for lang in ("en", L2):
        atomic_write_json(folder / f"xquad.{lang}.json", world.qa("test", lang))
    return folder


def null_cells_not_na(at) -> tuple[int, list[str]]:
    """(missing cells seen, problems) over every ``st.dataframe`` of an AppTest page: each
    missing cell must read "n/a" in what the browser draws (the table's placeholder, or a
    styler's display values), not Streamlit's default "None"."""
    from streamlit import dataframe_util

    seen, problems = 0, []
    for i, d in enumerate(at.dataframe):
        data = d.value
        mask = data.isna().to_numpy()
        if not mask.any():
            continue
        seen += int(mask.sum())
        if d.proto.placeholder == "n/a":  # st.dataframe(placeholder=...): every missing cell
            continue
        raw = d.proto.arrow_data.styler.display_values
        if not raw:
            problems.append(f"table {i} ({list(data.columns)[:6]}): {int(mask.sum())} missing cells drawn as "
                            f"{d.proto.placeholder or 'None'}")
            continue
        drawn = dataframe_util.convert_arrow_bytes_to_pandas_df(raw).to_numpy()
        bad = [(r, c, drawn[r, c]) for r, c in zip(*mask.nonzero()) if drawn[r, c] != "n/a"]
        if bad:
            problems.append(f"table {i} ({list(data.columns)[:6]}): missing cells drawn as {bad[:3]}")
    return seen, problems


if __name__ == "__main__":  # python -m tests.app_fixtures DIR: a demo run to click through
    import sys

    print(make_run(sys.argv[1] if len(sys.argv) > 1 else "checkpoints"))


def open_panel(at, key: str):
    """Open the lazy expander ``key`` (drawn only while open, ``on_change="rerun"``) as a
    user's click does, and rerun the page."""
    at.session_state[key] = True
    return at.run()


# --- charts: Plotly's and Vega-Lite's (``xlviz.ui.common.plotly(..., vega=True)``) ---------------------------

def charts(at) -> dict[str, dict]:
    """Every chart on the page by key: a Plotly chart's figure JSON, a Vega-Lite chart's spec
    (Streamlit keeps no key for a chart without a selection: the page puts it in ``usermeta``)."""
    out = {e.key: json.loads(e.proto.spec) for e in at.get("plotly_chart")}
    from streamlit import dataframe_util

    for e in at.get("vega_lite_chart"):
        spec = json.loads(e.proto.spec)
        if e.proto.data.data:  # Streamlit sends a spec's top-level data apart, as Arrow: put it back
            spec["data"] = {"values": dataframe_util.convert_arrow_bytes_to_pandas_df(e.proto.data.data).to_dict("records")}
        out[(spec.get("usermeta") or {}).get("key")] = spec
    return out


def chart_title(spec: dict) -> str:
    return (spec.get("layout", {}).get("title") or spec.get("title") or {}).get("text", "")


def chart_x_title(spec: dict) -> str:
    if "layout" in spec:
        return spec["layout"]["xaxis"]["title"]["text"]
    return next(layer["encoding"]["x"]["title"] for layer in spec["layer"] if "x" in layer.get("encoding", {}))


def chart_colours(spec: dict) -> dict[str, str]:
    """Each series' legend name -> its colour."""
    if "layout" in spec:
        return {t["legendgroup"]: t["line"]["color"] for t in spec["data"]}
    scale = next(layer["encoding"]["color"]["scale"] for layer in spec["layer"] if "color" in layer.get("encoding", {}))
    return dict(zip(scale["domain"], scale["range"]))


# --- heatmaps drawn with Vega-Lite (``xlviz.views.vega_heatmap``) --------------------------------------

def heat_cells(spec: dict) -> list[dict]:
    """A Vega-Lite heatmap's cells as sent to the browser: {"x", "y", "z", ...} per finite cell."""
    return spec["data"]["values"]


def heat_values(spec: dict):
    """A one-map Vega-Lite heatmap's matrix (rows: y, columns: x; positions 0..n-1)."""
    import numpy as np

    cells = heat_cells(spec)
    z = np.full((max(int(c["y"]) for c in cells) + 1, max(int(c["x"]) for c in cells) + 1), np.nan)
    for c in cells:
        z[int(c["y"]), int(c["x"])] = c["z"]
    return z


def _array_of(spec: dict, name: str) -> list:
    """The list a ``calculate`` transform looks up by tile for field ``name``."""
    calc = next(t["calculate"] for t in spec["transform"] if t.get("as") == name)
    return json.loads(calc[:calc.rindex("[datum.k]")])


def tile_heads(spec: dict) -> dict[int, tuple[int, int]]:
    """A tiled Vega-Lite heatmap's tile index -> (layer, head), as a click reports it."""
    return {k: (l, h) for k, (l, h) in enumerate(zip(_array_of(spec, "layer"), _array_of(spec, "head")))}


def layer_rows(spec: dict, mark: str, **style) -> list[dict]:
    """The data rows of every layer drawing ``mark`` (with the mark properties ``style``)."""
    return [row for layer in spec["layer"] if layer["mark"]["type"] == mark
            and all(layer["mark"].get(k) == v for k, v in style.items()) for row in layer.get("data", {}).get("values", [])]


def outlined_heads(spec: dict, colour: str = "#D55E00") -> list[tuple[int, int]]:
    """The (layer, head) of each thumbnail a model view's outline (a rect of ``colour``) surrounds."""
    heads = tile_heads(spec)
    out = []
    for r in layer_rows(spec, "rect", stroke=colour):
        inside = {c["k"] for c in heat_cells(spec)
                  if min(r["x"], r["x2"]) < c["x"] < max(r["x"], r["x2"]) and min(r["y"], r["y2"]) < c["y"] < max(r["y"], r["y2"])}
        assert len(inside) == 1, inside
        out.append(heads[inside.pop()])
    return out
