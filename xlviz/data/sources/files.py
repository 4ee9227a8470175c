"""Real text from files: two monolingual corpora (text files or globs, ``.gz`` read as a
stream), optionally a line-aligned parallel pair of files (evaluation only) and SQuAD-format QA
files. Paths starting ``shared:`` are resolved in the shared data folder
(``$XLVIZ_SHARED_DATA`` or ``../shared/data``, :func:`xlviz.data.real.shared_data_dir`).

    xlviz transfer --source files --l1-corpus 'en/*.txt.gz' --l2-corpus 'de/*.txt.gz' --parallel a.en b.de

Memory is bounded: corpora are streamed line by line and never held (:class:`CorpusData`).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from xlviz.data.real import file_kind, read_parallel_lines, read_text_corpus, shared_data_dir
from xlviz.data.sources import Source
from xlviz.errors import XlvizError, bounded
from xlviz.fields import setting


def shared_path(text: str, what: str) -> str:
    """``shared:x/y`` -> the shared data folder's ``x/y`` (files or folders); other paths unchanged."""
    if not str(text).startswith("shared:"):
        return str(text)
    root = shared_data_dir()
    if root is None:
        raise XlvizError("the shared data folder was not found (../shared/data); set XLVIZ_SHARED_DATA", field=what)
    return str(root / str(text)[len("shared:"):])


def resolve_files(patterns: list[str] | str, what: str) -> list[Path]:
    """Files for a list of paths/globs (``shared:`` = the shared data folder), sorted per pattern."""
    if isinstance(patterns, (str, Path)):
        patterns = [str(patterns)]
    files: list[Path] = []
    for pattern in patterns:
        text = str(Path(shared_path(str(pattern), what)).expanduser())
        found = sorted(Path(p) for p in glob.glob(text)) if glob.has_magic(text) else ([Path(text)] if os.path.lexists(text) else [])
        if not found:
            raise XlvizError(f"no {what} file matches {bounded(repr(str(pattern)))}", path=text, field=what)
        for f in found:  # a FIFO blocks the run, /dev/zero never ends: say what it is
            kind = file_kind(f)
            if kind is not None:
                raise XlvizError(f"is {kind}, not a regular file ({what} files are plain or .gz text files)", path=f, field=what)
        files += [f for f in found if f not in files]
    if not files:
        raise XlvizError(f"no {what} files given", field=what)
    return files


