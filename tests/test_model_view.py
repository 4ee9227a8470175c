"""bertviz's model view and neuron view: labelled, clickable layer × head thumbnails, and the
query/key vectors behind one head's weights (checked against the model's own attention).

The neuron view is only honest if softmax(q·k/√d + mask) of the captured q and k *is* the
model's attention: that is checked here on tiny random encoders of every architecture, with a
padded batch (so the mask matters), and the arithmetic on a hand-computed toy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from xlviz.analysis import attention as A
from xlviz.errors import XlvizError

try:  # tests/ on sys.path (pytest's default rootdir import mode)
    from test_representations import HEADS, LAYERS, tiny_encoders
except ImportError:  # tests/ imported as a package
    from tests.test_representations import HEADS, LAYERS, tiny_encoders

EAGER = tiny_encoders("eager")


# ---------------------------------------------------------------- the arithmetic, by hand

def test_neuron_arithmetic_hand_computed():
    q = np.array([1.0, 2.0])
    k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 3.0]])
    mask = np.array([0.0, 0.0, 0.0, -np.inf])  # the last key is padding
    products, scores, weights = A.neuron_arithmetic(q, k, 2 ** -0.5, mask)
    assert products.tolist() == [[1.0, 0.0], [0.0, 2.0], [1.0, 2.0], [-1.0, 6.0]]
    s = [1 / math.sqrt(2), 2 / math.sqrt(2), 3 / math.sqrt(2), 5 / math.sqrt(2)]
    assert scores == pytest.approx(s)
    z = sum(math.exp(v) for v in s[:3])
    assert weights == pytest.approx([math.exp(s[0]) / z, math.exp(s[1]) / z, math.exp(s[2]) / z, 0.0])
    # without the mask the largest score (the padding key) takes the most weight
    assert np.argmax(A.neuron_arithmetic(q, k, 2 ** -0.5)[2]) == 3


def test_query_keys_neuron_slices_one_head():
    """QueryKeys.neuron picks layer/head/token and accepts a token's text or a negative position."""
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 4, 5)).astype(np.float32), rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    qk = A.QueryKeys(["[CLS]", "a", "b", "[SEP]"], [-1, 0, 0, -1], q, k, np.zeros(4), 5 ** -0.5)
    n = qk.neuron(1, 2, "b")
    assert (n.layer, n.head, n.token) == (1, 2, 2)
    np.testing.assert_allclose(n.query, q[1, 2, 2])
    np.testing.assert_allclose(n.products, k[1, 2] * q[1, 2, 2][None, :], rtol=1e-6)
    np.testing.assert_allclose(n.scores, (k[1, 2].astype(float) @ q[1, 2, 2].astype(float)) / math.sqrt(5), rtol=1e-6)
    assert n.weights.sum() == pytest.approx(1.0)
    assert qk.neuron(-1, -1, -1).token == 3 and qk.neuron(-1, -1, -1).layer == 1
    with pytest.raises(XlvizError, match="no token"):
        qk.neuron(0, 0, "zzz")
    with pytest.raises(XlvizError, match="out of range"):
        qk.neuron(0, 3, 0)


# ---------------------------------------------------------------- captured q, k vs the model's own weights

