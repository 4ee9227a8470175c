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
