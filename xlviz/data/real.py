"""Readers for the real corpora in ``../shared/data`` (Tatoeba, PUD, Marvin & Linzen, Multi30k).

Why a module of its own: the generated world proves the pipeline, the real data sets show it
on language as people write it. Every reader checks the format it expects and raises
:class:`~xlviz.errors.XlvizError` naming the file and the line (or field) at fault, so a
malformed or truncated download is a one-line message, not a traceback deep in analysis code.
Corpora are streamed (``read_text_corpus`` is a generator) so memory stays bounded whatever
the size of the input.

The shared data is read-only and never copied into the repository.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from xlviz.errors import XlvizError

ENV_SHARED_DATA = "XLVIZ_SHARED_DATA"
REPO_ROOT = Path(__file__).resolve().parents[2]

# ISO 639-1 <-> the ISO 639-3 codes Tatoeba (XTREME/LASER) uses in its file names.
ISO3_TO_ISO2 = {
    "ara": "ar", "bul": "bg", "cmn": "zh", "zho": "zh", "deu": "de", "ell": "el", "eng": "en",
    "fra": "fr", "hin": "hi", "ron": "ro", "rus": "ru", "spa": "es", "swh": "sw", "swa": "sw",
    "tha": "th", "tur": "tr", "urd": "ur", "vie": "vi", "ces": "cs", "ita": "it", "por": "pt",
    "jpn": "ja", "kor": "ko", "nld": "nl", "pol": "pl", "ind": "id", "fin": "fi",
}
# Preferred 3-letter code per 2-letter code (the one Tatoeba's file names use).
ISO2_TO_ISO3 = {}
for _iso3, _iso2 in ISO3_TO_ISO2.items():
    ISO2_TO_ISO3.setdefault(_iso2, _iso3)

PUD_SUFFIX = "_pud-ud-test.conllu"
MARVIN_LINZEN_HEADER = ("category", "condition", "grammatical", "ungrammatical")


# --------------------------------------------------------------------------- locating data
def shared_data_dir() -> Path | None:
    """The shared data folder, or None when it is absent.

    Looks at ``$XLVIZ_SHARED_DATA``, then ``../shared/data`` beside the repository root and
    beside the current directory (the same places as the ``shared_data`` test fixture).
    """
    candidates: list[Path] = []
    env = os.environ.get(ENV_SHARED_DATA)
    if env:
        candidates.append(Path(env).expanduser())
    cwd = Path.cwd()
    candidates += [
        REPO_ROOT.parent / "shared" / "data",
        REPO_ROOT.parent.parent / "shared" / "data",
        cwd.parent / "shared" / "data",
        cwd / "shared" / "data",
    ]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


def _data_subdir(directory: str | os.PathLike | None, name: str) -> Path:
    """``directory`` if given, else ``<shared data>/<name>``; an XlvizError when neither exists."""
    if directory is None:
        root = shared_data_dir()
        if root is None:
            raise XlvizError(
                f"the shared data folder was not found (looked for ../shared/data); set {ENV_SHARED_DATA}",
                field=ENV_SHARED_DATA,
            )
        directory = root / name
    directory = Path(directory)
    if not directory.is_dir():
        raise XlvizError("data folder not found", path=directory)
    return directory


def file_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is not a regular file ("a folder", "a FIFO (named pipe)", "a
    character device", ...), "missing" when nothing is there, else None. Corpora are read to
    the end: a FIFO blocks the run and ``/dev/zero`` never ends, so both are named as what they
    are rather than reported as a missing file."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a link to nothing" if os.path.islink(path) else "missing"
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def _require_file(path: str | os.PathLike, what: str) -> Path:
    path = Path(path)
    kind = file_kind(path)
    if kind == "missing":
        raise XlvizError(f"{what} not found", path=path)
    if kind is not None:
        raise XlvizError(f"{what} is {kind}, not a regular file; not read", path=path)
    return path


def _open_regular(path: Path):
    """``path`` opened for reading in binary, refused unless it is a regular file: opened
    without blocking and checked on the open descriptor, so a FIFO put in its place after a
    check never blocks the reader."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise XlvizError(f"is {file_kind(path) or 'not a regular file'}, not a regular file; not read", path=path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


CHECK_BYTES = 1 << 16  # what check_text_file reads of each file before a run begins


