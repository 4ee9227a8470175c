"""A bilingual dictionary induced from parallel training lines (word translation on real text):
the induction on a corpus small enough to check by hand, its frequency floor and threshold, its
train/test split (disjoint by source word), determinism (same bytes whatever the hash seed), the
scored lines never trained on, and a tiny ``--source files`` run scoring word translation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nltk", reason="the dictionary induction uses nltk's IBM Model 1: pip install -e '.[real]'")

from xlviz.cli import main as cli
from xlviz.data.dictionary import induce_dictionary, split_dictionary, words
from xlviz.data.sources import source_of
from xlviz.data.sources.files import CorpusData
from xlviz.errors import XlvizError
from xlviz.runs import Run, artefacts
from xlviz.transfer.config import TransferConfig

# Each of dog/cat meets each of runs/sleeps in two lines: every word co-occurs four times with
# its translation and twice with each other word of the other side, so EM settles on the
# translations; "bird flies" occurs once, so with min_count=2 it is below the floor (and with
# one line its two words tie: which reading wins is the alphabetical tie-break's).
HAND = [("Dog runs.", "Hund läuft."), ("dog sleeps", "hund schläft"), ("Cat runs!", "Katze läuft!"), ("cat sleeps", "katze schläft"),
        ("dog runs 2", "hund läuft 2"), ("DOG SLEEPS", "HUND SCHLÄFT"), ("cat, runs", "katze, läuft"), ("cat sleeps.", "katze schläft."),
        ("Bird flies", "Vogel fliegt")]


def test_words_are_runs_of_letters_lowercased():
    assert words("The dog's 2 Bälle, x3!") == ["the", "dog", "s", "bälle", "x"]
    assert words("Der Hund", lowercase=False) == ["Der", "Hund"]


def test_induction_on_a_hand_made_parallel_corpus():
    book = induce_dictionary(HAND, min_count=2, threshold=0.3)
    assert book.pairs() == [("cat", "katze"), ("dog", "hund"), ("runs", "läuft"), ("sleeps", "schläft")]
    for a, b, p_ba, p_ab, n in book.entries:
        assert 0.3 <= p_ba <= 1 and 0.3 <= p_ab <= 1
        assert n == sum(1 for x, y in HAND if a in words(x) and b in words(y))
    assert book.settings["training_pairs"] == len(HAND) and book.settings["min_count"] == 2
    # the floor: with min_count 1 the single line comes in, where bird/flies and vogel/fliegt tie
    # (0.5 each): the alphabetical tie-break pairs bird with fliegt - a wrong pair the floor keeps out
    low = induce_dictionary(HAND, min_count=1, threshold=0.3)
    assert set(low.pairs()) - set(book.pairs()) == {("bird", "fliegt")}
    assert induce_dictionary(HAND, min_count=4, threshold=0.3).pairs() == book.pairs(), "each word is in 4 lines"
    assert induce_dictionary(HAND, min_count=5, threshold=0.3).pairs() == []
    # the threshold keeps only the surest pairs
    cut = min(min(p_ba, p_ab) for _, _, p_ba, p_ab, _ in book.entries)
    assert induce_dictionary(HAND, min_count=2, threshold=cut + 1e-6).pairs() != book.pairs()
    with pytest.raises(XlvizError, match="no parallel training pair"):
        induce_dictionary([("1 2", "3 4")])


def test_split_is_disjoint_by_source_word_and_seeded():
    entries = [(f"w{i % 30}", f"v{i}", 0.5) for i in range(45)]  # some source words twice
    train, test = split_dictionary(entries, 0.5, seed=3)
    assert sorted(train + test) == sorted(entries)
    assert not {e[0] for e in train} & {e[0] for e in test}
    assert len({e[0] for e in test}) == 15
    assert split_dictionary(entries, 0.5, seed=3) == (train, test)
    assert split_dictionary(entries, 0.5, seed=4) != (train, test)
    with pytest.raises(XlvizError):
        split_dictionary(entries, 1.0)


def test_induction_gives_the_same_bytes_whatever_the_hash_seed(tmp_path):
    """Python's string hashing changes set order between processes; the dictionary does not."""
    code = ("import json, sys\nfrom xlviz.data.dictionary import induce_dictionary, split_dictionary\n"
            f"pairs = {HAND * 3 + [('a dog and a cat', 'ein Hund und eine Katze')] * 2!r}\n"
            "b = induce_dictionary(pairs, min_count=2, threshold=0.2)\n"
            "sys.stdout.write(json.dumps([b.entries, split_dictionary(b.entries, 0.5, seed=1)], ensure_ascii=False))\n")
    root = str(Path(__file__).resolve().parents[1])
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        outs.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True).stdout)
    assert outs[0] and outs[0] == outs[1] == outs[2]
    assert len(json.loads(outs[0])[0]) >= 4


