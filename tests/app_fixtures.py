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


def make_run(root: str | Path, name: str = "demo-run", *, models: bool = True, results_shift: float = 0.0,
             state: str = "completed") -> Path:
    """Create ``root/name`` as a finished two-language (en + sov) transfer run."""
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
    ])

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
    from xlviz.models.monotrans import make_l2_mlm

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


if __name__ == "__main__":  # python -m tests.app_fixtures DIR: a demo run to click through
    import sys

    print(make_run(sys.argv[1] if len(sys.argv) > 1 else "checkpoints"))
