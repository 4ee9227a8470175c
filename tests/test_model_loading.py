"""load_model on tiny random encoders of every architecture, and every way loading can go wrong."""

from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")

from tests.tiny_models import ARCHS, make_tiny, make_tokenizer  # noqa: E402
from xlviz.errors import XlvizError  # noqa: E402
from xlviz.models import loading  # noqa: E402
from xlviz.models.loading import check_tokenizer_fits, describe_source, load_model, model_summary  # noqa: E402


@pytest.fixture(scope="module")
def mlm_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-mlm")
    return {arch: make_tiny(arch, root / arch, task="mlm") for arch in ARCHS}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test may touch the network: offline mode, and the probe says the hub is down."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=1.5: False)


def _batch(tok):
    return tok(["the cat sat on the mat", "der hund ist klein"], return_tensors="pt", padding=True)


def _raises(match, path, fn, *args, **kwargs) -> XlvizError:
    with pytest.raises(XlvizError, match=match) as e:
        fn(*args, **kwargs)
    assert str(path) in str(e.value), f"message does not name {path}: {e.value}"
    return e.value


# --------------------------------------------------------------------------- every architecture


@pytest.mark.parametrize("arch", ARCHS)
def test_every_arch_loads_for_every_task_with_eager_attentions(arch, mlm_folders):
    folder = mlm_folders[arch]
    for task, head_cls in (("base", "Model"), ("mlm", "ForMaskedLM"), ("qa", "ForQuestionAnswering")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, tok = load_model(folder, task=task)
        assert type(model).__name__.endswith(head_cls)
        assert not model.training
        assert model.config._attn_implementation == "eager"
        # an MLM checkpoint has no QA head: loading it for QA warns, and says which weights are new
        new_head_warnings = [w for w in caught if "newly initialised" in str(w.message)]
        assert bool(new_head_warnings) == (task == "qa")
        assert any(k.startswith("qa_outputs.") for k in model.xlviz_new_weights) == (task == "qa")
        if task == "mlm":
            assert model.xlviz_new_weights == []
        batch = _batch(tok)
        with torch.no_grad():
            out = model(**batch, output_attentions=True)
        cfg = model.config
        assert len(out.attentions) == cfg.num_hidden_layers
        for att in out.attentions:
            assert isinstance(att, torch.Tensor)
            assert att.shape == (2, cfg.num_attention_heads, batch["input_ids"].shape[1], batch["input_ids"].shape[1])
            assert torch.allclose(att.sum(-1), torch.ones(att.shape[:-1]), atol=1e-5)
        if task == "mlm":
            assert out.logits.shape[-1] == model.get_input_embeddings().num_embeddings
        if task == "qa":
            assert out.start_logits.shape == batch["input_ids"].shape


@pytest.mark.parametrize("arch", ARCHS)
def test_qa_checkpoint_loads_for_qa_without_warning(arch, tmp_path):
    folder = make_tiny(arch, tmp_path / arch, task="qa")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, _ = load_model(folder, task="qa")
    assert model.xlviz_new_weights == []


def test_weights_round_trip_exactly(mlm_folders):
    from transformers import BertForMaskedLM

    ref = BertForMaskedLM.from_pretrained(mlm_folders["bert"], use_safetensors=True)
    model, _ = load_model(mlm_folders["bert"], task="mlm")
    for (name, a), (_, b) in zip(ref.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), name


def test_model_summary(mlm_folders):
    model, _ = load_model(mlm_folders["electra"], task="mlm")
    s = model_summary(model)
    assert s["architecture"] == "ElectraForMaskedLM"
    assert (s["layers"], s["heads"], s["hidden"], s["embedding"]) == (2, 2, 32, 16)
    assert s["vocab"] == model.config.vocab_size and s["params"] == sum(p.numel() for p in model.parameters())
    model, _ = load_model(mlm_folders["distilbert"])
    s = model_summary(model)
    assert (s["architecture"], s["layers"], s["heads"], s["hidden"]) == ("DistilBertModel", 2, 2, 32)


def test_tokenizer_max_length_clamped_to_positions(mlm_folders):
    _, tok = load_model(mlm_folders["roberta"])
    assert tok.model_max_length == 64  # 66 positions minus RoBERTa's padding offset


def test_sdpa_and_bad_options(mlm_folders):
    model, _ = load_model(mlm_folders["bert"], attn_implementation="sdpa")
    assert model.config._attn_implementation == "sdpa"
    with pytest.raises(XlvizError, match="task must be one of") as e:
        load_model(mlm_folders["bert"], task="ner")
    assert e.value.field == "task"
    with pytest.raises(XlvizError, match="attn_implementation"):
        load_model(mlm_folders["bert"], attn_implementation="flash")
    if not torch.cuda.is_available():
        with pytest.raises(XlvizError, match="no CUDA GPU"):
            load_model(mlm_folders["bert"], device="cuda")


# --------------------------------------------------------------------------- sources


def _run_with_stages(tmp_path):
    run = tmp_path / "run"
    (run / "world" / "tokenizers").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"l1": "en"}))
    make_tokenizer("bert").save_pretrained(run / "world" / "tokenizers" / "en")
    make_tokenizer("bert", words="der die das hund katze".split()).save_pretrained(run / "world" / "tokenizers" / "de")
    s1 = make_tiny("bert", run / "s1_pretrain", save_tokenizer=False)
    s2 = make_tiny("bert", run / "s2_transfer-de-pos", save_tokenizer=False)
    export = make_tiny("bert", run / "export" / "monotrans-de", task="qa")
    return run, s1, s2, export


