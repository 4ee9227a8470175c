"""Readers for the real corpora: the shared data sets as they are, and malformed files made here."""

from __future__ import annotations

import collections
import gzip
import re
import types

import pytest

from xlviz.data import real
from xlviz.errors import XlvizError

# --------------------------------------------------------------------------- real shared data


def test_shared_data_dir_finds_the_fixture_folder(shared_data, monkeypatch):
    monkeypatch.delenv(real.ENV_SHARED_DATA, raising=False)
    assert real.shared_data_dir() == shared_data
    monkeypatch.setenv(real.ENV_SHARED_DATA, str(shared_data))
    assert real.shared_data_dir() == shared_data


def test_shared_data_dir_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv(real.ENV_SHARED_DATA, str(tmp_path))
    assert real.shared_data_dir() == tmp_path.resolve()


def test_tatoeba_real(shared_data):
    folder = shared_data / "tatoeba"
    langs = real.available_tatoeba_languages(folder)
    assert {"deu", "fra", "cmn", "swh", "tha"} <= set(langs)
    for lang in langs:
        pairs = real.read_tatoeba(folder, lang)
        assert 300 <= len(pairs) <= 1000, lang
        assert all(a and b for a, b in pairs)
    de = real.read_tatoeba(folder, "deu")
    assert len(de) == 1000
    assert real.read_tatoeba(folder, "de") == de  # ISO 639-1 works too
    assert real.read_tatoeba(None, "deu") == de  # default folder from shared_data_dir()


def _word_lines(path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if re.match(r"^\d+\t", line))


def test_pud_real_counts_words_not_ranges_or_empty_nodes(shared_data):
    folder = shared_data / "pud"
    langs = real.available_pud_languages(folder)
    assert {"en", "de", "fr", "es", "zh"} <= set(langs)
    for lang in ("en", "de"):  # en has empty nodes (1.1), de has multiword tokens (1-2)
        path = real.pud_path(folder, lang)
        sents = real.read_conllu(path)
        assert len(sents) == 1000
        assert sum(len(s.tokens) for s in sents) == _word_lines(path)
        for s in sents:
            assert [t.id for t in s.tokens] == list(range(1, len(s.tokens) + 1))
            # surface text rebuilt from forms, multiword tokens and SpaceAfter matches "# text"
            assert real._surface_text(s.tokens, s.multiword) == s.text
    de = real.read_conllu(real.pud_path(folder, "de"))
    assert sum(len(s.multiword) for s in de) > 100
    numbers = collections.Counter(t.number for s in de for t in s.tokens if t.upos == "NOUN")
    assert numbers["Sing"] > 0 and numbers["Plur"] > 0


def test_pud_pairs_real(shared_data):
    pairs = real.read_pud_pairs(shared_data / "pud", "en", "deu", limit=5)
    assert len(pairs) == 5
    for sid, a, b in pairs:
        assert a.sent_id == b.sent_id == sid
    assert pairs[0][0] == "n01001011"
    assert len(real.read_pud_pairs(None, "zh", "fr")) == 1000


def test_marvin_linzen_real(shared_data):
    path = shared_data / "syneval" / "marvin_linzen.tsv.gz"
    rows = real.read_marvin_linzen(path)
    assert len(rows) == 147260
    cats = collections.Counter(r["category"] for r in rows)
    assert len(cats) == 18 and cats["simple_agrmt"] == 140
    assert set(rows[0]) == {"category", "condition", "grammatical", "ungrammatical"}
    assert rows[0]["grammatical"] != rows[0]["ungrammatical"]
    few = real.read_marvin_linzen(path, categories=["simple_agrmt", "vp_coord"], max_per_category=10)
    assert collections.Counter(r["category"] for r in few) == {"simple_agrmt": 10, "vp_coord": 10}


