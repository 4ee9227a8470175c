"""SQuAD/XQuAD reading: validation messages, examples, answer offsets, parallel folders."""

from __future__ import annotations

import copy
import json

import pytest

from xlviz.data.squad import (
    AnswerMismatch,
    QAExample,
    check_answer_starts,
    language_of_file,
    load_parallel_squad,
    load_squad,
    read_squad_json,
    squad_examples,
)
from xlviz.errors import XlvizError

CTX1 = "The cat sat on the mat. The dog ran in the park."
CTX2 = "Paris is the capital of France."
SQUAD = {
    "version": "1.1",
    "data": [
        {
            "title": "Animals",
            "paragraphs": [
                {
                    "context": CTX1,
                    "qas": [
                        {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0}]},
                        {"id": "q2", "question": "Where did the dog run?",
                         "answers": [{"text": "the park", "answer_start": CTX1.index("the park")}]},
                    ],
                }
            ],
        },
        {
            "title": "Cities",
            "paragraphs": [
                {"context": CTX2, "qas": [
                    {"id": "q3", "question": "Capital of France?", "answers": [{"text": "Paris", "answer_start": 0}]}]}
            ],
        },
    ],
}


def _write(tmp_path, obj, name="squad.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


def test_load_squad_examples(tmp_path):
    examples = load_squad(_write(tmp_path, SQUAD))
    assert [e.id for e in examples] == ["q1", "q2", "q3"]
    assert examples[1] == QAExample(
        id="q2", title="Animals", context=CTX1, question="Where did the dog run?",
        answers=[{"text": "the park", "answer_start": CTX1.index("the park")}],
    )
    assert examples[2].title == "Cities"
    assert read_squad_json(_write(tmp_path, SQUAD)) == SQUAD


def test_title_is_optional_and_in_memory_dicts_work():
    data = copy.deepcopy(SQUAD)
    del data["data"][0]["title"]
    examples = squad_examples(data)
    assert examples[0].title == "" and examples[2].title == "Cities"
    assert len(squad_examples(data["data"])) == 3


def test_malformed_json_names_file(tmp_path):
    p = tmp_path / "torn.json"
    p.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(XlvizError, match=r"torn\.json.*malformed JSON at line 1"):
        load_squad(p)
    with pytest.raises(XlvizError, match=r"nothere\.json.*not found"):
        load_squad(tmp_path / "nothere.json")


@pytest.mark.parametrize(
    "edit, field, what",
    [
        (lambda d: d["data"][1]["paragraphs"][0]["qas"][0]["answers"][0].pop("answer_start"),
         "data[1].paragraphs[0].qas[0].answers[0].answer_start", "missing field 'answer_start'"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"][1]["answers"][0].update(answer_start="12"),
         "data[0].paragraphs[0].qas[1].answers[0].answer_start", "expected an integer, got a string"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"][1]["answers"][0].update(answer_start=True),
         "data[0].paragraphs[0].qas[1].answers[0].answer_start", "expected an integer, got a boolean"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(id=7),
         "data[0].paragraphs[0].qas[0].id", "expected a string, got an integer"),
        (lambda d: d["data"][0]["paragraphs"][0].pop("context"), "data[0].paragraphs[0].context", "missing field"),
        (lambda d: d["data"][0]["paragraphs"][0].update(qas={}), "data[0].paragraphs[0].qas", "expected a list"),
        (lambda d: d["data"][0]["paragraphs"][0]["qas"].__setitem__(1, "q2"),
         "data[0].paragraphs[0].qas[1]", "expected an object, got a string"),
        (lambda d: d["data"][1].pop("paragraphs"), "data[1].paragraphs", "missing field"),
        (lambda d: d["data"][1]["paragraphs"][0]["qas"][0].update(id="q1"),
         "data[1].paragraphs[0].qas[0].id", "duplicate question id 'q1'"),
        (lambda d: d.pop("data"), "data", "missing field 'data'"),
    ],
)
def test_bad_fields_name_file_and_path(tmp_path, edit, field, what):
    data = copy.deepcopy(SQUAD)
    edit(data)
    p = _write(tmp_path, data, "bad.json")
    with pytest.raises(XlvizError) as info:
        load_squad(p)
    message = str(info.value)
    assert str(p) in message and f"field '{field}'" in message and what in message
    assert info.value.field == field and info.value.path == str(p)


def test_top_level_must_be_object(tmp_path):
    with pytest.raises(XlvizError, match=r"list\.json.*JSON object"):
        load_squad(_write(tmp_path, [1, 2], "list.json"))


def test_check_answer_starts_reports_mismatches():
    assert check_answer_starts(SQUAD) == []
    data = copy.deepcopy(SQUAD)
    true_start = CTX1.index("the park")
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = true_start + 1
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 999
    found = check_answer_starts(data)
    assert found == [
        AnswerMismatch(
            id="q2", field="data[0].paragraphs[0].qas[1].answers[0].answer_start",
            expected="the park", found=CTX1[true_start + 1 : true_start + 9], nearest_start=true_start,
        ),
        AnswerMismatch(
            id="q3", field="data[1].paragraphs[0].qas[0].answers[0].answer_start",
            expected="Paris", found="", nearest_start=0,
        ),
    ]
    assert check_answer_starts(data["data"]) == found  # the 'data' list works too
    # the examples still load: mismatches are reported, not fatal
    assert len(squad_examples(data)) == 3


def test_language_of_file():
    assert language_of_file("xquad.de.json") == "de"
    assert language_of_file("dev.zh-Hans.json") == "zh-Hans"
    assert language_of_file("dev-v1.1.json") is None
    assert language_of_file("notes.json") is None
    assert language_of_file("xquad.de.txt") is None


def test_parallel_folder_reports_missing_ids(tmp_path):
    (tmp_path / "par").mkdir()
    folder = tmp_path / "par"
    _write(folder, SQUAD, "xquad.en.json")
    de = copy.deepcopy(SQUAD)
    del de["data"][0]["paragraphs"][0]["qas"][1]  # q2 missing in German
    _write(folder, de, "xquad.de.json")
    _write(folder, {"x": 1}, "notes.json")  # not <name>.<lang>.json: ignored
    _write(folder, SQUAD, "dev-v1.1.json")  # '1' is not a language: ignored

    par = load_parallel_squad(folder)
    assert set(par) == {"de", "en"}
    assert [e.id for e in par["en"]] == ["q1", "q2", "q3"]
    assert par.missing == {"de": ["q2"], "en": []}
    assert par.shared_ids == ["q1", "q3"]
    assert {lang: [e.id for e in exs] for lang, exs in par.restricted_to_shared().items()} == {
        "de": ["q1", "q3"], "en": ["q1", "q3"]}
    assert par.files["de"].name == "xquad.de.json"

    with pytest.raises(XlvizError, match=r"xquad\.de\.json lacks 1 \(e\.g\. q2\)"):
        load_parallel_squad(folder, strict=True)
    assert list(load_parallel_squad(folder, languages=["en"])) == ["en"]
    with pytest.raises(XlvizError, match="no file for language.*fr"):
        load_parallel_squad(folder, languages=["fr"])
    _write(folder, SQUAD, "other.en.json")
    with pytest.raises(XlvizError, match="two files for language 'en'"):
        load_parallel_squad(folder)
    with pytest.raises(XlvizError, match="not found"):
        load_parallel_squad(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(XlvizError, match="no <name>.<lang>.json"):
        load_parallel_squad(tmp_path / "empty")


# ------------------------------------------------------------------ real XQuAD


def test_xquad_files_load_and_answer_starts_are_reported(shared_data):
    files = sorted((shared_data / "xquad").glob("xquad.*.json"))
    if not files:
        pytest.skip("no xquad.*.json files under ../shared/data/xquad")
    counts = {}
    for path in files:
        raw = read_squad_json(path)
        examples = squad_examples(raw, path)
        n_questions = sum(len(p["qas"]) for a in raw["data"] for p in a["paragraphs"])
        assert len(examples) == n_questions > 0
        assert all(e.context and e.question and e.answers for e in examples)
        mismatches = check_answer_starts(raw)
        assert all(isinstance(m, AnswerMismatch) and m.field.endswith(".answer_start") for m in mismatches)
        counts[language_of_file(path)] = len(mismatches)
    print("answer_start mismatches per language:", counts)


def test_xquad_folder_is_parallel(shared_data):
    folder = shared_data / "xquad"
    if not any(folder.glob("xquad.*.json")):
        pytest.skip("no xquad.*.json files under ../shared/data/xquad")
    par = load_parallel_squad(folder)
    assert "en" in par and len(par) >= 2
    assert all(not m for m in par.missing.values()), {k: len(v) for k, v in par.missing.items()}
    n = len(par["en"])
    assert all(len(exs) == n for exs in par.values())