def check_text_file(path: str | os.PathLike, what: str = "corpus file") -> None:
    """A quick look at a text input before anything is made: a regular file whose first
    ``CHECK_BYTES`` (decompressed, for ``.gz``) are UTF-8 text without NUL bytes. The reader
    checks the rest as it streams (:func:`_iter_raw_lines`)."""
    path = _require_file(path, what)
    lines = _iter_raw_lines(path)
    read = 0
    for _, line in lines:
        read += len(line) + 1
        if read >= CHECK_BYTES:
            lines.close()
            break


MAX_LINE_BYTES = 1 << 20  # longer corpus lines are read in pieces (cut at a space) of at most this


def _cut(raw: bytes) -> int:
    """Where to cut an over-long piece: after its last space, else before its last character
    (so no UTF-8 character is split; the rest starts the next piece)."""
    cut = raw.rfind(b" ") + 1
    if cut > 0:
        return cut
    cut = len(raw) - 1
    while cut > 0 and 0x80 <= raw[cut] < 0xC0:
        cut -= 1
    return cut or len(raw)


_EOL = re.compile(rb"\r\n?|\n")


def _pieces(line: bytes) -> Iterator[tuple[bytes, bool]]:
    """A complete line as pieces shorter than ``MAX_LINE_BYTES``, the last marked whole."""
    while len(line) >= MAX_LINE_BYTES:
        cut = _cut(line[:MAX_LINE_BYTES])
        yield line[:cut], False
        line = line[cut:]
    yield line, True
READ_CHUNK = 1 << 16


def _byte_lines(f) -> Iterator[tuple[bytes, bool]]:
    """The lines of binary file ``f`` without their endings, as ``(bytes, True)``.

    ``\n``, ``\r\n`` and a lone ``\r`` (old Mac files, some exports) all end a line: reading
    only ``\n`` took a CR-only file for one line. A line longer than ``MAX_LINE_BYTES`` comes
    as pieces ``(bytes, False)`` cut by :func:`_cut`, its last piece ``(bytes, True)``; memory
    stays below ``MAX_LINE_BYTES`` plus one chunk.
    """
    buf = b""
    eof = False
    while not eof:
        chunk = f.read(READ_CHUNK)
        eof = not chunk
        buf += chunk
        pos = 0
        for m in _EOL.finditer(buf):
            if m.group() == b"\r" and m.end() == len(buf) and not eof:
                break  # perhaps the first half of a \r\n cut by the chunk
            yield from _pieces(buf[pos:m.start()])
            pos = m.end()
        buf = buf[pos:]
        while len(buf) >= MAX_LINE_BYTES and not buf[:MAX_LINE_BYTES].endswith(b"\r"):
            cut = _cut(buf[:MAX_LINE_BYTES])
            yield buf[:cut], False
            buf = buf[cut:]
    if buf:
        yield from _pieces(buf)