def _parallel_files(folder: Path, pairs, name: str) -> list[str]:
    a, b = folder / f"{name}.l1", folder / f"{name}.l2"
    a.write_text("\n".join(x for x, _ in pairs) + "\n", encoding="utf-8")
    b.write_text("\n".join(y for _, y in pairs) + "\n", encoding="utf-8")
    return [str(a), str(b)]


def test_the_scored_lines_are_never_trained_on(tmp_path):
    scored = [("Dog runs.", "Hund läuft."), ("a bird", "ein Vogel")]
    train = _parallel_files(tmp_path, HAND, "train")
    par = _parallel_files(tmp_path, scored, "val")
    corpus = tmp_path / "de.txt"
    corpus.write_text("der hund\n")
    opts = source_of("files").options({"l1": "en", "l2": "de", "l2_corpus": [str(corpus)], "parallel": par, "parallel_train": train})
    pairs, dropped = CorpusData(opts).parallel_train_pairs()
    # "Dog runs." is a scored line; "dog runs 2" is not (another line)
    assert dropped == 1 and ("Dog runs.", "Hund läuft.") not in pairs and len(pairs) == len(HAND) - 1
    scored_lines = {x.casefold() for x, _ in scored} | {y.casefold() for _, y in scored}
    assert not any(x.casefold() in scored_lines or y.casefold() in scored_lines for x, y in pairs)
    same = source_of("files").options({"l1": "en", "l2": "de", "l2_corpus": [str(corpus)], "parallel": par, "parallel_train": par})
    with pytest.raises(XlvizError, match="also a parallel training file") as e:
        CorpusData(same).parallel_train_pairs()
    assert e.value.field == "parallel_train"


def test_the_sources_offer_a_dictionary_only_with_parallel_training_lines(tmp_path):
    corpus = tmp_path / "de.txt"
    corpus.write_text("der hund\n")
    base = {"l1": "en", "l2": "de", "l2_corpus": [str(corpus)], "parallel": ["a", "b"]}
    files = source_of("files")
    assert "dictionary" not in files.offers(files.options(base))
    assert "dictionary" in files.offers(files.options({**base, "parallel_train": ["c", "d"]}))
    assert "dictionary" not in files.offers(files.options({**base, "parallel": None, "parallel_train": ["c", "d"]}))
    m30k = source_of("multi30k")
    assert "dictionary" in m30k.offers(m30k.options({}))
    assert m30k.options({}).parallel_train == ["shared:multi30k/task1/train.en.gz", "shared:multi30k/task1/train.de.gz"]
    assert TransferConfig.from_dict({"source": "multi30k", "tasks": ["retrieval", "word-translation"]}).tasks == \
        ["retrieval", "word-translation"]
    with pytest.raises(XlvizError, match="needs dictionary") as e:
        TransferConfig.from_dict({"source": "files", "data": base, "tasks": ["word-translation"]})
    assert e.value.field == "tasks"
    for bad in ({"parallel_train": ["only-one"]}, {"dictionary_threshold": 2}, {"dictionary_test_fraction": 0},
                {"dictionary_min_count": 0}):
        with pytest.raises(XlvizError) as e:
            files.options({**base, **bad})
        assert e.value.field == f"data.{next(iter(bad))}"