def test_describe_source(tmp_path, mlm_folders):
    _, s1, s2, export = _run_with_stages(tmp_path)
    assert describe_source(s1) == describe_source(s2) == describe_source(export) == "run stage folder"
    assert describe_source(mlm_folders["bert"]) == "hf folder"
    assert describe_source(tmp_path / "does" / "not" / "exist") == "hf folder"
    assert describe_source("./missing") == "hf folder"
    assert describe_source("xlm-roberta-base") == "hub id"
    assert describe_source("google-bert/bert-base-multilingual-cased") == "hub id"


def test_run_stage_folder_uses_the_runs_tokenizer(tmp_path):
    run, s1, s2, export = _run_with_stages(tmp_path)
    _, tok1 = load_model(s1, task="mlm")
    assert "katzen" in tok1.get_vocab()  # en tokenizer, from the run config's l1
    _, tok2 = load_model(s2, task="mlm")
    assert "katzen" not in tok2.get_vocab() and "katze" in tok2.get_vocab()  # de, from the stage name
    model, _ = load_model(export, task="qa")
    assert type(model).__name__ == "BertForQuestionAnswering"
    (run / "config.json").write_text("{}")
    _raises("no tokenizer files here", s1, load_model, s1)
    # an explicit tokenizer folder always wins
    load_model(s1, tokenizer=run / "world" / "tokenizers" / "en")


# --------------------------------------------------------------------------- error paths


def test_missing_folder_file_and_folder_without_config(tmp_path):
    _raises("model folder not found", tmp_path / "nope", load_model, tmp_path / "nope")
    f = tmp_path / "weights.safetensors"
    f.write_bytes(b"x")
    _raises("expected a model folder", f, load_model, f)
    empty = tmp_path / "empty"
    empty.mkdir()
    _raises("no config.json here", empty, load_model, empty)


def test_malformed_config_and_model_types(tmp_path, mlm_folders):
    folder = make_tiny("bert", tmp_path / "m")
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg_path.write_text("{not json")
    _raises("malformed JSON", cfg_path, load_model, folder)
    cfg_path.write_text(json.dumps({**cfg, "model_type": "banana"}))
    e = _raises("unknown model_type 'banana'", cfg_path, load_model, folder)
    assert e.field == "model_type"
    cfg_path.write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    _raises("unsupported model_type 'gpt2'.*encoder", cfg_path, load_model, folder)
    cfg_path.write_text(json.dumps({k: v for k, v in cfg.items() if k != "model_type"}))
    _raises("no model_type", cfg_path, load_model, folder)


def test_pickle_only_checkpoint_is_refused(tmp_path):
    folder = make_tiny("bert", tmp_path / "m")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"never unpickled")
    e = _raises("safetensors only", folder / "pytorch_model.bin", load_model, folder)
    assert "pickle" in str(e) and "safe_serialization=True" in str(e)
    (folder / "pytorch_model.bin").unlink()
    _raises("no model.safetensors here", folder, load_model, folder)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_safetensors(tmp_path, damage):
    folder = make_tiny("roberta", tmp_path / "m")
    st = folder / "model.safetensors"
    data = st.read_bytes()
    st.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x00\x01garbage" * 100, "empty": b""}[damage])
    _raises("corrupt safetensors file", st, load_model, folder)