def _iter_raw_lines(path: Path, *, split_long: bool = True) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line_without_newline)`` from a plain or gzipped UTF-8 file, any of
    ``\n``, ``\r\n`` or ``\r`` ending a line (:func:`_byte_lines`).

    Lines are decoded one at a time so a decoding error names its exact line; gzip errors
    (corrupt or truncated download) name the last good line. Memory stays bounded: a line
    longer than ``MAX_LINE_BYTES`` (a 300 MB one-line corpus) comes in pieces cut at spaces,
    or, where pieces would break an alignment (``split_long=False``), is refused.
    """
    lineno = 0
    try:
        with _open_regular(path) as raw_file, (gzip.open(raw_file, "rb") if path.name.endswith(".gz") else raw_file) as f:
            for raw, whole in _byte_lines(f):
                if not whole and not split_long:
                    raise XlvizError(f"line {lineno + 1}: longer than {MAX_LINE_BYTES} bytes", path=path)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise XlvizError(f"line {lineno + 1}: not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
                if "\x00" in line:  # binary data, not text: a NUL never belongs in a vocabulary
                    raise XlvizError(f"line {lineno + 1}: contains a NUL byte (binary data, not text)", path=path)
                if lineno == 0 and line.startswith("\ufeff"):
                    line = line[1:]
                yield lineno + 1, line
                if whole:
                    lineno += 1
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise XlvizError(f"corrupt or truncated gzip file after line {lineno}: {e or type(e).__name__}", path=path) from None


def normalize_lang(code: str, scheme: str = "iso2") -> str:
    """Map a language code between ISO 639-1 (``de``) and Tatoeba's ISO 639-3 (``deu``).

    The app picks one language and needs both PUD (``de_pud...``) and Tatoeba (``deu-eng``).
    Unknown codes are returned lower-cased and unchanged.
    """
    c = code.strip().lower()
    if scheme == "iso2":
        return ISO3_TO_ISO2.get(c, c)
    if scheme == "iso3":
        return ISO2_TO_ISO3.get(c, c)
    raise ValueError(f"scheme must be 'iso2' or 'iso3', not {scheme!r}")


# --------------------------------------------------------------------------- plain text
def read_text_corpus(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    lowercase: bool = False,
    max_lines: int | None = None,
) -> Iterator[str]:
    """Stream the non-empty, stripped lines of one or more plain or ``.gz`` text files.

    A generator: the corpus is never held in memory. Missing files are reported at once
    (before the first line), decoding and gzip errors when they are reached.
    ``max_lines`` counts lines yielded over all files together.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [_require_file(p, "corpus file") for p in paths]
    if not files:
        raise XlvizError("no corpus files given", field="paths")
    if max_lines is not None and max_lines < 0:
        raise XlvizError(f"max_lines must be >= 0, got {max_lines}", field="max_lines")
    return _stream_lines(files, lowercase, max_lines)


def _stream_lines(files: list[Path], lowercase: bool, max_lines: int | None) -> Iterator[str]:
    n = 0
    if max_lines == 0:
        return
    for path in files:
        for _, line in _iter_raw_lines(path):
            line = line.strip()
            if not line:
                continue
            yield line.lower() if lowercase else line
            n += 1
            if max_lines is not None and n >= max_lines:
                return


def _read_lines_strict(path: Path) -> list[str]:
    """All lines (stripped, empty ones kept) so that parallel files stay aligned."""
    return [line.strip() for _, line in _iter_raw_lines(path, split_long=False)]


def read_parallel_lines(
    path_a: str | os.PathLike, path_b: str | os.PathLike, max_lines: int | None = None
) -> list[tuple[str, str]]:
    """Line-aligned sentence pairs from two parallel files (plain or ``.gz``), e.g. Multi30k task1.

    The files must have the same number of lines (else an XlvizError naming both); pairs where
    either side is empty are dropped after that check.
    """
    a_path, b_path = _require_file(path_a, "parallel file"), _require_file(path_b, "parallel file")
    a, b = _read_lines_strict(a_path), _read_lines_strict(b_path)
    if len(a) != len(b):
        raise XlvizError(
            f"parallel files differ in length: {len(a)} lines here, {len(b)} lines in {b_path}",
            path=a_path,
        )
    pairs = [(x, y) for x, y in zip(a, b) if x and y]
    return pairs[:max_lines] if max_lines is not None else pairs


def multi30k_files(
    directory: str | os.PathLike | None = None, task: int = 2, split: str = "train", lang: str = "en"
) -> list[Path]:
    """The Multi30k files for a task (1: parallel, 2: independent captions), split and language.

    Task 1 has one file per split and language (``train.en.gz``); task 2 has five
    (``train.1.en.gz`` ... ``train.5.en.gz``), returned in order.
    """
    root = _data_subdir(directory, "multi30k")
    folder = root / f"task{task}" if (root / f"task{task}").is_dir() else root
    lang = normalize_lang(lang)
    pattern = f"{split}.{lang}.gz" if task == 1 else f"{split}.*.{lang}.gz"
    files = sorted(folder.glob(pattern))
    if not files:
        raise XlvizError(f"no Multi30k task {task} files matching '{pattern}'", path=folder)
    return files


# --------------------------------------------------------------------------- Tatoeba
def available_tatoeba_languages(directory: str | os.PathLike | None = None) -> list[str]:
    """The 3-letter codes ``xxx`` with both ``tatoeba.xxx-eng.xxx`` and ``tatoeba.xxx-eng.eng``."""
    folder = _data_subdir(directory, "tatoeba")
    langs = []
    for p in folder.glob("tatoeba.*-eng.eng"):
        xxx = p.name[len("tatoeba."):-len("-eng.eng")]
        if (folder / f"tatoeba.{xxx}-eng.{xxx}").is_file():
            langs.append(xxx)
    return sorted(langs)