def test_a_missing_parallel_training_file_is_one_line_before_anything_trains(tmp_path, capsys):
    corpus = tmp_path / "de.txt"
    corpus.write_text("der hund\n")
    par = _parallel_files(tmp_path, HAND, "val")
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--source", "files", "--tasks", "retrieval,word-translation", "--l1", "en", "--l2", "de",
                "--l1-corpus", str(corpus), "--l2-corpus", str(corpus), "--parallel", *par,
                "--parallel-train", str(tmp_path / "nope.en"), par[1], "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "parallel_train" in err and "nope.en" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not run_dir.exists(), "nothing is written before the files are found"


@pytest.mark.slow
def test_a_tiny_files_run_scores_word_translation_against_the_induced_dictionary(tmp_path):
    from xlviz.data.world import LanguageSpec, WorldConfig, generate_world

    try:
        from world_files import write_world_corpora
    except ImportError:
        from tests.world_files import write_world_corpora

    files = write_world_corpora(tmp_path / "c", documents=60)
    world = generate_world(WorldConfig(seed=3, corpus_documents=20, parallel_pairs=300, languages=[LanguageSpec("svo")]))
    train = _parallel_files(tmp_path, [(p["src"], p["tgt"]) for p in world.parallel_pairs("svo")], "train")
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--source", "files", "--systems", "monotrans,floor,jointpair-disjoint", "--tasks", "retrieval,word-translation",
                "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]),
                "--parallel", str(files["par_en"]), str(files["par_svo"]), "--parallel-train", *train,
                "--dictionary-min-count", "3", "--run-dir", str(run_dir), "--model-size", "tiny", "--vocab-size", "150",
                "--block-size", "24", "--mlm-batch-size", "4", "--pretrain-steps", "2", "--transfer-steps", "2",
                "--eval-max-length", "24", "--qa-max-length", "64", "--doc-stride", "24"]) == 0
    run = Run(run_dir)
    assert {"s4_monotrans", "s4_floor", "s4_jointpair-disjoint"} <= set(run.status()["stages_done"])
    [entry] = artefacts(run, "dictionary")
    assert entry.path == "dictionaries/en-svo.json" and entry.language == "svo" and entry.pair == "en" and entry.role == "dictionary"
    book = json.loads(entry.folder.read_text(encoding="utf-8"))
    assert book["size"] == book["train_size"] + book["test_size"] > 0 and book["test_size"] > 0
    assert not {e[0] for e in book["train"]} & {e[0] for e in book["test"]}, "train and test parts share no source word"
    scored = [line.casefold() for line in files["par_en"].read_text().splitlines()]
    assert book["left_out_sharing_a_scored_line"] > 0, "the same world: its first pairs are the scored ones"
    assert book["training_lines"] + book["left_out_sharing_a_scored_line"] == 300
    assert book["request"]["min_count"] == 3 and "IBM Model 1" in book["method"]
    rows = {r["system"]: r for r in run.results()}
    assert set(rows) == {"monotrans", "floor", "jointpair-disjoint"}  # each system's own encoders, not only MONOTRANS's
    for row in rows.values():
        assert row["tasks"] == ["retrieval", "word-translation"] and row["language"] == "svo"
        per_layer = row["word_translation_per_layer"]
        assert len(per_layer) == 3 and all(x is None or 0 <= x <= 100 for x in per_layer)
        assert 0 < row["word_translation_words"] <= row["word_translation_test_pairs"] <= book["test_size"]
        assert row["word_translation_dictionary_size"] == book["size"]
        # two pre-training steps: every encoder sits on a degenerate stage, and the row says so
        assert row["verdict"] == "degenerate" and "s1_pretrain" in row["degenerate_stages"] or row["system"] == "jointpair-disjoint"
    assert rows["jointpair-disjoint"]["degenerate_stages"] == ["s1_jointpair-disjoint-svo"]
    assert scored, "the scored file was read"