def _positive(value, name: str, path: str | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise XlvizError(f"must be a positive integer, got {value!r}", path=path, field=f"data.{name}")


@dataclass
class CorpusOptions:
    """What a corpus source reads: the run config's ``data``. Each option is declared with its
    default and help (:func:`xlviz.fields.setting`): ``xlviz transfer``'s flags for it come from here."""

    l1: str = setting("en", "L1 language code")
    l2: str = setting("de", "L2 language code")
    l1_corpus: list[str] = setting(default_factory=list, nargs="+", metavar="GLOB",  # not needed with init_model
                                   help="L1 corpus files/globs (.gz ok; shared:... = shared data)")
    l2_corpus: list[str] = setting(default_factory=list, nargs="+", metavar="GLOB",
                                   help="L2 corpus files/globs, independent of L1 (not translations)")
    parallel: list[str] | None = setting(None, "line-aligned evaluation pairs (never trained on)", nargs=2,
                                         metavar=("L1_FILE", "L2_FILE"))
    # [l1 file, l2 file], line-aligned training pairs: a bilingual dictionary is induced from them
    # (xlviz.data.dictionary) for word translation, scored on the ``parallel`` pairs (a training pair
    # sharing a line with them is left out); offered as "dictionary" when both are given
    parallel_train: list[str] | None = setting(
        None, "line-aligned training pairs a bilingual dictionary is induced from (word translation)", nargs=2,
        metavar=("L1_FILE", "L2_FILE"))
    dictionary_lines: int | None = setting(None, "training pairs read for the dictionary (default: all)")
    dictionary_min_count: int = setting(5, "dictionary frequency floor: both words in at least this many training pairs")
    dictionary_threshold: float = setting(0.3, "dictionary entries need both translation probabilities at least this")
    dictionary_test_fraction: float = setting(0.5, "share of the dictionary's source words held out for scoring")
    parallel_max: int = setting(1000, "evaluation pairs read at most")
    tokenizer_lines: int = setting(100_000, "lines per language used to learn a vocabulary")
    max_lines: int | None = setting(None, "lines per language streamed for MLM (default: the whole corpus, epoch after epoch)")
    lowercase: bool = setting(True, "lower-case the corpora (--no-lowercase: keep case in the learned vocabularies)")
    shuffle_buffer: int = setting(4096, "blocks held for shuffling (memory bound)")
    l2_vocab_size: int | None = setting(None, "L2 vocabulary size (default: the run's vocab_size)")
    qa_train: str | None = setting(None, "L1 SQuAD-format file: enables QA fine-tuning and scoring")
    qa_train_paragraphs: int | None = setting(None, "QA training paragraphs read from qa_train (default: all)")
    qa_train_articles: int | None = setting(None, "instead: this many whole articles of qa_train (no article in both "
                                                   "train and evaluation)")
    qa_eval: list[str] = setting(default_factory=list, nargs="+", metavar="FILE_OR_DIR",  # l1 and l2 files used
                                 help="SQuAD-format <name>.<lang>.json files or folders")

    def validate(self, *, path: str | None = None) -> None:
        for name in ("l1_corpus", "l2_corpus", "qa_eval"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, [value])
            elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise XlvizError(f"expected a list of paths, got {value!r}", path=path, field=f"data.{name}")
        if not self.l2_corpus:
            raise XlvizError("no L2 corpus given", path=path, field="data.l2_corpus")
        if not isinstance(self.l1, str) or not isinstance(self.l2, str) or self.l1 == self.l2 or not self.l1 or not self.l2 \
                or "-" in self.l2:
            raise XlvizError("l1 and l2 must be two different language codes without '-'", path=path, field="data.l2")
        for name in ("parallel", "parallel_train"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, str) for v in value)):
                raise XlvizError("expected two files [l1 side, l2 side]", path=path, field=f"data.{name}")
        _positive(self.dictionary_min_count, "dictionary_min_count", path)
        for name in ("dictionary_threshold", "dictionary_test_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1 \
                    or name == "dictionary_test_fraction" and value in (0, 1):
                raise XlvizError(f"must be a number between 0 and 1, got {value!r}", path=path, field=f"data.{name}")
        for name in ("parallel_max", "tokenizer_lines", "shuffle_buffer"):
            _positive(getattr(self, name), name, path)
        for name in ("l2_vocab_size", "max_lines", "qa_train_paragraphs", "qa_train_articles", "dictionary_lines"):
            if getattr(self, name) is not None:
                _positive(getattr(self, name), name, path)
        if self.qa_train_articles is not None and self.qa_train_paragraphs is not None:
            raise XlvizError("give qa_train_paragraphs or qa_train_articles, not both", path=path, field="data.qa_train_articles")
        if not isinstance(self.lowercase, bool):
            raise XlvizError(f"must be true or false, got {self.lowercase!r}", path=path, field="data.lowercase")
        if self.qa_train and not self.qa_eval:
            raise XlvizError("qa_train needs qa_eval files (L1 and/or L2 SQuAD-format files)", path=path, field="data.qa_eval")

    def check_files(self, *, path: str | None = None) -> None:
        """Every file these options name exists, is a regular file and starts as UTF-8 text
        without NUL bytes (QA files: exist), so a typo or a wrong file is one line before a run
        folder is made, not a failed run left behind (:func:`xlviz.data.real.check_text_file`)."""
        from xlviz.data.real import check_text_file

        for name in ("l1_corpus", "l2_corpus", "parallel", "parallel_train"):
            patterns = getattr(self, name)
            if not patterns:
                continue
            for f in resolve_files(patterns, name):
                check_text_file(f, f"{name} file")
        if self.qa_train:
            resolve_files([self.qa_train], "qa_train")
        for item in self.qa_eval:
            target = shared_path(item, "qa_eval")
            if not os.path.isdir(target):
                resolve_files([item], "qa_eval")

    def offers(self) -> set[str]:
        out = {"l2_corpus"} | ({"l1_corpus"} if self.l1_corpus else set())
        out |= {"parallel"} if self.parallel else set()
        out |= {"parallel_train"} if self.parallel_train else set()
        out |= {"dictionary"} if self.parallel_train and self.parallel else set()
        out |= {"qa_train"} if self.qa_train else set()
        out |= {"qa_test"} if self.qa_eval else set()
        return out


class CorpusData:
    """The files a corpus source's options name, read as streams: the run's data on a corpus
    source (:class:`xlviz.data.sources.RunData`)."""

    kind = "corpus"

    def __init__(self, options: CorpusOptions):
        self.o = options

    @property
    def l1(self) -> str:
        return self.o.l1

    @property
    def l2(self) -> str:
        return self.o.l2

    @property
    def l2s(self) -> list[str]:
        return [self.o.l2]

    @property
    def lowercase(self) -> bool:
        return bool(self.o.lowercase)

    @property
    def tokenizer_lines(self) -> int | None:
        return self.o.tokenizer_lines

    def corpus(self, lang: str) -> Callable[[], Iterator[str]]:
        """A fresh pass over ``lang``'s corpus files (``max_lines`` per pass)."""
        return self.texts(lang, self.o.max_lines)

    def sample(self, lang: str, lines: int | None) -> list[str]:
        """The first ``lines`` lines of ``lang``'s corpus."""
        return list(self.texts(lang, lines)())

    def positions(self, cfg) -> int:
        """MLM blocks, QA windows and the retrieval task's sentences."""
        return max(cfg.block_size, cfg.qa_max_length, cfg.eval_max_length)

    def parallel_train(self, l2: str, n: int) -> list[dict]:
        """The first ``n`` parallel training pairs, scored lines left out (:meth:`parallel_train_pairs`)."""
        pairs, _ = self.parallel_train_pairs()
        if not pairs:
            raise XlvizError("no parallel training pairs", path=self.parallel_train_files()[0], field="data.parallel_train")
        return [{"id": f"train-{i}", "src": a, "tgt": b} for i, (a, b) in enumerate(pairs[:n])]

    def qa(self, split: str, lang: str | None = None) -> dict:
        """A corpus source's QA files are read by the QA task (its own split of ``qa_train``), not by a method's stages."""
        raise XlvizError(f"a corpus source gives no {split} QA set to a method's stages (the qa task reads qa_train)", field="methods")

    def dictionary(self, l2: str) -> list[dict]:
        """A corpus source has no gold dictionary (the word-translation task induces one)."""
        raise XlvizError("a corpus source has no gold dictionary", field="methods")

    def corpus_files(self, lang: str) -> list[Path]:
        """The corpus files of ``lang``; a file that is also the parallel evaluation set is refused."""
        files = resolve_files(self.o.l1_corpus if lang == self.o.l1 else self.o.l2_corpus, f"{lang} corpus")
        if self.o.parallel:
            held_out = {p.resolve() for p in resolve_files(self.o.parallel, "parallel")}
            leaked = [f for f in files if f.resolve() in held_out]
            if leaked:
                raise XlvizError("the parallel evaluation file is also a training corpus file", path=leaked[0], field=f"{lang}_corpus")
        return files

    def texts(self, lang: str, max_lines: int | None) -> Callable[[], Iterator[str]]:
        """A callable returning a fresh line stream over the language's corpus files."""
        files = self.corpus_files(lang)
        return lambda: read_text_corpus(files, max_lines=max_lines)

    def parallel_files(self) -> list[Path]:
        return resolve_files(self.o.parallel, "parallel")

    def parallel_pairs(self) -> list[tuple[str, str]]:
        a, b = self.parallel_files()
        return read_parallel_lines(a, b, max_lines=self.o.parallel_max)

    def parallel_train_files(self) -> list[Path]:
        """The parallel training files; refused when one of them is a scored (evaluation) file."""
        files = resolve_files(self.o.parallel_train, "parallel_train")
        if self.o.parallel:
            held_out = {p.resolve() for p in self.parallel_files()}
            leaked = [f for f in files if f.resolve() in held_out]
            if leaked:
                raise XlvizError("the parallel evaluation file is also a parallel training file", path=leaked[0], field="parallel_train")
        return files

    def parallel_train_pairs(self) -> tuple[list[tuple[str, str]], int]:
        """(the parallel training pairs, how many were left out): a training pair whose L1 or
        L2 line (stripped, case-folded) is also a line of the scored pairs is left out, so no
        scored line is ever trained on."""
        a, b = self.parallel_train_files()
        pairs = read_parallel_lines(a, b, max_lines=self.o.dictionary_lines)
        scored = self.parallel_pairs() if self.o.parallel else []
        seen_a = {x.strip().casefold() for x, _ in scored}
        seen_b = {y.strip().casefold() for _, y in scored}
        kept = [(x, y) for x, y in pairs if x.strip().casefold() not in seen_a and y.strip().casefold() not in seen_b]
        return kept, len(pairs) - len(kept)


# Run settings sized for real text (the former transfer-corpus defaults): applied to a config on
# a corpus source where it does not give them.
CORPUS_DEFAULTS = {
    "vocab_size": 8000, "block_size": 64, "mlm_batch_size": 64, "pretrain_lr": 5e-4,
    # the pre-trainings' warm-up these runs were measured with (the world's plateau fix is 0.25)
    "pretrain_warmup_ratio": 0.06, "joint_warmup_ratio": 0.06,
    "transfer_steps": 1000, "transfer_lr": 2e-3, "finetune_steps": 300, "finetune_lr": 1e-4, "batch_size": 16,
    "qa_max_length": 256, "doc_stride": 128, "mixed_precision": "no", "eval_every": 0,
    "methods": ["monotrans", "floor"],
}

SOURCE = Source(
    name="files", kind="corpus", order=30, options_class=CorpusOptions, defaults=CORPUS_DEFAULTS,
    description="text files you name: L1/L2 corpora (.gz ok), optional parallel pair of files, optional SQuAD-format QA files",
)
