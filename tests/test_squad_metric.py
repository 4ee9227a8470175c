"""SQuAD v1.1 EM/F1 against hand-computed values and the real XQuAD files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xlviz.cli import main
from xlviz.data.squad import read_squad_json
from xlviz.errors import XlvizError
from xlviz.evaluation.squad_metric import (
    evaluate_squad,
    exact_match_score,
    f1_score,
    metric_max_over_ground_truths,
    normalize_answer,
    per_question_scores,
    read_predictions_json,
)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ normalisation


@pytest.mark.parametrize(
    "raw, normalized",
    [
        ("The  Cat!", "cat"),
        ("An apple, the end.", "apple end"),
        ("a theatre", "theatre"),  # articles only as whole words
        ("Theory of Anarchy", "theory of anarchy"),
        ("U.S.A.", "usa"),
        ("  spaced\tout\n text ", "spaced out text"),
        ("«cat»", "«cat»"),  # only string.punctuation is removed, like the official script
        ("the", ""),
        ("", ""),
        ("A-team", "ateam"),  # punctuation removed before articles: 'ateam' is not an article
    ],
)
def test_normalize_answer(raw, normalized):
    assert normalize_answer(raw) == normalized


def test_exact_match_uses_normalisation():
    assert exact_match_score("The Cat.", "cat") is True
    assert exact_match_score("cats", "cat") is False


def test_f1_hand_computed():
    # pred tokens [cat, sat], gold [cat, sat, down]: P = 2/2, R = 2/3, F1 = 2PR/(P+R) = 0.8
    assert f1_score("the cat sat", "cat sat down") == pytest.approx(0.8)
    # bag overlap counts repeats once per match: common = 1, P = 1/2, R = 1, F1 = 2/3
    assert f1_score("cat cat", "cat") == pytest.approx(2 / 3)
    assert f1_score("dog", "cat") == 0
    assert f1_score("", "cat") == 0
    assert f1_score("Cat!", "the cat") == 1.0


def test_max_over_ground_truths():
    golds = ["dog", "cat sat down", "cat sat"]
    assert metric_max_over_ground_truths(f1_score, "cat sat", golds) == 1.0
    assert metric_max_over_ground_truths(exact_match_score, "cat sat", golds) is True
    assert metric_max_over_ground_truths(f1_score, "the cat sat", ["dog", "cat sat down"]) == pytest.approx(0.8)


# ------------------------------------------------------------------ evaluate_squad on a hand-made set


def _qa(qid, answers):
    return {"id": qid, "question": f"question {qid}?", "answers": [{"text": a, "answer_start": 0} for a in answers]}


DATA = [
    {
        "title": "t",
        "paragraphs": [
            {"context": "irrelevant here", "qas": [_qa("q1", ["Paris"]), _qa("q2", ["cat sat down"])]},
            {"context": "irrelevant too", "qas": [_qa("q3", ["1990"]), _qa("q4", ["blue", "dark blue"])]},
        ],
    }
]


def test_evaluate_hand_computed():
    preds = {"q1": "paris.", "q2": "the cat sat", "q4": "green", "extra": "ignored"}
    messages = []
    result = evaluate_squad(DATA, preds, on_unanswered=messages.append)
    # EM: q1 only -> 1/4; F1: 1 + 0.8 + 0 (missing) + 0 -> 1.8/4
    assert result == {"exact_match": 25.0, "f1": pytest.approx(45.0)}
    assert messages == ["Unanswered question q3 will receive score 0."]
    # a whole SQuAD dict is accepted too
    assert evaluate_squad({"version": "1.1", "data": DATA}, preds) == result


def test_max_over_gold_answers_in_evaluate():
    result = evaluate_squad(DATA, {"q1": "Paris", "q2": "cat sat down", "q3": "1990", "q4": "dark blue"})
    assert result == {"exact_match": 100.0, "f1": 100.0}


def test_per_question_scores_rows_and_mean():
    preds = {"q1": "paris.", "q2": "the cat sat", "q4": "green"}
    rows = per_question_scores(DATA, preds)
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    assert rows[0] == {
        "id": "q1", "question": "question q1?", "prediction": "paris.", "gold": ["Paris"], "exact_match": 100.0, "f1": 100.0
    }
    assert rows[1]["f1"] == pytest.approx(80.0) and rows[1]["exact_match"] == 0.0
    assert rows[2]["prediction"] is None and rows[2]["f1"] == 0.0
    assert rows[3]["gold"] == ["blue", "dark blue"]
    overall = evaluate_squad(DATA, preds)
    assert sum(r["exact_match"] for r in rows) / len(rows) == pytest.approx(overall["exact_match"])
    assert sum(r["f1"] for r in rows) / len(rows) == pytest.approx(overall["f1"])


def test_bad_predictions_and_data_raise_clear_errors():
    with pytest.raises(XlvizError, match="q1"):
        evaluate_squad(DATA, {"q1": ["Paris"]})
    with pytest.raises(XlvizError, match="mapping question id"):
        evaluate_squad(DATA, ["Paris"])
    no_answers = [{"title": "t", "paragraphs": [{"context": "c", "qas": [_qa("q9", [])]}]}]
    with pytest.raises(XlvizError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.answers"):
        evaluate_squad(no_answers, {"q9": "x"})
    with pytest.raises(XlvizError, match="no questions"):
        evaluate_squad([], {})


def test_read_predictions_names_file(tmp_path):
    bad = tmp_path / "pred.json"
    bad.write_text('{"q1": "Paris",', encoding="utf-8")
    with pytest.raises(XlvizError, match="pred.json.*malformed JSON"):
        read_predictions_json(bad)
    bad.write_text('{"q1": 3}', encoding="utf-8")
    with pytest.raises(XlvizError, match=r"pred.json.*q1.*must be a string"):
        read_predictions_json(bad)


# ------------------------------------------------------------------ CLI on small files


def _write(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_cli_prints_like_official(tmp_path, capsys):
    data = _write(tmp_path / "data.json", {"version": "1.1", "data": DATA})
    pred = _write(tmp_path / "pred.json", {"q1": "paris.", "q2": "the cat sat", "q4": "green"})
    assert main(["evaluate-qa", str(data), str(pred)]) == 0
    out, err = capsys.readouterr()
    assert out == json.dumps({"exact_match": 25.0, "f1": 45.0}) + "\n"
    assert "Unanswered question q3 will receive score 0." in err


def test_cli_errors_name_file_and_field(tmp_path, capsys):
    broken = {"version": "1.1", "data": json.loads(json.dumps(DATA))}
    del broken["data"][0]["paragraphs"][1]["qas"][0]["answers"][0]["text"]
    data = _write(tmp_path / "broken.json", broken)
    pred = _write(tmp_path / "pred.json", {})
    assert main(["evaluate-qa", str(data), str(pred)]) == 2
    err = capsys.readouterr().err
    assert "broken.json" in err and "data[0].paragraphs[1].qas[0].answers[0].text" in err
    assert "Traceback" not in err

    good = _write(tmp_path / "good.json", {"version": "1.1", "data": DATA})
    (tmp_path / "torn.json").write_text("{", encoding="utf-8")
    assert main(["evaluate-qa", str(good), str(tmp_path / "torn.json")]) == 2
    assert "torn.json" in capsys.readouterr().err
    assert main(["evaluate-qa", str(good), str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err


def test_cli_warns_on_other_version(tmp_path, capsys):
    data = _write(tmp_path / "data.json", {"version": "2.0", "data": DATA})
    pred = _write(tmp_path / "pred.json", {"q1": "Paris", "q2": "cat sat down", "q3": "1990", "q4": "blue"})
    assert main(["evaluate-qa", str(data), str(pred)]) == 0
    out, err = capsys.readouterr()
    assert "Evaluation expects v-1.1, but got dataset with v-2.0" in err
    assert json.loads(out) == {"exact_match": 100.0, "f1": 100.0}


# ------------------------------------------------------------------ real XQuAD


def _xquad_files(shared_data):
    files = sorted((shared_data / "xquad").glob("xquad.*.json"))
    if not files:
        pytest.skip("no xquad.*.json files under ../shared/data/xquad")
    return files


def _question_ids_and_gold(data):
    return [(qa["id"], qa["answers"][0]["text"]) for a in data for p in a["paragraphs"] for qa in p["qas"]]


def test_xquad_gold_empty_and_partial(shared_data):
    for path in _xquad_files(shared_data):
        data = read_squad_json(path)["data"]
        qs = _question_ids_and_gold(data)
        n = len(qs)
        gold = dict(qs)
        assert evaluate_squad(data, gold) == {"exact_match": 100.0, "f1": 100.0}, path.name
        assert evaluate_squad(data, {}) == {"exact_match": 0.0, "f1": 0.0}, path.name
        # exactly k correct, the rest answered with tokens no gold answer contains
        k = 100
        partial = {qid: (text if i < k else "zzqx qqzx") for i, (qid, text) in enumerate(qs)}
        result = evaluate_squad(data, partial)
        assert result["exact_match"] == pytest.approx(100.0 * k / n), path.name
        assert result["f1"] == pytest.approx(100.0 * k / n), path.name


def test_cli_subprocess_on_xquad_en(shared_data, tmp_path):
    path = shared_data / "xquad" / "xquad.en.json"
    if not path.exists():
        pytest.skip("xquad.en.json absent")
    data = read_squad_json(path)["data"]
    gold = dict(_question_ids_and_gold(data))
    for preds in (gold, {}):
        pred_file = _write(tmp_path / "pred.json", preds)
        proc = subprocess.run(
            [sys.executable, "-m", "xlviz", "evaluate-qa", str(path), str(pred_file)],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == json.dumps(evaluate_squad(data, preds)) + "\n"
    # the last run had no predictions: one official 'Unanswered' note per question
    assert proc.stdout == '{"exact_match": 0.0, "f1": 0.0}\n'
    assert proc.stderr.count("will receive score 0.") == len(gold)


# ------------------------------------------------------------------ MLQA-style articles


def test_language_articles_replace_english_ones():
    # Hand-computed: with the L2's article "ма" stripped, "ма лобазо" vs "лобазо" is exact;
    # under v1.1 only English articles go, so it is F1 2*(1*0.5)/(1.5) = 2/3.
    assert normalize_answer("Ма лобазо.", ["ма", "кен"]) == "лобазо"
    assert normalize_answer("the лобазо", ["ма"]) == "the лобазо"  # English ones stay
    assert exact_match_score("лобазо", "ма лобазо", ["ма"])
    assert not exact_match_score("лобазо", "ма лобазо")
    assert f1_score("лобазо", "ма лобазо") == pytest.approx(2 / 3)
    # a shared article no longer earns partial credit: "ма капано" vs "ма лобазо"
    assert f1_score("ма капано", "ма лобазо") == pytest.approx(0.5)
    assert f1_score("ма капано", "ма лобазо", ["ма"]) == 0
    assert normalize_answer("мак ма", ["ма"]) == "мак"  # whole words only
    assert normalize_answer("The cat", []) == "the cat"  # an article-less language


def test_evaluate_with_articles_and_cli_option(tmp_path, capsys):
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "ма лобазо нобеху. кен капано.", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "ма лобазо", "answer_start": 0}]},
        {"id": "b", "question": "?", "answers": [{"text": "кен капано", "answer_start": 18}]}]}]}]}
    preds = {"a": "лобазо", "b": "кен нобеху"}
    assert evaluate_squad(data, preds) == {"exact_match": 0.0, "f1": pytest.approx(100 * (2 / 3 + 0.5) / 2)}
    assert evaluate_squad(data, preds, articles=["ма", "кен"]) == {"exact_match": 50.0, "f1": 50.0}
    rows = per_question_scores(data, preds, ["ма", "кен"])
    assert [r["exact_match"] for r in rows] == [100.0, 0.0] and [r["f1"] for r in rows] == [100.0, 0.0]
    d = _write(tmp_path / "d.json", data)
    p = _write(tmp_path / "p.json", preds)
    assert main(["evaluate-qa", str(d), str(p), "--articles", "ма,кен"]) == 0
    assert json.loads(capsys.readouterr().out) == {"exact_match": 50.0, "f1": 50.0}


def test_results_table_ratio_and_v11_column():
    from xlviz.transfer.report import results_table

    rows = [{"system": "monotrans", "language": "en", "exact_match": 30.0, "f1": 40.0, "f1_v11": 40.0},
            {"system": "monotrans", "language": "svo", "exact_match": 10.0, "f1": 20.0, "f1_v11": 28.0}]
    table = results_table(rows)
    svo = next(l for l in table.splitlines() if " svo " in l).rsplit("  ", 1)[0]  # the resources label last
    assert svo.split()[-2:] == ["0.50", "28.0"]  # 20 / 40, then the official-normalisation F1
    assert "F1 v1.1" in table.splitlines()[0]
    plain = results_table([{k: v for k, v in r.items() if k != "f1_v11"} for r in rows])
    assert "v1.1" not in plain and next(l for l in plain.splitlines() if " svo " in l).rsplit("  ", 1)[0].split()[-1] == "0.50"


# ------------------------------------------------------------------ MLQA's normalisation


def test_mlqa_normalisation_by_hand():
    from xlviz.evaluation.squad_metric import mlqa_normalize

    assert mlqa_normalize("Der Hund, «bellt»!", "de") == "hund bellt"  # Unicode punctuation and German articles
    assert mlqa_normalize("北京是中国的首都。", "zh") == "北 京 是 中 国 的 首 都"  # characters are tokens
    assert mlqa_normalize("136 次", "zh") == "136 次"
    assert mlqa_normalize("Los Ángeles", "es") == "ángeles"
    assert mlqa_normalize("the “Cat”", "en") == "cat"  # v1.1 would keep the curly quotes
    assert normalize_answer("the “Cat”") == "“cat”"
    with pytest.raises(XlvizError, match="language"):
        mlqa_normalize("x", "svo")


# (language, question id, prediction): MLQA (EM, F1) and official v1.1 (EM, F1), computed by hand
MLQA_CASES = {
    "de": [("56beb7953aeaaa14008c92ab", "Pittsburgh Steelers"),  # gold "die Pittsburgh Steelers": MLQA 1/1, v1.1 0/0.8
           ("56e1254ae3433e1400422c66", "A Machine to End War")],  # gold „A Machine to End War“: MLQA 1/1; v1.1 keeps „ “ and drops "a": 0 / 2/3
    "zh": [("56beb4343aeaaa14008c925f", "卡万"),  # gold 卡万·肖特: 2 of 4 characters, F1 2/3; v1.1 one token each, 0
           ("56beb4343aeaaa14008c925c", "136")],  # gold "136 次": F1 2/3 both ways
    "ar": [("56bf36b93aeaaa14008c9561", "برونكوس")],  # gold البرونكوس: MLQA strips ال, 1/1; v1.1 0/0
    "th": [("56beb4343aeaaa14008c925f", "คาวันน์")],  # gold "คาวันน์ ชอร์ต": 7 of 12 characters, F1 14/19; v1.1 2/3
}
MLQA_EXPECTED = {  # language: ((EM, F1) MLQA, (EM, F1) v1.1), percent
    "de": ((100.0, 100.0), (0.0, 100 * (0.8 + 2 / 3) / 2)),
    "zh": ((0.0, 100 * 2 / 3), (0.0, 100 * (0 + 2 / 3) / 2)),
    "ar": ((100.0, 100.0), (0.0, 0.0)),
    "th": ((0.0, 100 * 14 / 19), (0.0, 100 * 2 / 3)),
}


@pytest.mark.parametrize("lang", sorted(MLQA_CASES))
def test_mlqa_scoring_on_real_xquad_questions(shared_data, lang):
    path = shared_data / "xquad" / f"xquad.{lang}.json"
    if not path.is_file():
        pytest.skip(f"{path.name} absent")
    preds = dict(MLQA_CASES[lang])
    data = read_squad_json(path)["data"]
    subset = [{"title": a.get("title", ""), "paragraphs": [
        {"context": p["context"], "qas": [q for q in p["qas"] if q["id"] in preds]} for p in a["paragraphs"]]} for a in data]
    subset = [{**a, "paragraphs": [p for p in a["paragraphs"] if p["qas"]]} for a in subset]
    subset = [a for a in subset if a["paragraphs"]]
    (em, f1), (em11, f111) = MLQA_EXPECTED[lang]
    got = evaluate_squad(subset, preds, language=lang)
    assert got["exact_match"] == pytest.approx(em) and got["f1"] == pytest.approx(f1)
    official = evaluate_squad(subset, preds)
    assert official["exact_match"] == pytest.approx(em11) and official["f1"] == pytest.approx(f111)
    rows = per_question_scores(subset, preds, language=lang)
    assert sum(r["f1"] for r in rows) / len(rows) == pytest.approx(f1)


def test_cli_scores_with_mlqa_normalisation(shared_data, tmp_path, capsys):
    path = shared_data / "xquad" / "xquad.zh.json"
    if not path.is_file():
        pytest.skip("xquad.zh.json absent")
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(dict(MLQA_CASES["zh"]) | {}), encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate-qa", str(path), str(preds), "--language", "zh"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    n = sum(len(p["qas"]) for a in read_squad_json(path)["data"] for p in a["paragraphs"])
    assert got["f1"] == pytest.approx(100 * (2 / 3 + 2 / 3) / n)  # two answered questions of n, each 2/3
    assert main(["evaluate-qa", str(path), str(preds), "--language", "xx"]) == 2