def read_tatoeba(directory: str | os.PathLike | None, lang: str) -> list[tuple[str, str]]:
    """Tatoeba sentence pairs ``(xx_sentence, eng_sentence)``; line i of one translates line i of the other.

    ``lang`` may be the 3-letter file code (``deu``) or ISO 639-1 (``de``). The two files must
    have the same number of lines.
    """
    folder = _data_subdir(directory, "tatoeba")
    xxx = normalize_lang(lang, "iso3")
    xx_path, en_path = folder / f"tatoeba.{xxx}-eng.{xxx}", folder / f"tatoeba.{xxx}-eng.eng"
    if not xx_path.is_file() or not en_path.is_file():
        available = ", ".join(available_tatoeba_languages(folder)) or "none"
        missing = xx_path if not xx_path.is_file() else en_path
        raise XlvizError(f"no Tatoeba data for language '{lang}' (available: {available})", path=missing)
    xx, en = _read_lines_strict(xx_path), _read_lines_strict(en_path)
    if len(xx) != len(en):
        raise XlvizError(
            f"Tatoeba files differ in length: {len(xx)} lines here, {len(en)} lines in {en_path}",
            path=xx_path,
        )
    for i, (a, b) in enumerate(zip(xx, en), start=1):
        if not a or not b:
            raise XlvizError(f"line {i}: empty sentence breaks the pairing", path=xx_path if not a else en_path)
    return list(zip(xx, en))


# --------------------------------------------------------------------------- CoNLL-U
@dataclass
class Token:
    """One syntactic word of a CoNLL-U sentence (multiword ranges and empty nodes excluded)."""

    id: int
    form: str
    lemma: str
    upos: str
    feats: dict[str, str] = field(default_factory=dict)
    xpos: str = "_"
    head: int | None = None
    deprel: str = "_"
    misc: dict[str, str] = field(default_factory=dict)

    @property
    def number(self) -> str | None:
        """``Sing``/``Plur``/... from FEATS, the agreement feature the probes use."""
        return self.feats.get("Number")


@dataclass
class MultiwordToken:
    """A surface token spanning several words, e.g. German ``zum`` = ``zu dem`` (ids start..end)."""

    start: int
    end: int
    form: str
    misc: dict[str, str] = field(default_factory=dict)


@dataclass
class Sentence:
    sent_id: str
    text: str
    tokens: list[Token]
    multiword: list[MultiwordToken] = field(default_factory=list)
    line: int = 0  # line of the file where the sentence starts, for messages

    @property
    def forms(self) -> list[str]:
        return [t.form for t in self.tokens]

    def surface_tokens(self) -> list[tuple[str, list[int]]]:
        """Surface tokens as written, each with the 0-based indices of the words it covers.

        ``zum`` in German gives ``("zum", [i, i + 1])`` for the words ``zu dem``; every other
        token covers one word. Tokenizing surface forms and mapping back keeps subword-to-word
        alignments right for languages with contractions.
        """
        ranges = {m.start: m for m in self.multiword}
        out: list[tuple[str, list[int]]] = []
        i = 0
        while i < len(self.tokens):
            m = ranges.get(self.tokens[i].id)
            if m is not None:
                span = [j for j in range(i, min(i + m.end - m.start + 1, len(self.tokens)))]
                out.append((m.form, span))
                i += len(span)
            else:
                out.append((self.tokens[i].form, [i]))
                i += 1
        return out


_INT_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE_ID = re.compile(r"^([1-9][0-9]*)-([1-9][0-9]*)$")
_EMPTY_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")


def _parse_feats(value: str, path: Path, lineno: int, column: str) -> dict[str, str]:
    if value == "_" or value == "":
        return {}
    feats = {}
    for item in value.split("|"):
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise XlvizError(f"line {lineno}: malformed {column} item '{item}' (expected Key=Value)", path=path, field=column)
        feats[key] = val
    return feats


def _parse_misc(value: str) -> dict[str, str]:
    """MISC is free-form; read ``Key=Value`` items (``SpaceAfter=No``) and keep bare items as keys."""
    if value in ("_", ""):
        return {}
    return dict((k, v) for k, _, v in (item.partition("=") for item in value.split("|")))