def test_multi30k_real(shared_data):
    folder = shared_data / "multi30k"
    en = real.multi30k_files(folder, task=2, split="train", lang="en")
    de = real.multi30k_files(folder, task=2, split="train", lang="deu")
    assert len(en) == len(de) == 5
    stream = real.read_text_corpus(en, lowercase=True, max_lines=7)
    assert isinstance(stream, types.GeneratorType)
    lines = list(stream)
    assert len(lines) == 7 and all(line == line.lower() and line for line in lines)
    assert sum(1 for _ in real.read_text_corpus(de[0])) == 29000
    val = [real.multi30k_files(folder, task=1, split="val", lang=lang)[0] for lang in ("en", "de")]
    pairs = real.read_parallel_lines(*val)
    assert len(pairs) == 1014


# --------------------------------------------------------------------------- plain text, synthetic


def test_read_text_corpus_plain_and_gz(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_text("Hello World\n\n  spaced  \r\nlast", encoding="utf-8")
    gz = tmp_path / "b.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("Eins\n\nZwei\n")
    assert list(real.read_text_corpus([plain, gz])) == ["Hello World", "spaced", "last", "Eins", "Zwei"]
    assert list(real.read_text_corpus(str(gz), lowercase=True)) == ["eins", "zwei"]
    assert list(real.read_text_corpus([plain, gz], max_lines=4)) == ["Hello World", "spaced", "last", "Eins"]
    assert list(real.read_text_corpus(plain, max_lines=0)) == []


def test_read_text_corpus_is_lazy(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("line\n" * 1000, encoding="utf-8")
    stream = real.read_text_corpus(path)
    assert isinstance(stream, types.GeneratorType)
    assert next(stream) == "line"


def test_read_text_corpus_errors(tmp_path):
    with pytest.raises(XlvizError, match="corpus file not found") as e:
        real.read_text_corpus([tmp_path / "missing.txt"])  # reported at once, not at first next()
    assert "missing.txt" in str(e.value)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ok\nok\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(XlvizError, match=r"line 3: not UTF-8") as e:
        list(real.read_text_corpus(bad))
    assert "latin1.txt" in str(e.value)
    trunc = tmp_path / "cut.txt.gz"
    data = gzip.compress(("some words here\n" * 5000).encode())
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(XlvizError, match="corrupt or truncated gzip") as e:
        list(real.read_text_corpus(trunc))
    assert "cut.txt.gz" in str(e.value)
    notgz = tmp_path / "plain.gz"
    notgz.write_text("not gzip at all\n")
    with pytest.raises(XlvizError, match="gzip"):
        list(real.read_text_corpus(notgz))


def test_read_parallel_lines(tmp_path):
    a, b = tmp_path / "a.en", tmp_path / "b.de"
    a.write_text("one\ntwo\n\nfour\n")
    b.write_text("eins\n\ndrei\nvier\n")
    assert real.read_parallel_lines(a, b) == [("one", "eins"), ("four", "vier")]
    b.write_text("eins\nzwei\n")
    with pytest.raises(XlvizError, match="differ in length: 4 lines here, 2 lines") as e:
        real.read_parallel_lines(a, b)
    assert "a.en" in str(e.value) and "b.de" in str(e.value)


# --------------------------------------------------------------------------- Tatoeba, synthetic


def _tatoeba(folder, xxx, xx_lines, en_lines):
    folder.mkdir(exist_ok=True)
    (folder / f"tatoeba.{xxx}-eng.{xxx}").write_text("".join(f"{s}\n" for s in xx_lines), encoding="utf-8")
    (folder / f"tatoeba.{xxx}-eng.eng").write_text("".join(f"{s}\n" for s in en_lines), encoding="utf-8")


def test_tatoeba_synthetic_and_mismatch(tmp_path):
    _tatoeba(tmp_path, "deu", ["Hallo.", "Danke."], ["Hello.", "Thanks."])
    _tatoeba(tmp_path, "fra", ["Bonjour.", "Merci.", "Oui."], ["Hello.", "Thanks."])
    assert real.available_tatoeba_languages(tmp_path) == ["deu", "fra"]
    assert real.read_tatoeba(tmp_path, "de") == [("Hallo.", "Hello."), ("Danke.", "Thanks.")]
    with pytest.raises(XlvizError, match="differ in length: 3 lines here, 2 lines") as e:
        real.read_tatoeba(tmp_path, "fra")
    assert "tatoeba.fra-eng.fra" in str(e.value) and "tatoeba.fra-eng.eng" in str(e.value)
    with pytest.raises(XlvizError, match=r"no Tatoeba data for language 'xyz' \(available: deu, fra\)"):
        real.read_tatoeba(tmp_path, "xyz")
    with pytest.raises(XlvizError, match="data folder not found"):
        real.read_tatoeba(tmp_path / "nope", "deu")


# --------------------------------------------------------------------------- CoNLL-U, synthetic

CONLLU = """\
# newdoc id = d1
# sent_id = s1
# text = Zum Haus, bitte.
1-2\tZum\t_\t_\t_\t_\t_\t_\t_\t_
1\tZu\tzu\tADP\tAPPR\t_\t3\tcase\t_\t_
2\tdem\tder\tDET\tART\tCase=Dat|Number=Sing\t3\tdet\t_\t_
3\tHaus\tHaus\tNOUN\tNN\tCase=Dat|Number=Sing\t0\troot\t_\tSpaceAfter=No
4\t,\t,\tPUNCT\t$,\t_\t3\tpunct\t_\t_
4.1\tgeht\tgehen\tVERB\t_\t_\t_\t_\t0:root\t_
5\tbitte\tbitte\tADV\tADV\t_\t3\tadvmod\t_\tSpaceAfter=No
6\t.\t.\tPUNCT\t$.\t_\t3\tpunct\t_\t_

# sent_id = s2
1\tHunde\tHund\tNOUN\tNN\tNumber=Plur\t2\tnsubj\t_\t_
2\tbellen\tbellen\tVERB\tVVFIN\tNumber=Plur|Person=3\t0\troot\t_\tSpaceAfter=No
3\t.\t.\tPUNCT\t$.\t_\t2\tpunct\t_\t_"""  # no final newline: the last sentence still counts


def test_read_conllu_multiword_and_empty_nodes(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    s1, s2 = real.read_conllu(path)
    assert s1.sent_id == "s1" and s1.text == "Zum Haus, bitte."
    assert [t.form for t in s1.tokens] == ["Zu", "dem", "Haus", ",", "bitte", "."]  # no "Zum", no "geht"
    assert [t.id for t in s1.tokens] == [1, 2, 3, 4, 5, 6]
    assert s1.multiword[0].form == "Zum" and (s1.multiword[0].start, s1.multiword[0].end) == (1, 2)
    assert s1.surface_tokens()[:2] == [("Zum", [0, 1]), ("Haus", [2])]
    haus = s1.tokens[2]
    assert haus.feats == {"Case": "Dat", "Number": "Sing"} and haus.number == "Sing"
    assert haus.upos == "NOUN" and haus.lemma == "Haus" and haus.head == 0 and haus.misc == {"SpaceAfter": "No"}
    assert s2.text == "Hunde bellen."  # rebuilt from forms and SpaceAfter=No: no "# text" line
    assert [t.number for t in s2.tokens] == ["Plur", "Plur", None]


@pytest.mark.parametrize(
    "bad_line, lineno, message",
    [
        ("3\tHaus\tHaus\tNOUN\tNN  Number=Sing 0 root _ _", 7, "expected 10 tab-separated columns, got 5"),
        ("7\tHaus\tHaus\tNOUN\tNN\tNumber=Sing\t0\troot\t_\t_", 7, "word ID 7 out of order"),
        ("x\tHaus\tHaus\tNOUN\tNN\tNumber=Sing\t0\troot\t_\t_", 7, "bad word ID 'x'"),
        ("3\tHaus\tHaus\tNOUN\tNN\tNumberSing\t0\troot\t_\t_", 7, "malformed FEATS item 'NumberSing'"),
        ("3\tHaus\tHaus\tNOUN\tNN\tNumber=Sing\troot\troot\t_\t_", 7, "HEAD must be a number"),
    ],
)
def test_read_conllu_broken_line_names_file_and_line(tmp_path, bad_line, lineno, message):
    lines = CONLLU.splitlines()
    assert lines[lineno - 1].startswith("3\tHaus")
    lines[lineno - 1] = bad_line
    path = tmp_path / "broken.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(XlvizError, match=re.escape(f"line {lineno}: {message}")) as e:
        real.read_conllu(path)
    assert "broken.conllu" in str(e.value)


def test_read_conllu_duplicate_sent_id_and_missing_file(tmp_path):
    path = tmp_path / "dup.conllu"
    path.write_text(CONLLU.replace("sent_id = s2", "sent_id = s1"), encoding="utf-8")
    with pytest.raises(XlvizError, match="duplicate sent_id 's1'"):
        real.read_conllu(path)
    with pytest.raises(XlvizError, match="CoNLL-U file not found"):
        real.read_conllu(tmp_path / "none.conllu")


def test_pud_pairs_align_by_sent_id(tmp_path):
    en = CONLLU.replace("Zum", "To the")
    (tmp_path / f"en{real.PUD_SUFFIX}").write_text(en, encoding="utf-8")
    # the German file lacks s1 and has an extra s3
    de = CONLLU.split("\n\n")[1] + "\n\n" + CONLLU.split("\n\n")[1].replace("s2", "s3")
    (tmp_path / f"de{real.PUD_SUFFIX}").write_text(de, encoding="utf-8")
    assert real.available_pud_languages(tmp_path) == ["de", "en"]
    pairs = real.read_pud_pairs(tmp_path, "en", "de")
    assert [p[0] for p in pairs] == ["s2"]
    assert real.read_pud_pairs(tmp_path, "de", "en", limit=0) == []
    with pytest.raises(XlvizError, match=r"no PUD treebank for language 'ja' \(available: de, en\)"):
        real.read_pud_pairs(tmp_path, "en", "ja")


# --------------------------------------------------------------------------- Marvin & Linzen, synthetic

HEADER = "category\tcondition\tgrammatical\tungrammatical\n"


def _tsv_gz(path, text):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


def test_marvin_linzen_synthetic(tmp_path):
    path = _tsv_gz(tmp_path / "ml.tsv.gz", HEADER + "simple_agrmt\tsing_MS\tthe author laughs\tthe author laugh\n\n")
    assert real.read_marvin_linzen(path) == [
        {"category": "simple_agrmt", "condition": "sing_MS", "grammatical": "the author laughs", "ungrammatical": "the author laugh"}
    ]


def test_marvin_linzen_wrong_column_count(tmp_path):
    rows = "a\tb\tgood one\tbad one\na\tb\tonly three\n"
    path = _tsv_gz(tmp_path / "cols.tsv.gz", HEADER + rows)
    with pytest.raises(XlvizError, match="line 3: expected 4 tab-separated columns, got 3") as e:
        real.read_marvin_linzen(path)
    assert "cols.tsv.gz" in str(e.value)


def test_marvin_linzen_header_and_empty_field(tmp_path):
    path = _tsv_gz(tmp_path / "head.tsv.gz", "cat\tcond\tgood\tbad\n")
    with pytest.raises(XlvizError, match="line 1: header must be"):
        real.read_marvin_linzen(path)
    path = _tsv_gz(tmp_path / "empty.tsv.gz", HEADER + "a\tb\t \tbad\n")
    with pytest.raises(XlvizError, match="line 2: empty 'grammatical'") as e:
        real.read_marvin_linzen(path)
    assert e.value.field == "grammatical"
    with pytest.raises(XlvizError, match="empty file"):
        real.read_marvin_linzen(_tsv_gz(tmp_path / "nothing.tsv.gz", ""))


def test_normalize_lang():
    assert real.normalize_lang("deu") == "de" and real.normalize_lang("cmn") == "zh"
    assert real.normalize_lang("de", "iso3") == "deu" and real.normalize_lang("zh", "iso3") == "cmn"
    assert real.normalize_lang("EN") == "en" and real.normalize_lang("xx") == "xx"
