"""QA features: answer spans survive tokenisation, windows overlap by the stride, offsets."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertTokenizerFast, PreTrainedTokenizerFast

from xlviz.data.qa_features import prepare_eval_features, prepare_train_features, to_tensors
from xlviz.data.squad import QAExample
from xlviz.errors import XlvizError

WORDS = "the cat sat on mat a dog ran in park who what where did my big red house".split()
CONTEXT = "the cat sat on the mat . the dog ran in the park . my big red house ."


def bert_tokenizer(tmp_path) -> BertTokenizerFast:
    """A WordPiece tokenizer from a vocab.txt written here (specials, words, letters, pieces)."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", ","] + WORDS
    vocab += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path))


def roberta_like_tokenizer() -> PreTrainedTokenizerFast:
    """No token_type_ids, ``<s> q </s></s> c </s>`` layout: only sequence_ids() tells the parts."""
    vocab = {w: i for i, w in enumerate(["<s>", "<pad>", "</s>", "<unk>", ".", "?"] + WORDS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>",
        pad_token="<pad>", unk_token="<unk>", model_input_names=["input_ids", "attention_mask"],
    )


@pytest.fixture()
def tok(tmp_path):
    return bert_tokenizer(tmp_path)


def _example(qid, answer, occurrence=0, context=CONTEXT, question="where did the dog run ?"):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer, start + 1)
    return QAExample(qid, "t", context, question, [{"text": answer, "answer_start": start}])


def _decoded_answer(tok, feats, i):
    """The labelled tokens joined by spaces (every context word is one token in these vocabularies)."""
    s, e = feats["start_positions"][i], feats["end_positions"][i]
    return " ".join(tok.convert_ids_to_tokens(feats["input_ids"][i][s : e + 1]))


def test_single_window_positions_decode_to_answer(tok):
    ex = [_example("a", "the park"), _example("b", "my big red house"), _example("c", "cat")]
    feats = prepare_train_features(tok, ex, max_length=64, doc_stride=16)
    assert len(feats["input_ids"]) == 3  # everything fits: one window each
    assert feats["example_id"] == ["a", "b", "c"] and feats["example_index"] == [0, 1, 2]
    assert [_decoded_answer(tok, feats, i) for i in range(3)] == ["the park", "my big red house", "cat"]
    assert all(len(ids) == 64 for ids in feats["input_ids"])
    assert set(feats) >= {"input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"}


def test_every_answer_position_in_long_context(tok):
    """Each word (and two-word phrase) of a long context as the answer: every window either
    labels the answer exactly or points at CLS, and at least one window labels it."""
    context = " ".join([CONTEXT] * 3)
    words = context.split(" ")
    examples, texts = [], []
    pos = 0
    for w_i, w in enumerate(words):
        for n in (1, 2):
            if w_i + n > len(words):
                continue
            text = " ".join(words[w_i : w_i + n])
            examples.append(QAExample(f"q{len(examples)}", "t", context, "who ran ?", [{"text": text, "answer_start": pos}]))
            texts.append(text)
        pos += len(w) + 1
    feats = prepare_train_features(tok, examples, max_length=24, doc_stride=6)
    labelled = set()
    for i, ex_index in enumerate(feats["example_index"]):
        s, e = feats["start_positions"][i], feats["end_positions"][i]
        if s == 0:
            assert e == 0
            continue
        assert 0 < s <= e < 24
        assert _decoded_answer(tok, feats, i) == texts[ex_index]
        labelled.add(ex_index)
    assert labelled == set(range(len(examples)))


def test_long_context_makes_overlapping_windows(tok):
    context = " ".join([CONTEXT] * 4)
    ex = [_example("a", "park", occurrence=3, context=context)]
    max_length, stride = 24, 6
    feats = prepare_eval_features(tok, ex, max_length=max_length, doc_stride=stride)
    n = len(feats["input_ids"])
    assert n > 2 and feats["example_id"] == ["a"] * n and feats["example_index"] == [0] * n
    spans = [[o for o in offs if o is not None] for offs in feats["offset_mapping"]]
    for prev, nxt in zip(spans, spans[1:]):
        assert prev[-stride:] == nxt[:stride]  # consecutive windows share exactly `stride` tokens
    # the windows together cover every context token, from the first to the last character
    assert spans[0][0][0] == 0 and spans[-1][-1][1] == len(context)
    # non-context tokens (CLS, question, SEP, padding) have no offsets
    for ids, offs in zip(feats["input_ids"], feats["offset_mapping"]):
        for t, (tid, o) in enumerate(zip(ids, offs)):
            if t <= 7 or tid in (tok.pad_token_id, tok.sep_token_id, tok.cls_token_id):
                assert o is None
    # the answer sits only in the last window(s): earlier ones are labelled CLS
    train = prepare_train_features(tok, ex, max_length=max_length, doc_stride=stride)
    assert len(train["input_ids"]) == n
    assert train["start_positions"][0] == 0 and train["end_positions"][0] == 0
    assert _decoded_answer(tok, train, n - 1) == "park"