def _surface_text(tokens: list[Token], multiword: list[MultiwordToken]) -> str:
    """Rebuild a sentence's text from forms and ``SpaceAfter=No`` when ``# text`` is missing."""
    ranges = {m.start: m for m in multiword}
    parts: list[str] = []
    i = 0
    by_id = {t.id: t for t in tokens}
    while i < len(tokens):
        t = tokens[i]
        if t.id in ranges:
            m = ranges[t.id]
            no_space = m.misc.get("SpaceAfter") == "No" or by_id.get(m.end, t).misc.get("SpaceAfter") == "No"
            parts.append(m.form + ("" if no_space else " "))
            i += m.end - m.start + 1
            continue
        parts.append(t.form + ("" if t.misc.get("SpaceAfter") == "No" else " "))
        i += 1
    return "".join(parts).strip()


def iter_conllu(path: str | os.PathLike) -> Iterator[Sentence]:
    """Stream the sentences of a CoNLL-U file, checking each line's shape.

    Multiword-token lines (``1-2``) are kept aside in ``Sentence.multiword``; empty nodes
    (``1.1``, enhanced dependencies) are skipped; word ids must run 1, 2, 3, ... in each sentence.
    """
    path = _require_file(path, "CoNLL-U file")
    comments: dict[str, str] = {}
    tokens: list[Token] = []
    multiword: list[MultiwordToken] = []
    start = 0
    n_sent = 0

    def finish() -> Sentence:
        nonlocal n_sent
        n_sent += 1
        sent_id = comments.get("sent_id") or f"{path.stem}-{n_sent}"
        text = comments.get("text")
        if text is None:
            text = _surface_text(tokens, multiword)
        for t in tokens:
            if t.head is not None and t.head > len(tokens):
                raise XlvizError(f"line {start}: sentence '{sent_id}' has HEAD {t.head} beyond its {len(tokens)} words", path=path)
        return Sentence(sent_id, text, list(tokens), list(multiword), start)

    for lineno, line in _iter_raw_lines(path):
        if not line.strip():
            if tokens:
                yield finish()
            elif multiword:
                raise XlvizError(f"line {lineno}: sentence has multiword tokens but no words", path=path)
            comments, tokens, multiword, start = {}, [], [], 0
            continue
        if not start:
            start = lineno
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                comments.setdefault(key.strip(), value.strip())
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise XlvizError(
                f"line {lineno}: expected 10 tab-separated columns, got {len(cols)}: {line[:60]!r}", path=path
            )
        tid = cols[0]
        if _EMPTY_ID.match(tid):
            continue
        m = _RANGE_ID.match(tid)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if b < a or a != len(tokens) + 1:
                raise XlvizError(f"line {lineno}: bad multiword range '{tid}' after word {len(tokens)}", path=path, field="ID")
            multiword.append(MultiwordToken(a, b, cols[1], _parse_misc(cols[9])))
            continue
        if not _INT_ID.match(tid):
            raise XlvizError(f"line {lineno}: bad word ID '{tid}' (expected 1, 2, ..., a range 1-2 or an empty node 1.1)", path=path, field="ID")
        if int(tid) != len(tokens) + 1:
            raise XlvizError(f"line {lineno}: word ID {tid} out of order (expected {len(tokens) + 1})", path=path, field="ID")
        head_s = cols[6]
        if head_s == "_":
            head = None
        elif head_s.isdigit():
            head = int(head_s)
        else:
            raise XlvizError(f"line {lineno}: HEAD must be a number or '_', got '{head_s}'", path=path, field="HEAD")
        tokens.append(
            Token(
                id=int(tid),
                form=cols[1],
                lemma=cols[2],
                upos=cols[3],
                feats=_parse_feats(cols[5], path, lineno, "FEATS"),
                xpos=cols[4],
                head=head,
                deprel=cols[7],
                misc=_parse_misc(cols[9]),
            )
        )
    if tokens:
        yield finish()


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """All sentences of a CoNLL-U file (see :func:`iter_conllu`); sent_ids must be unique."""
    sentences = list(iter_conllu(path))
    seen: dict[str, int] = {}
    for s in sentences:
        if s.sent_id in seen:
            raise XlvizError(f"line {s.line}: duplicate sent_id '{s.sent_id}' (first at line {seen[s.sent_id]})", path=path)
        seen[s.sent_id] = s.line
    return sentences