def test_config_that_does_not_match_weights(tmp_path):
    folder = make_tiny("bert", tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["vocab_size"] += 7
    (folder / "config.json").write_text(json.dumps(cfg))
    _raises("weights do not match config.json.*word_embeddings", folder, load_model, folder)


def test_checkpoint_missing_encoder_weights(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = make_tiny("distilbert", tmp_path / "m")
    st = folder / "model.safetensors"
    tensors = {k: v for k, v in load_file(st).items() if ".layer.1." not in k}
    save_file(tensors, st, metadata={"format": "pt"})
    _raises("lacks encoder weights", folder, load_model, folder, task="mlm")


def test_electra_discriminator_has_no_mlm_head(tmp_path):
    folder = make_tiny("electra", tmp_path / "disc", task="pretraining")
    e = _raises("ELECTRA discriminator", folder, load_model, folder, task="mlm")
    assert "generator" in str(e) and "task='base'" in str(e)
    model, _ = load_model(folder, task="base")  # its encoder is fine
    assert type(model).__name__ == "ElectraModel"


def test_mlm_without_head_is_refused_and_qa_policy(tmp_path):
    # Any checkpoint without an MLM head: detected from transformers' missing keys.
    folder = make_tiny("roberta", tmp_path / "qa", task="qa")
    e = _raises("no masked-LM head.*newly initialise.*lm_head", folder, load_model, folder, task="mlm")
    assert "task='base'" in str(e)
    base = make_tiny("bert", tmp_path / "base", task="base")
    _raises("no qa head", base, load_model, base, task="qa", new_head="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, _ = load_model(base, task="qa", new_head="ok")
    assert sorted(model.xlviz_new_weights) == ["qa_outputs.bias", "qa_outputs.weight"]
    # BERT pre-training checkpoints (MLM + NSP heads) are fine for MLM
    pre = make_tiny("bert", tmp_path / "pre", task="pretraining")
    model, _ = load_model(pre, task="mlm")
    assert model.xlviz_new_weights == []


def test_tokenizer_that_does_not_fit(tmp_path):
    small = make_tiny("bert", tmp_path / "small", words=["the", "cat"])
    big_tok = tmp_path / "bigtok"
    make_tokenizer("bert", words=[f"w{i}" for i in range(500)]).save_pretrained(big_tok)
    e = _raises("does not fit this model", small, load_model, small, tokenizer=big_tok)
    assert str(big_tok) in str(e) and "rows" in str(e)
    # the same with the tokenizer inside the model folder
    make_tokenizer("bert", words=[f"w{i}" for i in range(500)]).save_pretrained(small)
    _raises("does not fit this model", small, load_model, small)
    _raises("tokenizer folder not found", tmp_path / "nope", load_model, small, tokenizer=tmp_path / "nope")


def test_tokenizer_without_mask_token(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder = make_tiny("bert", tmp_path / "m", save_tokenizer=False)
    vocab = {"[PAD]": 0, "[UNK]": 1, "the": 2, "cat": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]")
    tok_dir = tmp_path / "nomask"
    tok.save_pretrained(tok_dir)
    e = _raises("no mask token", folder, load_model, folder, task="mlm", tokenizer=tok_dir)
    assert str(tok_dir) in str(e)
    load_model(folder, task="base", tokenizer=tok_dir)  # fine without masking
    model, _ = load_model(folder, task="base", tokenizer=tok_dir)
    with pytest.raises(XlvizError, match="no mask token"):
        check_tokenizer_fits(model, tok, folder, task="mlm")


def test_folder_without_tokenizer(tmp_path):
    folder = make_tiny("bert", tmp_path / "m", save_tokenizer=False)
    _raises("no tokenizer files here", folder, load_model, folder)


def test_hub_id_fails_fast_offline(monkeypatch):
    e = _raises("not found locally.*hub is unreachable", "xlviz-test/no-such-model", load_model, "xlviz-test/no-such-model")
    assert "HF_HUB_OFFLINE" in str(e)
    # without the env variable, the probe alone switches to local files only
    monkeypatch.delenv("HF_HUB_OFFLINE")
    _raises("not found locally.*hub is unreachable", "no-such-model-xlviz", load_model, "no-such-model-xlviz", task="mlm")


def test_remote_code_is_never_run(tmp_path):
    folder = make_tiny("bert", tmp_path / "m")
    marker = tmp_path / "PWNED"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nfrom transformers import BertModel as EvilModel\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoModelForMaskedLM": "modeling_evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(cfg))
    for task in ("base", "mlm"):
        model, _ = load_model(folder, task=task)  # the built-in class, auto_map ignored
        assert type(model).__module__.startswith("transformers.models.bert")
    assert not marker.exists()


def test_sharded_safetensors(tmp_path):
    from transformers import AutoModelForMaskedLM

    folder = make_tiny("bert", tmp_path / "m")
    model = AutoModelForMaskedLM.from_pretrained(folder, use_safetensors=True)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, max_shard_size="20KB")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    loaded, _ = load_model(folder, task="mlm")
    assert torch.equal(loaded.get_input_embeddings().weight, model.get_input_embeddings().weight)
    (folder / shards[-1]).unlink()
    _raises("listed in the safetensors index is missing", folder / shards[-1], load_model, folder)
