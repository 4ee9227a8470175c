"""The world's shared-material settings (numerals, dates, loanwords) and the overlap measures
(shared subwords, the QA set's question/answer-sentence overlap), on tiny worlds and toy sets."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from xlviz.data.lexicon import L2_NOUN_PLURAL, L2_VERB_PL, L2_VERB_SG, L2Lexicon, content_lemmas, loan_count, respell
from xlviz.data.overlap import content_stems, mean_share, qa_lexical_overlap, sentence_at, subword_overlap, world_subword_overlap
from xlviz.data.world import LanguageSpec, World, WorldConfig
from xlviz.errors import XlvizError
from xlviz.transfer.config import TransferConfig

TINY = dict(corpus_documents=40, qa_train_paragraphs=10, qa_dev_paragraphs=4, qa_test_paragraphs=6, parallel_pairs=20,
            parallel_train_pairs=20, agreement_pairs=9, sense_pairs=6)
LANGS = [LanguageSpec("tr", "tr"), LanguageSpec("sov", "sov", "cyrillic")]
# sha256 over the saved files of the tiny world below, computed with the code before the
# shared-material settings existed (commit da1ee6a): their defaults must leave every byte.
BEFORE = "d6410038a265b279c9c4b12bfec3e4df0c9526422af3bfe55584ffb593fe2862"
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
NUMBER = re.compile(r"\d[\d-]*")


def saved_hash(world: World, folder: Path) -> str:
    world.save(folder)
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def tiny(**kw) -> WorldConfig:
    return WorldConfig(languages=list(LANGS), l1_variety=0.3, shared_names=True, **{**TINY, **kw})


# --------------------------------------------------------------------------- defaults
def test_defaults_leave_every_byte_of_the_world(tmp_path):
    plain = saved_hash(World(tiny()), tmp_path / "plain")
    explicit = saved_hash(World(tiny(numeral_share=0.0, date_share=0.0, loanword_share=0.0, qa_paraphrase=0.0)),
                          tmp_path / "explicit")
    assert plain == explicit == BEFORE
    on = saved_hash(World(tiny(numeral_share=0.2)), tmp_path / "on")
    assert on != BEFORE


def test_settings_at_default_stay_out_of_world_json_and_run_configs():
    for key in ("numeral_share", "date_share", "loanword_share", "qa_paraphrase"):
        assert key not in WorldConfig().to_dict()
        assert key not in TransferConfig().to_dict()["world"]
    cfg = TransferConfig.from_dict({"world": {"loanword_share": 0.3, "date_share": 0.1}})
    assert cfg.to_dict()["world"]["loanword_share"] == 0.3 and "numeral_share" not in cfg.to_dict()["world"]
    assert WorldConfig.from_dict(cfg.to_dict()["world"]).loanword_share == 0.3  # round trip


@pytest.mark.parametrize("key", ["numeral_share", "date_share", "loanword_share", "qa_paraphrase"])
@pytest.mark.parametrize("value", [1.5, -0.1, "x", True, float("nan")])
def test_bad_shares_name_their_field(key, value):
    with pytest.raises(XlvizError) as e:
        WorldConfig.from_dict({key: value}, path="w.json")
    assert e.value.field == f"world.{key}" and "from 0.0 to 1.0" in str(e.value)


# --------------------------------------------------------------------------- loanwords
def test_respell_known_values():
    assert [respell(w) for w in ("teacher", "apple", "watch", "box", "happy", "farmer", "bat#thing", "quiet")] == [
        "teaker", "aple", "vak", "boks", "api", "farmer", "bat", "kviet"]


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_loanwords_at_the_configured_share_and_nested(share):
    plain = L2Lexicon.generate(7)
    lex = L2Lexicon.generate(7, loanword_share=share)
    smaller = L2Lexicon.generate(7, loanword_share=share / 2)
    assert len(lex.loans) == loan_count(share) == round(share * len(content_lemmas()))
    assert lex.loans <= set(content_lemmas()) and smaller.loans < lex.loans
    assert all(lex.stems[lemma] == respell(lemma) for lemma in lex.loans)
    assert {k: v for k, v in lex.stems.items() if k not in lex.loans} == {k: v for k, v in plain.stems.items() if k not in lex.loans}
    assert len(set(lex.stems.values())) == len(lex.stems)  # still a bijection (one sense of "bat" at most)


def test_loanwords_carry_the_l2s_morphology_and_script():
    world = World(tiny(loanword_share=0.5))
    for code in ("tr", "sov"):
        lex = world.lang[code].lexicon
        rows = {(r["lemma"], r["pos"]): r[code] for r in world.dictionary(code)}
        nouns = [lemma for lemma in sorted(lex.loans) if (lemma, "noun.pl") in rows]
        verbs = [lemma for lemma in sorted(lex.loans) if (lemma, "verb.sg") in rows]
        assert nouns and verbs
        for lemma in nouns:
            assert rows[(lemma, "noun.sg")] == lex.write(respell(lemma))
            assert rows[(lemma, "noun.pl")] == lex.write(respell(lemma) + L2_NOUN_PLURAL)
        for lemma in verbs:
            assert rows[(lemma, "verb.sg")] == lex.write(respell(lemma) + L2_VERB_SG)
            assert rows[(lemma, "verb.pl")] == lex.write(respell(lemma) + L2_VERB_PL)
    teacher = {r["lemma"]: r for r in world.dictionary("tr") if r["pos"] == "noun.pl"}
    loans = world.lang["tr"].lexicon.loans
    assert any(teacher[lemma]["tr"] == respell(lemma) + "zo" for lemma in loans if lemma in teacher)
    # the Cyrillic L2 writes its loans wholly in Cyrillic (respell keeps to letters every script has)
    sov = world.lang["sov"].lexicon
    assert all(not re.search("[a-z]", sov.word(lemma)) for lemma in sov.loans)
    # and in the Latin-script L2's corpus the loans occur as words
    tr_words = set(" ".join(world.corpus("tr")).replace(".", " ").replace("?", " ").split())
    assert {respell(lemma) for lemma in loans} & tr_words


# --------------------------------------------------------------------------- numbers and dates
def test_numerals_and_dates_are_written_the_same_in_every_language():
    world = World(tiny(numeral_share=0.6, date_share=0.6))
    tests = {lang: world.qa("test", lang) for lang in world.languages}
    seen_dates = seen_numbers = 0
    for lang in world.l2s:
        for a_en, a_l2 in zip(tests["en"]["data"], tests[lang]["data"]):
            for p_en, p_l2 in zip(a_en["paragraphs"], a_l2["paragraphs"]):
                assert sorted(NUMBER.findall(p_en["context"])) == sorted(NUMBER.findall(p_l2["context"]))
                seen_dates += len(DATE.findall(p_en["context"]))
                seen_numbers += len(NUMBER.findall(p_en["context"]))
                for q_en, q_l2 in zip(p_en["qas"], p_l2["qas"]):
                    assert sorted(NUMBER.findall(q_en["question"])) == sorted(NUMBER.findall(q_l2["question"]))
        for pair in world.parallel_pairs(lang):  # the gold alignment joins a date or numeral to itself
            for i, j in pair["alignment"]:
                if NUMBER.fullmatch(pair["src_words"][i]):
                    assert pair["tgt_words"][j] == pair["src_words"][i]
    assert seen_dates > 0 and seen_numbers > seen_dates
    assert any(DATE.search(doc) for doc in world.corpus("tr"))
    # "on DATE" in English, "DATE <on>" with postpositions, and the dictionary lists "on"
    on = world.lang["tr"].fn("on")
    assert re.search(rf"\d{{2}} {on}\b", " ".join(world.corpus("tr")))
    assert re.search(r"\bon \d{4}-", " ".join(world.corpus("en")))
    assert {"en": "on", "tr": on, "lemma": "on", "pos": "function"} in world.dictionary("tr")


def test_dates_and_numerals_leave_answers_on_their_offsets():
    world = World(tiny(numeral_share=0.5, date_share=0.5))
    for lang in world.languages:
        for article in world.qa("test", lang)["data"]:
            for p in article["paragraphs"]:
                for q in p["qas"]:
                    a = q["answers"][0]
                    assert p["context"][a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]


# --------------------------------------------------------------------------- overlap measures
class ToyTokenizer:
    """Whitespace tokens over a fixed vocabulary: shares that can be counted by hand."""

    all_special_tokens = ["[CLS]"]

    def __init__(self, vocab: list[str]):
        self.vocab = {t: i for i, t in enumerate(vocab)}

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        return text.split()


def test_subword_overlap_hand_counted():
    a = ToyTokenizer(["[CLS]", "the", "cat", "##s", "a"])
    b = ToyTokenizer(["[CLS]", "the", "gato", "##s", "b"])
    o = subword_overlap(a, b, ["cat a the"], ["the gato ##s b the"])
    assert (o.types_a, o.types_b, o.shared_types) == (4, 4, 2)  # the, ##s
    assert o.type_share == 0.5
    assert o.type_share_long == 0.5  # of b's long types {the, gato}, "the"
    assert o.token_share_b == 3 / 5 and o.token_share_a == 1 / 3
    assert o.token_share_b_long == 2 / 3  # the, gato, the


def test_loanwords_raise_the_shared_subwords_of_a_world():
    base = dict(languages=[LanguageSpec("tr", "tr")], corpus_documents=120)
    none = world_subword_overlap(World(WorldConfig(**base)), "tr", vocab_size=120)
    many = world_subword_overlap(World(WorldConfig(loanword_share=0.6, **base)), "tr", vocab_size=120)
    assert many.type_share_long > none.type_share_long and many.token_share_b > none.token_share_b


TOY = {"data": [{"title": "t", "paragraphs": [
    {"context": "The cat sat on the mat. A dog barked loudly.",
     "qas": [{"id": "q1", "question": "Where did the cat sit?", "answers": [{"text": "on the mat", "answer_start": 12}]},
             {"id": "q2", "question": "What barked loudly?", "answers": [{"text": "A dog", "answer_start": 24}]}]},
    {"context": "Paris is the capital of France.",
     "qas": [{"id": "q3", "question": "Which city is the capital of Germany?", "answers": [{"text": "Paris", "answer_start": 0}]},
             {"id": "q4", "question": "What is it?", "answers": [{"text": "Paris", "answer_start": 0}]}]}]}]}


def test_qa_lexical_overlap_hand_counted():
    pytest.importorskip("nltk")
    assert sentence_at(TOY["data"][0]["paragraphs"][0]["context"], 24) == (24, 44)
    assert content_stems("Where did the cat sit?") == ["cat", "sit"]
    rows = qa_lexical_overlap(TOY)
    # q1: {cat, sit} against {cat, sat, mat}: 1 of 2; q2: {bark, loudli} both in its sentence;
    # q3: {citi, capit, germani} against {pari, capit, franc}: 1 of 3; q4 has no content word
    assert [(r.id, r.paragraph, r.words, r.found) for r in rows] == [("q1", 0, 2, 1), ("q2", 0, 2, 2), ("q3", 1, 3, 1)]
    assert mean_share(rows) == pytest.approx((1 / 2 + 1 + 1 / 3) / 3)
    # one word either side: "sat on the mat. A" (no cat), "mat. A dog barked" (bark, not
    # loudli), "Paris is" (no capital)
    near = {r.id: (r.words, r.found) for r in qa_lexical_overlap(TOY, window=1)}
    assert near == {"q1": (2, 0), "q2": (2, 1), "q3": (3, 0)}
    with pytest.raises(XlvizError) as e:
        qa_lexical_overlap(TOY, window=-1)
    assert e.value.field == "window"
    with pytest.raises(XlvizError):
        qa_lexical_overlap({"data": [{"paragraphs": [{"context": "x", "qas": [{"answers": [{"answer_start": 9}]}]}]}]})


# --------------------------------------------------------------------------- paraphrased questions
def test_paraphrased_questions_name_other_phrases_by_class_and_stay_answerable():
    pytest.importorskip("nltk")
    plain, half, full = (World(tiny(qa_paraphrase=s)) for s in (0.0, 0.5, 1.0))
    flags = [q.paraphrase for facts in half._paragraphs("train", 10) for _, qs in facts for q in qs]
    assert 0.25 < sum(flags) / len(flags) < 0.75  # about half (35 questions)
    assert not any(q.paraphrase for facts in plain._paragraphs("train", 10) for _, qs in facts for q in qs)
    en = full.qa("test")
    questions = [q["question"] for a in en["data"] for p in a["paragraphs"] for q in p["qas"]]
    assert any(re.search(r"\b(animal|person|people|thing|place)s?\b", q) for q in questions)
    # same ids, contexts and answers as without paraphrase: only the questions' wording differs
    base = plain.qa("test")
    for a0, a1 in zip(base["data"], en["data"]):
        for p0, p1 in zip(a0["paragraphs"], a1["paragraphs"]):
            assert p0["context"] == p1["context"]
            assert [(q["id"], q["answers"]) for q in p0["qas"]] == [(q["id"], q["answers"]) for q in p1["qas"]]
    assert mean_share(qa_lexical_overlap(en)) < mean_share(qa_lexical_overlap(base)) - 0.2
    # every L2 renders the class nouns with its own words, and the dictionary lists them
    rows = {(r["lemma"], r["pos"]): r["tr"] for r in full.dictionary("tr")}
    assert rows[("animal", "noun.pl")] == full.lang["tr"].lexicon.noun("animal", "pl")
    assert ("animal", "noun.sg") not in {(r["lemma"], r["pos"]) for r in plain.dictionary("tr")}


def test_loanwords_leave_the_english_side_alone():
    """What lets a sweep over ``world.loanword_share`` share MONOTRANS's English stages."""
    from xlviz.transfer.sweep import NOT_SHARED_KEYS

    assert "world.loanword_share" in NOT_SHARED_KEYS
    plain, loans = World(tiny()), World(tiny(loanword_share=0.7))
    assert plain.corpus("en") == loans.corpus("en")
    for split in ("train", "dev", "test"):
        assert plain.qa(split) == loans.qa(split)
    assert plain.corpus("tr") != loans.corpus("tr")
    # and a sweep over it runs one English body per seed
    import argparse

    from xlviz.commands.transfer import build_config
    from xlviz.transfer.sweep import make_cells, parse_grid

    args = argparse.Namespace(methods="monotrans", languages="tr", seed=None)
    cells = make_cells(parse_grid(["world.loanword_share=0,0.3", "world.date_share=0,0.2"]), args, None, build_config)
    assert "loanword_share" not in cells[0].config["world"] and cells[2].config["world"]["loanword_share"] == 0.3
    assert cells[0].group() == cells[2].group() != cells[1].group()