@pytest.mark.parametrize("name", list(EAGER))
def test_recomputed_softmax_is_the_models_attention_with_padding(name):
    """softmax(q·k·scaling + mask) from the hooked q and k equals output_attentions, batch with padding."""
    from xlviz.analysis.representations import _encoder, _model_inputs

    model, tok = EAGER[name]
    enc = tok(["the cats sat on the mat", "a dog"], padding=True, return_tensors="pt")
    inputs = _model_inputs(_encoder(model), enc)
    queries, keys, scaling, weights = A.capture_query_keys(_encoder(model), **inputs)
    B, T = enc["input_ids"].shape
    assert queries.shape == keys.shape == (B, LAYERS, HEADS, T, queries.shape[-1])
    assert scaling == pytest.approx(queries.shape[-1] ** -0.5)
    attention_mask = inputs["attention_mask"].numpy()
    assert attention_mask.min() == 0  # the second sentence is padded: the mask is exercised
    for b in range(B):
        mask = np.where(attention_mask[b] > 0, 0.0, -np.inf)
        for l in range(LAYERS):
            logits = np.einsum("htd,hsd->hts", queries[b, l].astype(np.float64), keys[b, l].astype(np.float64)) * scaling
            logits = logits + mask
            e = np.exp(logits - logits.max(-1, keepdims=True))
            np.testing.assert_allclose(e / e.sum(-1, keepdims=True), weights[l][b], atol=1e-5)
            assert np.all(weights[l][b][..., attention_mask[b] == 0] < 1e-6)  # padding gets nothing
    # the hooks are gone afterwards
    assert all(not q._forward_hooks and not k._forward_hooks for _, q, k, _, _ in A.self_attention_projections(model))


@pytest.mark.parametrize("name", list(EAGER))
def test_query_key_vectors_match_attention_maps(name):
    """Same tokens as attention_maps, and every layer/head/query's neuron weights are its map's row."""
    model, tok = EAGER[name]
    qk = A.query_key_vectors(model, tok, "the cats sat", "le chat est assis")
    res = A.attention_maps(model, tok, "the cats sat", "le chat est assis")
    assert qk.tokens == res.tokens and qk.segment == res.segment
    assert (qk.n_layers, qk.n_heads) == (LAYERS, HEADS)
    for l in range(LAYERS):
        for h in range(HEADS):
            for i in range(len(qk.tokens)):
                np.testing.assert_allclose(qk.neuron(l, h, i).weights, res.attentions[l, h, i], atol=1e-5)


def test_a_model_whose_weights_are_not_the_recomputed_ones_is_refused(monkeypatch):
    """If the captured vectors do not explain the weights (here: a wrong scaling), the view refuses."""
    model, tok = EAGER["bert"]
    real = A.self_attention_projections
    monkeypatch.setattr(A, "self_attention_projections", lambda m: [(n, q, k, h, s * 3) for n, q, k, h, s in real(m)])
    with pytest.raises(XlvizError, match="not softmax"):
        A.query_key_vectors(model, tok, "the cats sat")
    monkeypatch.undo()
    assert all(not q._forward_hooks for _, q, _, _, _ in A.self_attention_projections(model))


def test_query_key_vectors_need_eager_and_attention_projections():
    model, tok = tiny_encoders()["bert"]  # default (sdpa) attention: no weights to check against
    with pytest.raises(XlvizError, match="eager"):
        A.query_key_vectors(model, tok, "the cat")
    import torch

    class NoAttention(torch.nn.Module):
        config = type("C", (), {"_attn_implementation": "eager", "num_attention_heads": 2})()

        def forward(self, x):
            return x

    with pytest.raises(XlvizError, match="no self-attention"):
        A.capture_query_keys(NoAttention(), x=torch.zeros(1))