def test_eval_offsets_point_into_context(tok):
    ex = [_example("a", "dog"), _example("b", "house")]
    feats = prepare_eval_features(tok, ex, max_length=20, doc_stride=4)
    for i, offs in enumerate(feats["offset_mapping"]):
        context = ex[feats["example_index"][i]].context
        for t, o in enumerate(offs):
            if o is not None:
                assert 0 <= o[0] < o[1] <= len(context)
                assert tok.convert_ids_to_tokens(feats["input_ids"][i][t]) == context[o[0] : o[1]]


def test_roberta_like_tokenizer_without_token_type_ids():
    tok = roberta_like_tokenizer()
    context = " ".join([CONTEXT] * 2)
    ex = [_example("a", "the park", context=context), _example("b", "my big red house", occurrence=1, context=context)]
    feats = prepare_train_features(tok, ex, max_length=20, doc_stride=5)
    assert "token_type_ids" not in feats
    seen = set()
    for i, ex_index in enumerate(feats["example_index"]):
        if feats["start_positions"][i] != 0:
            assert _decoded_answer(tok, feats, i) == ex[ex_index].answers[0]["text"]
            seen.add(ex_index)
    assert seen == {0, 1}
    ev = prepare_eval_features(tok, ex, max_length=20, doc_stride=5)
    assert "token_type_ids" not in ev
    for ids, offs in zip(ev["input_ids"], ev["offset_mapping"]):
        # <s> question </s> </s> : the second </s> is not context either
        assert offs[0] is None and all(o is None for tid, o in zip(ids, offs) if tid in (0, 1, 2))


def test_answer_with_leading_space_and_no_answer(tok):
    start = CONTEXT.index(" dog")
    ex = [
        QAExample("a", "t", CONTEXT, "who ran ?", [{"text": " dog", "answer_start": start}]),
        QAExample("b", "t", CONTEXT, "who ran ?", []),
    ]
    feats = prepare_train_features(tok, ex, max_length=64, doc_stride=8)
    assert _decoded_answer(tok, feats, 0) == "dog"
    assert feats["start_positions"][1] == 0 and feats["end_positions"][1] == 0


def test_long_question_is_cut_instead_of_crashing(tok):
    q = "who sat " * 30
    ex = [_example("a", "park", question=q)]
    feats = prepare_train_features(tok, ex, max_length=24, doc_stride=6)
    assert len(feats["input_ids"]) >= 1
    assert _decoded_answer(tok, feats, len(feats["input_ids"]) - 1) == "park"
    assert all(len(ids) == 24 for ids in feats["input_ids"])


def test_bad_settings_raise_clear_errors(tok):
    ex = [_example("a", "park")]
    with pytest.raises(XlvizError, match="no room"):
        prepare_train_features(tok, ex, max_length=10, doc_stride=8)

    class Slow:
        is_fast = False

    with pytest.raises(XlvizError, match="fast"):
        prepare_eval_features(Slow(), ex, max_length=64, doc_stride=8)


def test_to_tensors_and_empty_input(tok):
    ex = [_example("a", "park"), _example("b", "cat")]
    feats = prepare_train_features(tok, ex, max_length=32, doc_stride=8)
    t = to_tensors(feats)
    assert set(t) == {"input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"}
    assert tuple(t["input_ids"].shape) == (2, 32) and tuple(t["start_positions"].shape) == (2,)
    assert tuple(to_tensors(feats, rows=slice(1, 2))["input_ids"].shape) == (1, 32)
    assert prepare_eval_features(tok, [], max_length=32, doc_stride=8)["input_ids"] == []
    # dict examples work as well as QAExample
    d = [{"id": "a", "question": ex[0].question, "context": CONTEXT, "answers": ex[0].answers}]
    assert prepare_train_features(tok, d, max_length=32, doc_stride=8)["start_positions"] == feats["start_positions"][:1]
