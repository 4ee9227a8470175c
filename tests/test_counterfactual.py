"""Counterfactual renderings: a language's own words in its own order is its test set; the
crossings change only the words or only the order; the run's words-versus-order table."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def world():
    from xlviz.data.world import LanguageSpec, World, WorldConfig

    return World(WorldConfig(seed=2, qa_test_paragraphs=5, languages=[LanguageSpec("svo"), LanguageSpec("sov", "sov", "cyrillic")]))


def test_svo_words_in_svo_order_is_the_svo_test_set(world):
    from xlviz.data.counterfactual import crossed_language, render_qa

    assert render_qa(world, crossed_language(world, "svo", "svo")) == world.qa("test", "svo")
    assert render_qa(world, crossed_language(world, "sov", "sov")) == world.qa("test", "sov")
    # svo is English's grammar: svo's words in English's order are the svo test set too
    assert render_qa(world, crossed_language(world, "svo", "en")) == world.qa("test", "svo")


def test_crossings_change_only_words_or_only_order(world):
    from xlviz.data.counterfactual import crossed_language, render_qa

    en, sov = world.qa("test", "en"), world.qa("test", "sov")
    words = render_qa(world, crossed_language(world, "sov", "en"))
    order = render_qa(world, crossed_language(world, "en", "sov"))

    def vocab(d):
        return {w for a in d["data"] for p in a["paragraphs"] for w in p["context"].replace(".", " ").split()}

    def first(d):
        return d["data"][0]["paragraphs"][0]

    assert vocab(order) <= vocab(en) and vocab(order) != vocab(sov)  # English words ...
    assert sorted(first(order)["context"].split()) != first(en)["context"].split()
    assert vocab(words) <= vocab(sov) | {world.lang["sov"].fn("does"), world.lang["sov"].fn("do")}  # ... L2 words
    for d in (words, order):  # every gold answer is where its offset says
        for a in d["data"]:
            for p in a["paragraphs"]:
                for q in p["qas"]:
                    ans = q["answers"][0]
                    assert p["context"][ans["answer_start"]: ans["answer_start"] + len(ans["text"])] == ans["text"]
    with pytest.raises(Exception, match="unknown language"):
        crossed_language(world, "xx", "en")


def test_analyse_renderings_table(tmp_path, capsys):
    from tests.app_fixtures import make_run
    from xlviz.cli import main as cli

    path = make_run(tmp_path, "r")
    assert cli(["analyse", "renderings", str(path), "--language", "sov", "--paragraphs", "2"]) == 0
    out = capsys.readouterr().out
    for label in ("English words, L2 order", "L2 words, English order", "words not aligned", "order not read", "written to"):
        assert label in out
    assert cli(["analyse", "renderings", str(path), "--language", "sov", "--paragraphs", "2"]) == 0
    assert "read from" in capsys.readouterr().out
    from xlviz.analysis.counterfactuals import run_renderings

    table = run_renderings(path, "sov", paragraphs=2)
    by = {(r["rendering"], r["metric"] if "metric" in r else "") : r for r in table["scores"]}
    split = {(r["cost"], r["metric"]): r for r in table["split"]}
    # the split is English's F1 minus each rendering's, on the same questions
    assert split[("words not aligned", "f1")]["difference"] == pytest.approx(by[("en", "")]["f1"] - by[("words", "")]["f1"], abs=1e-3)
    assert split[("order not read", "f1")]["difference"] == pytest.approx(by[("en", "")]["f1"] - by[("order", "")]["f1"], abs=1e-3)
    # one row per feature in which sov's grammar differs from English's, its loss paired the same way
    for feature in ("word_order", "adposition", "adjective", "question"):
        assert split[(f"{feature} alone", "f1")]["difference"] == pytest.approx(
            by[("en", "")]["f1"] - by[(feature, "")]["f1"], abs=1e-3)
        assert by[(feature, "")]["model"] == "en" and by[(feature, "")]["label"] == f"English, only {feature} = " + \
            {"word_order": "sov", "adposition": "post", "adjective": "after", "question": "in-situ"}[feature]
    assert "word_order alone" in out and "English, only adposition = post" in out


def test_one_feature_with_englishs_own_value_is_the_english_test_set():
    """Each feature set to English's value changes no byte, English's marked orders included;
    set to another value it changes the test set (so the comparison can fail)."""
    import json

    from xlviz.data.counterfactual import feature_language, render_qa
    from xlviz.data.typology import FEATURES
    from xlviz.data.world import LanguageSpec, World, WorldConfig

    varied = World(WorldConfig(seed=3, qa_test_paragraphs=6, l1_variety=0.5, languages=[LanguageSpec("tr", "tr")]))
    en = json.dumps(varied.qa("test", "en"))
    assert "it is" in en  # the marked orders are there to keep
    for feature, values in FEATURES.items():
        assert json.dumps(render_qa(varied, feature_language(varied, feature, values[0]))) == en, feature
        # the test facts have no noun-phrase modifier ("the dog near the cats"): its order changes nothing
        changed = json.dumps(render_qa(varied, feature_language(varied, feature, values[1]))) != en
        assert changed == (feature != "modifier"), feature
    with pytest.raises(Exception, match="unknown value"):
        feature_language(varied, "word_order", "osv")


def test_one_feature_renderings_are_named_by_the_feature_and_keep_the_answers(world):
    from xlviz.data.counterfactual import renderings_of, render_qa

    kinds = renderings_of(world, "sov")
    # sov differs from English in four features; svo in none
    assert list(kinds) == ["en", "words", "order", "l2", "word_order", "adposition", "adjective", "question"]
    assert list(renderings_of(world, "svo")) == ["en", "words", "order", "l2"]
    assert kinds["adposition"].language.grammar.features() == {**kinds["en"].language.grammar.features(), "adposition": "post"}
    en = world.qa("test", "en")
    for name in ("word_order", "adposition", "adjective", "question"):
        d = render_qa(world, kinds[name].language)
        assert [q["id"] for a in d["data"] for p in a["paragraphs"] for q in p["qas"]] == \
               [q["id"] for a in en["data"] for p in a["paragraphs"] for q in p["qas"]]
        for a in d["data"]:
            for p in a["paragraphs"]:
                for q in p["qas"]:
                    ans = q["answers"][0]
                    assert p["context"][ans["answer_start"]: ans["answer_start"] + len(ans["text"])] == ans["text"]
    # adjectives after the noun: the statements change, the questions' wh words do not move
    adj = render_qa(world, kinds["adjective"].language)
    assert adj != en and "articles" not in adj


def test_verb_position_alone_moves_only_the_verb(world):
    from xlviz.data.counterfactual import feature_language
    from xlviz.data.grammar import NP, Clause
    from xlviz.data.world import render

    c = Clause(NP("dog", adjs=("big",)), "see", NP("ball", "pl", adjs=("red",)))
    assert render(world.lang["en"], c).text == "the big dog sees the red balls."
    assert render(feature_language(world, "word_order", "sov"), c).text == "the big dog the red balls sees."
    assert render(feature_language(world, "word_order", "vso"), c).text == "sees the big dog the red balls."
    # every test statement: the same words; without a location only the verb moves, with one the
    # location moves before the object with it (the grammar's verb-final clause, see the module)
    sov = feature_language(world, "word_order", "sov")
    seen = {"without": 0, "with": 0}
    for facts in world.qa_facts("test"):
        for clause, _ in facts:
            a, b = render(world.lang["en"], clause).words, render(sov, clause).words
            assert sorted(a) == sorted(b)
            rest = lambda ws: [w for w in ws if w[1] != "verb"]  # noqa: E731
            if clause.loc is None:
                assert rest(a) == rest(b) and b[-2][1] == "verb"
                seen["without"] += 1
            else:
                subj = [w for w in a if w[1].startswith("subj")]
                obj = [w for w in a if w[1].startswith("obj")]
                loc = [w for w in a if w[1].startswith("loc")]
                assert b[:-1] == subj + loc + obj + [w for w in a if w[1] == "verb"]
                seen["with"] += 1
    assert seen["without"] and seen["with"]


def test_one_question_renders_as_in_the_whole_rendering(world):
    from xlviz.data.counterfactual import crossed_language, render_qa, render_question, renderings_of

    for name, kind in renderings_of(world, "sov").items():
        lang = kind.language
        full = render_qa(world, lang)
        for article in full["data"]:
            for para in article["paragraphs"]:
                for q in para["qas"]:
                    one = render_question(world, lang, q["id"])
                    assert one.get("articles") == full.get("articles"), name
                    (got,) = [p for a in one["data"] for p in a["paragraphs"]]
                    assert got == {"context": para["context"], "qas": [q]}, (name, q["id"])
    for bad in ("test-9999-0-subj", "nonsense", "test-0000-0-nosuch"):
        with pytest.raises(Exception, match="question|paragraphs"):
            render_question(world, crossed_language(world, "sov", "en"), bad)


def test_one_questions_answers_score_as_the_words_versus_order_table(tmp_path):
    """Each rendering of one question, answered by the run's export for its words: the answer,
    EM and F1 are that question's row of the set-level table's scoring, the [UNK] share is
    the tokenizer's on that paragraph."""
    from tests.app_fixtures import make_run
    from xlviz.analysis.counterfactuals import UNK_LIMIT, predict_rendering, score_rendering, unk_rate
    from xlviz.data.counterfactual import render_qa, renderings_of
    from xlviz.data.world import load_world
    from xlviz.views import renderings_of_question
    from xlviz.views.renderings import not_scored, question_renderings

    path = make_run(tmp_path, "r")
    world = load_world(path / "world")
    qids = [q["id"] for a in world.qa("test", "sov")["data"] for p in a["paragraphs"] for q in p["qas"]]
    decoding = {"max_length": 48, "doc_stride": 24, "max_answer_length": 6}  # the fixture run's settings
    unscored = 0
    for qid in qids[:4]:
        view = renderings_of_question(path, "sov", qid)
        rs = question_renderings(world, "sov", qid)
        kinds = renderings_of(world, "sov")
        assert [r.name for r in rs] == list(kinds) and [r.name for r in rs][:4] == ["en", "words", "order", "l2"]
        assert all(r.qid == qid for r in rs) and len(rs) > 4  # then English with one of sov's features
        rows = {r["rendering"]: r for _, r in view.rows.iterrows()}
        for r in rs:
            from xlviz.models.loading import load_model

            model, tok = load_model(path / "export" / f"monotrans-{r.reader}", task="qa")
            full = render_qa(world, kinds[r.name].language)
            want = {x["id"]: x for x in score_rendering(model.eval(), tok, full, decoding)}[qid]
            pred = predict_rendering(model, tok, full, decoding)[qid]
            row = rows[r.label]
            assert row["answer"] == pred["text"] and row["model"] == "monotrans"
            assert row["[UNK] %"] == pytest.approx(100 * unk_rate(tok, r.data), abs=0.05)
            if row["[UNK] %"] / 100 <= UNK_LIMIT:
                assert row["F1"] == pytest.approx(want["f1"]) and row["EM"] == pytest.approx(want["exact_match"])
                assert row["note"] == ""
            else:
                unscored += 1
                assert row["F1"] != row["F1"] and row["note"] == not_scored(unk_rate(tok, r.data))  # NaN: no number
        assert view.cards().count('class="xlviz-rendering"') == len(rs)
    assert unscored  # the L2's auxiliaries in English's order are no word of the L2's vocabulary
