"""Can a model's tokenizer read this text? And is a result no better than chance?

Why: a run's model reads its own world's invented languages. Given another run's (or another
language's) text, its subword tokenizer does not fail: it splits every unknown word into single
characters (no ``[UNK]`` at all) or, with whole-word vocabularies, into ``[UNK]``s. Every number
computed on such text (attention maps, retrieval, QA answers) looks like a result and is not.
One check, used by every page that lets a model meet text it was not trained with, so the pages
say the same thing in the same words.

Three measures, over the pieces the tokenizer makes of the texts (special tokens not added):

- ``single``: share of word pieces (letters or digits) that are one character long. A run's own
  tokenizer on its own world: 0.0; on another world's text of the same script: 0.6 (a demo
  run's ``sov`` tokenizer on another seed's ``sov`` pairs). Real text through a real
  tokenizer: a few percent ("a", digits).
- ``unk``: share of pieces that are the unknown token.
- ``overlap``: share of the texts' words (runs of letters or digits, lower-cased) that the
  vocabulary holds whole (``word``, ``▁word`` or ``Ġword``): 0.87 on a run's own world, 0.24
  on another world. Reported, and decisive only when very low, since a multilingual
  vocabulary splits many real words of an agglutinative language into pieces.

All arithmetic on the tokenizer's output: unit-tested on tiny tokenizers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

SINGLE_MAX = 0.30    # more single-character word pieces than this: the text is spelled out, not read
UNK_MAX = 0.05       # more [UNK] pieces than this: the vocabulary does not cover the text
OVERLAP_MIN = 0.20   # fewer whole words in the vocabulary than this: another vocabulary altogether
MAX_TEXTS = 200      # texts looked at (the check must cost nothing beside the result it guards)
CHANCE_ALPHA = 0.05  # a retrieval accuracy whose one-sided binomial p-value against 1/n exceeds this is "at chance"

_WORD = re.compile(r"\w+", re.UNICODE)
_MARKS = ("##", "▁", "Ġ", "Ċ")


@dataclass(frozen=True)
class Readability:
    """Whether a tokenizer reads a text, the three shares it was judged on, and one line for a page."""

    ok: bool
    line: str
    single: float = 0.0
    unk: float = 0.0
    overlap: float = 1.0
    pieces: int = 0


def _core(piece: str) -> str:
    for mark in _MARKS:
        if piece.startswith(mark):
            piece = piece[len(mark):]
    return piece


def shares(tokenizer, texts: Sequence[str]) -> tuple[float, float, float, int]:
    """(single-character share, [UNK] share, vocabulary overlap, pieces) of ``texts``."""
    texts = [t for t in list(dict.fromkeys(texts))[:MAX_TEXTS] if isinstance(t, str) and t.strip()]
    if not texts:
        return 0.0, 0.0, 1.0, 0
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    unk_id = getattr(tokenizer, "unk_token_id", None)
    flat = [i for enc in ids for i in enc]
    pieces = tokenizer.convert_ids_to_tokens(flat)
    word_pieces = [c for c in (_core(p) for p in pieces) if c and (c.isalnum() or _WORD.fullmatch(c))]
    single = sum(len(c) == 1 for c in word_pieces) / len(word_pieces) if word_pieces else 0.0
    unk = sum(i == unk_id for i in flat) / len(flat) if flat and unk_id is not None else 0.0
    vocab = tokenizer.get_vocab()
    lower = bool(getattr(tokenizer, "do_lower_case", False)) or bool(getattr(tokenizer, "init_kwargs", {}).get("do_lower_case"))
    words = [w for t in texts for w in _WORD.findall(t.lower() if lower else t)]
    held = sum(any(m + w in vocab for m in ("", "▁", "Ġ")) or (w.lower() in vocab) for w in words)
    overlap = held / len(words) if words else 1.0
    return single, unk, overlap, len(flat)


def judge(single: float, unk: float, overlap: float, pieces: int, who: str = "the model's tokenizer") -> Readability:
    """The verdict and its line from the three shares (pure arithmetic, for the tests)."""
    numbers = (f"{single:.0%} single-character pieces, {unk:.0%} [UNK], "
               f"{overlap:.0%} of words in its vocabulary")
    if pieces == 0:
        return Readability(True, "No text to check.", single, unk, overlap, pieces)
    problems = []
    if single > SINGLE_MAX:
        problems.append("it spells the words out letter by letter")
    if unk > UNK_MAX:
        problems.append("it reads many pieces as [UNK]")
    if overlap < OVERLAP_MIN:
        problems.append("few of the words are in its vocabulary")
    if problems:
        return Readability(False, f"Not readable by {who}: {' and '.join(problems)} ({numbers}); "
                                  "numbers on this text are not meaningful.", single, unk, overlap, pieces)
    return Readability(True, f"Readable by {who} ({numbers}).", single, unk, overlap, pieces)


def readability(tokenizer, texts: Iterable[str], who: str = "the model's tokenizer") -> Readability:
    """Whether ``tokenizer`` reads ``texts`` as words of its vocabulary (see the module's doc)."""
    return judge(*shares(tokenizer, list(texts)), who=who)


def chance_p_value(correct: int, n: int) -> float:
    """One-sided binomial p-value of ``correct`` hits out of ``n`` when each hit has chance 1/n
    (retrieval among ``n`` candidates by a model that knows nothing)."""
    if n <= 0:
        return 1.0
    from scipy.stats import binom

    return float(binom.sf(correct - 1, n, 1.0 / n))


def at_chance(accuracy: float, n: int, alpha: float = CHANCE_ALPHA) -> bool:
    """Whether a retrieval accuracy (a fraction, over ``n`` queries with ``n`` candidates) is
    no better than picking at random: 1/n expected, binomial test at ``alpha``."""
    if n <= 1 or accuracy is None or (isinstance(accuracy, float) and math.isnan(accuracy)):
        return False
    return chance_p_value(int(round(accuracy * n)), n) > alpha


def chance_line(name: str, best: float, n: int) -> str:
    """The label beside a retrieval result at chance (``best``: its best layer, a fraction)."""
    return (f"{name}: retrieval at chance — best layer {best:.1%} against {1 / n:.1%} (1 in {n}) for a random pick; "
            "the model does not tell these translations apart.")