def available_pud_languages(directory: str | os.PathLike | None = None) -> list[str]:
    """ISO 639-1 codes with a ``<code>_pud-ud-test.conllu`` file, sorted."""
    folder = _data_subdir(directory, "pud")
    return sorted(p.name[: -len(PUD_SUFFIX)] for p in folder.glob(f"*{PUD_SUFFIX}"))


def pud_path(directory: str | os.PathLike | None, lang: str) -> Path:
    """The PUD file for ``lang`` (``de``, ``deu`` or ``de_pud``), or an XlvizError listing what exists."""
    folder = _data_subdir(directory, "pud")
    code = normalize_lang(lang.lower().removesuffix("_pud"))
    path = folder / f"{code}{PUD_SUFFIX}"
    if not path.is_file():
        available = ", ".join(available_pud_languages(folder)) or "none"
        raise XlvizError(f"no PUD treebank for language '{lang}' (available: {available})", path=path)
    return path


def read_pud_pairs(
    directory: str | os.PathLike | None, lang_a: str, lang_b: str, limit: int | None = None
) -> list[tuple[str, Sentence, Sentence]]:
    """Parallel PUD sentences ``(sent_id, sentence_a, sentence_b)``, aligned by ``# sent_id``.

    Sentences present in only one language are left out; order follows ``lang_a``'s file.
    """
    a = read_conllu(pud_path(directory, lang_a))
    b = {s.sent_id: s for s in read_conllu(pud_path(directory, lang_b))}
    pairs = [(s.sent_id, s, b[s.sent_id]) for s in a if s.sent_id in b]
    return pairs[:limit] if limit is not None else pairs


# --------------------------------------------------------------------------- Marvin & Linzen
def iter_marvin_linzen(path: str | os.PathLike | None = None) -> Iterator[dict[str, str]]:
    """Stream the rows of the Marvin & Linzen TSV (plain or ``.gz``), checking header and columns."""
    if path is None:
        path = _data_subdir(None, "syneval") / "marvin_linzen.tsv.gz"
    path = _require_file(path, "Marvin & Linzen TSV")
    return _iter_marvin_linzen(path)


def _iter_marvin_linzen(path: Path) -> Iterator[dict[str, str]]:
    lines = _iter_raw_lines(path)
    first = next(lines, None)
    if first is None:
        raise XlvizError("empty file; expected a header line", path=path)
    header = tuple(c.strip() for c in first[1].split("\t"))
    if header != MARVIN_LINZEN_HEADER:
        raise XlvizError(
            f"line 1: header must be {' TAB '.join(MARVIN_LINZEN_HEADER)}, got {first[1][:80]!r}", path=path
        )
    for lineno, line in lines:
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 4:
            raise XlvizError(f"line {lineno}: expected 4 tab-separated columns, got {len(cols)}", path=path)
        for name, value in zip(MARVIN_LINZEN_HEADER, cols):
            if not value.strip():
                raise XlvizError(f"line {lineno}: empty '{name}'", path=path, field=name)
        yield {
            "category": sys.intern(cols[0].strip()),
            "condition": sys.intern(cols[1].strip()),
            "grammatical": cols[2].strip(),
            "ungrammatical": cols[3].strip(),
        }


def read_marvin_linzen(
    path: str | os.PathLike | None = None,
    categories: Iterable[str] | None = None,
    max_per_category: int | None = None,
) -> list[dict[str, str]]:
    """Minimal pairs ``{"category", "condition", "grammatical", "ungrammatical"}``.

    ``categories`` keeps only those categories; ``max_per_category`` keeps the first N rows of
    each (the full file is 147k rows; a probe rarely needs all of them).
    """
    keep = set(categories) if categories is not None else None
    counts: dict[str, int] = {}
    rows = []
    for row in iter_marvin_linzen(path):
        cat = row["category"]
        if keep is not None and cat not in keep:
            continue
        if max_per_category is not None:
            if counts.get(cat, 0) >= max_per_category:
                continue
            counts[cat] = counts.get(cat, 0) + 1
        rows.append(row)
    return rows