def test_mixed_pair_query_keys_match_its_attention():
    """The MONOTRANS pair input (A's vocabulary + B's embeddings through one body)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    def tok(words):
        vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)}
        t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                       pad_token="[PAD]", mask_token="[MASK]")

    tok_a, tok_b = tok(["the", "dog", "runs"]), tok(["ma", "kobu", "tira"])
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32), add_pooling_layer=False)
    model.config._attn_implementation = "eager"
    emb_b = torch.nn.Embedding(8, 16)
    qk = A.mixed_pair_query_key_vectors(model, tok_a, tok_b, emb_b, "the dog runs", "ma kobu tira")
    res = A.mixed_pair_attention_maps(model, tok_a, tok_b, emb_b, "the dog runs", "ma kobu tira")
    assert qk.tokens == res.tokens
    for l in range(2):
        for h in range(2):
            np.testing.assert_allclose(qk.neuron(l, h, 5).weights, res.attentions[l, h, 5], atol=1e-5)


# ---------------------------------------------------------------- figures

def test_model_view_thumbnails_are_labelled_and_clickable():
    from xlviz.views.attention import clicked_head, overview

    rng = np.random.default_rng(0)
    attn = rng.random((2, 3, 5, 5))
    fig = overview(attn, [1, 3], [0, 1, 2], segment=[-1, 0, 0, 1, -1], selected=(3, 2))
    labels = [a.text for a in fig.layout.annotations]
    assert labels == ["L1 H0", "L1 H1", "L1 H2", "L3 H0", "L3 H1", "L3 H2"]  # rows = layers, columns = heads
    # one heatmap and one trace of click targets on one pair of axes, however many heads
    assert [t.type for t in fig.data] == ["heatmap", "scatter"]
    heat, targets = fig.data
    assert [list(c) for c in targets.customdata] == [[1, 0], [1, 1], [1, 2], [3, 0], [3, 1], [3, 2]]
    z = np.asarray(heat.z, dtype=float)
    for tile, x, y, label in zip(heat.meta["tiles"], targets.x, targets.y, fig.layout.annotations):
        x0, y0 = tile["x0"], tile["y0"]
        # each thumbnail is its head's map, with blanks (NaN) between thumbnails
        np.testing.assert_array_equal(z[y0:y0 + 5, x0:x0 + 5], attn[[1, 3].index(tile["layer"]), tile["head"]])
        # its click target at its centre, its label above it, in its own columns
        assert (x, y) == (x0 + 2, y0 + 2) and x0 <= label.x <= x0 + 4 and label.y < y0
    assert np.isnan(z).sum() == z.size - 6 * 25
    outlined = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(outlined) == 1 and outlined[0].x0 < targets.x[5] < outlined[0].x1 and outlined[0].y0 < targets.y[5] < outlined[0].y1
    assert len([s for s in overview(attn, [1, 3], [0, 1, 2], selected=(1, None)).layout.shapes if s.type == "rect"]) == 3
    # the figure's CSV: each head's map under its label, not the blanks between them
    from xlviz.views.export import figure_frame

    frame = figure_frame(fig)
    cells = frame[frame.trace == "L3 H1"]
    assert len(cells) == 25 and frame[frame.trace.str.startswith("L")].z.notna().all()
    np.testing.assert_array_equal(cells.z.to_numpy().reshape(5, 5), attn[1, 1])
    # Streamlit's selection points -> the clicked layer and head
    assert clicked_head([{"curve_number": 3, "customdata": [3, 1]}], range(4), range(3)) == (3, 1)
    assert clicked_head([{"customdata": [9, 1]}], range(4), range(3)) is None  # no such layer
    assert clicked_head([{"x": 1}, {"customdata": "junk"}], range(4), range(3)) is None
    assert clicked_head(None, range(4), range(3)) is None


def test_cross_overview_tiles_each_heads_map():
    from xlviz.views.attention import cross_overview
    from xlviz.views.export import figure_frame

    rng = np.random.default_rng(2)
    maps = rng.random((3, 2, 4, 6))  # layers, heads, A's tokens, B's tokens

    class Cross:  # the part of a cross-attention result the figure reads
        n_heads = 2

        def slice(self, layer, head, hide_special):
            return maps[layer, head], [], []

    fig = cross_overview(Cross(), [0, 2])
    assert [t.type for t in fig.data] == ["heatmap"]
    assert [a.text for a in fig.layout.annotations] == ["L0 H0", "L0 H1", "L2 H0", "L2 H1"]
    z = np.asarray(fig.data[0].z, dtype=float)
    for tile in fig.data[0].meta["tiles"]:
        np.testing.assert_array_equal(z[tile["y0"]:tile["y0"] + 4, tile["x0"]:tile["x0"] + 6], maps[tile["layer"], tile["head"]])
    assert np.isnan(z).sum() == z.size - 4 * 24  # blank between the tiles
    frame = figure_frame(fig)
    np.testing.assert_array_equal(frame[frame.trace == "L2 H1"].z.to_numpy().reshape(4, 6), maps[2, 1])
    assert fig.layout.coloraxis.cmax == maps[[0, 2]].max()


def test_share_heatmaps_one_figure_each_its_own_scale():
    from xlviz.views.attention import share_heatmaps

    cross, aligned = np.array([[0.1, 0.5], [0.2, 0.3]]), np.array([[0.01, 0.02], [0.04, 0.03]])
    fig = share_heatmaps([(cross, "to the other sentence"), (aligned, "to the aligned <b>word</b>")])
    a, b = fig.data
    assert (a.zmax, b.zmax) == (0.5, 0.04)  # each panel its own colour scale
    assert [t.text for t in fig.layout.annotations] == ["to the other sentence", "to the aligned &lt;b&gt;word&lt;/b&gt;"]
    assert a.text[0][1] == "0.50" and b.text[1][0] == "0.04"  # the values written in the cells
    # each colour bar right of its own panel, left of the next one
    assert fig.layout.xaxis.domain[1] < a.colorbar.x < fig.layout.xaxis2.domain[0] < fig.layout.xaxis2.domain[1] < b.colorbar.x
    one = share_heatmaps([(cross, "to the other sentence")])
    assert len(one.data) == 1 and one.layout.title.text == "to the other sentence"


def test_neuron_figure_draws_the_numbers():
    from xlviz.views.attention import neuron_figure

    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(1, 1, 4, 6)), rng.normal(size=(1, 1, 4, 6))
    qk = A.QueryKeys(["[CLS]", "le", "<b>", "[SEP]"], [-1, 0, 0, -1], q, k, np.zeros(4), 6 ** -0.5)
    n = qk.neuron(0, 0, 1)
    fig = neuron_figure(n)
    heat = [t for t in fig.data if t.type == "heatmap"]
    bars = [t for t in fig.data if t.type == "bar"]
    np.testing.assert_allclose(np.asarray(heat[0].z)[0], q[0, 0, 1])       # the query
    np.testing.assert_allclose(np.asarray(heat[1].z), k[0, 0])             # the keys
    np.testing.assert_allclose(np.asarray(heat[2].z), k[0, 0] * q[0, 0, 1])  # q ⊙ k_j
    np.testing.assert_allclose(bars[0].x, (k[0, 0] @ q[0, 0, 1]) / math.sqrt(6))
    np.testing.assert_allclose(bars[1].x, n.weights)
    assert bars[1].x.sum() == pytest.approx(1.0)
    assert "<b>" not in fig.layout.yaxis5.ticktext[2] and "&lt;b&gt;" in fig.layout.yaxis5.ticktext[2]  # tokens as text


# ---------------------------------------------------------------- the notebook API

@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tests.tiny_models import make_tiny

    return make_tiny("bert", tmp_path_factory.mktemp("mv") / "bert", task="mlm", num_hidden_layers=3,
                     num_attention_heads=2)


def test_views_model_view_is_labelled(tiny_bert):
    import xlviz.views as xv

    fig = xv.model_view(str(tiny_bert), "the cat sat on the mat", "die katze sitzt")
    assert [a.text for a in fig.layout.annotations] == [f"L{l} H{h}" for l in range(3) for h in range(2)]
    assert sorted(tuple(c) for t in fig.data if t.type == "scatter" for c in t.customdata) == [(l, h) for l in range(3) for h in range(2)]


def test_views_neuron_view_weights_are_the_models(tiny_bert):
    import xlviz.views as xv
    from xlviz.models.loading import load_model

    assert "neuron_view" in xv.__all__
    fig = xv.neuron_view(str(tiny_bert), "the cat sat on the mat", 1, 1, "cat")
    model, tok = load_model(str(tiny_bert), task="mlm", attn_implementation="eager")
    res = A.attention_maps(model, tok, "the cat sat on the mat")
    i = res.tokens.index("cat")
    weights = [t for t in fig.data if t.type == "bar"][1].x
    np.testing.assert_allclose(weights, res.attentions[1, 1, i], atol=1e-5)
    assert "layer 1 · head 1 · query 2 (cat)" in fig.layout.title.text
    top = xv.neuron_view((model, tok), "the cat sat on the mat", -1, 0, -1)  # negative layer and token
    np.testing.assert_allclose([t for t in top.data if t.type == "bar"][1].x, res.attentions[2, 0, -1], atol=1e-5)


# ---------------------------------------------------------------- the Attention page (AppTest)

def test_attention_page_model_view_and_neuron_view(fake_root, monkeypatch):
    """The model view's figure carries L·H labels and click targets; picking a head shows the
    neuron view; the layer, head and query token go to the URL."""
    from tests.app_fixtures import charts, layer_rows, outlined_heads, tile_heads
    from tests.test_app_pages import _new_app, _page, _texts

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = _page(_new_app(models=["run:demo-run:s1_pretrain"]), "attention")
    assert not at.error, _texts(at.error)
    assert any(s.value.startswith("Model view") for s in at.subheader)
    shown = charts(at)
    assert "att_neuron" not in shown  # mean of heads: no single head to take apart
    assert "neuron view takes one head apart" in _texts(at.info)
    spec = shown["att_ov_A + B"]  # drawn with Vega-Lite, its thumbnails clickable
    labels = [r["text"] for r in layer_rows(spec, "text")]
    assert labels[:4] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"], labels  # the fixture's 2 layers × 2 heads
    assert list(tile_heads(spec).values())[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    ov = next(e for e in at.get("vega_lite_chart") if e.key == "att_ov_A + B")
    assert list(ov.proto.selection_mode) == ["head"]  # clickable: the page listens to its selection
    assert outlined_heads(spec) == [(1, 0), (1, 1)]  # the last layer's mean of heads is open

    at.selectbox(key="att_layer").set_value(0).run()
    at.selectbox(key="att_head").set_value(1).run()
    assert not at.exception and not at.error, _texts(at.error)
    shown = charts(at)
    assert "att_neuron" in shown
    neuron = shown["att_neuron"]
    assert "layer 0 · head 1" in neuron["layout"]["title"]["text"]
    token = at.selectbox(key="att_nv_token")
    assert token.value == 1  # the first content token ([CLS] is 0)
    token.set_value(2).run()
    assert not at.exception and not at.error, _texts(at.error)
    assert at.query_params["att_layer"] == "0" and at.query_params["att_head"] == "1"
    assert at.query_params["att_nv_token"] == "2"
    # the outline follows the open head
    assert outlined_heads(charts(at)["att_ov_A + B"]) == [(0, 1)]


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory):
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("mv-app") / "checkpoints"
    make_run(root, "demo-run")
    return root


def test_attention_page_neuron_view_from_a_bookmark_and_per_input(fake_root, monkeypatch):
    """A URL naming layer, head, input and query token opens the neuron view as it was; fed
    each alone, the neuron view reads the input it is asked for (B through B's model)."""
    from streamlit.testing.v1 import AppTest

    from tests.app_fixtures import charts, outlined_heads
    from tests.test_app_pages import APP, TIMEOUT, _page, _texts

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"att_layer": "1", "att_head": "0", "att_nv_input": "B (sov)", "att_nv_token": "3"})
    at.run()
    _page(at, "attention")
    assert not at.error, _texts(at.error)
    assert at.radio(key="att_mode").value == "each alone"  # the fixture's exports: one model per language
    assert at.selectbox(key="att_nv_input").value == "B (sov)" and at.selectbox(key="att_nv_token").value == 3
    shown = charts(at)
    title = shown["att_neuron"]["layout"]["title"]["text"]
    assert title.startswith("B (sov) · layer 1 · head 0 · query 3"), title
    # the outline is on L1 H0 in both inputs' model views
    for name in ("A (en)", "B (sov)"):
        assert outlined_heads(shown[f"att_ov_{name}"]) == [(1, 0)]
    at.selectbox(key="att_nv_input").set_value("A (en)").run()
    assert not at.exception and not at.error, _texts(at.error)
    title = charts(at)["att_neuron"]["layout"]["title"]["text"]
    assert title.startswith("A (en) · layer 1 · head 0"), title
