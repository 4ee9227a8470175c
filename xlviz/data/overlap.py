"""How much surface material two languages share, and how much a QA set's questions share
with their answers' sentences.

Why: real languages share subwords with English (names, numbers, loanwords), the premise of a
joint vocabulary and one suspected reason MONOTRANS transfers to real Turkish but not to the
world's invented verb-final L2s; and real SQuAD questions mostly paraphrase their answer's
sentence, while a generated question may repeat it word for word, which makes reading easier
for an English model than for one reading a translation. Both are measured here so a sweep
over the world's shared-material settings can put its ratios beside them.

- :func:`subword_overlap`: the share of subword types of one vocabulary that the other also
  has, and the share of a corpus's tokens whose type the other vocabulary has.
- :func:`qa_lexical_overlap`: per question of any SQuAD-format set, the share of its content
  words (English stop words out, Porter stems) found in the answer's sentence, or within k
  words of the answer; one row per question with its paragraph, so that an interval can
  resample paragraphs (``xlviz.evaluation.uncertainty.cluster_bootstrap``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from xlviz.errors import XlvizError

WORD = re.compile(r"\w+")
# a sentence ends at . ! or ? followed by white space (enough for SQuAD's English prose and the
# world's sentences; an abbreviation like "U.S. " ends a sentence early, in both sets alike)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# do-support, which scikit-learn's list lacks ("do" and "done" are in it): a question's "does"
# / "did" is grammar, not a word of the answer's sentence
EXTRA_STOP_WORDS = frozenset({"does", "did", "doing"})


# --------------------------------------------------------------------------- subwords
def vocabulary_types(tokenizer) -> set[str]:
    """The tokenizer's subword types without its special tokens."""
    specials = set(getattr(tokenizer, "all_special_tokens", []))
    return {t for t in tokenizer.get_vocab() if t not in specials}


def _long(piece: str) -> bool:
    """More than one character once WordPiece's continuation mark is off: single letters and
    digits are shared by any two vocabularies of one alphabet, so they are counted apart."""
    return len(piece[2:] if piece.startswith("##") else piece) > 1


def _token_counts(tokenizer, texts: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in texts:
        for t in tokenizer.tokenize(text):
            counts[t] = counts.get(t, 0) + 1
    return counts


@dataclass(frozen=True)
class SubwordOverlap:
    """Shares in [0, 1] (``nan`` where the denominator is empty). ``type_share``: of language
    b's subword types, those language a's vocabulary also has (a-b pairs: a = L1). ``token_share_b``:
    of b's corpus tokens (b's tokenizer), those whose type a's vocabulary has; ``token_share_a``
    the same the other way. ``*_long``: the same counting only pieces of two or more characters."""

    types_a: int
    types_b: int
    shared_types: int
    type_share: float
    type_share_long: float
    token_share_a: float
    token_share_b: float
    token_share_b_long: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _share(num: int, den: int) -> float:
    return num / den if den else float("nan")


def subword_overlap(tokenizer_a, tokenizer_b, texts_a: Iterable[str], texts_b: Iterable[str]) -> SubwordOverlap:
    """Shared subword types and tokens of two languages' tokenizers and corpora (see
    :class:`SubwordOverlap`). Pieces are compared as strings, continuation marks included
    ("##ing" matches "##ing" only), as a joint model's embedding rows would be shared."""
    va, vb = vocabulary_types(tokenizer_a), vocabulary_types(tokenizer_b)
    shared = va & vb
    long_b = {t for t in vb if _long(t)}
    ca, cb = _token_counts(tokenizer_a, texts_a), _token_counts(tokenizer_b, texts_b)
    in_b = sum(n for t, n in ca.items() if t in vb)
    in_a = sum(n for t, n in cb.items() if t in va)
    in_a_long = sum(n for t, n in cb.items() if t in va and _long(t))
    return SubwordOverlap(
        types_a=len(va), types_b=len(vb), shared_types=len(shared),
        type_share=_share(len(shared), len(vb)), type_share_long=_share(len(shared & long_b), len(long_b)),
        token_share_a=_share(in_b, sum(ca.values())), token_share_b=_share(in_a, sum(cb.values())),
        token_share_b_long=_share(in_a_long, sum(n for t, n in cb.items() if _long(t))),
    )


def world_subword_overlap(world, l2: str, *, vocab_size: int = 400, algorithm: str = "wordpiece",
                          documents: int | None = None) -> SubwordOverlap:
    """:func:`subword_overlap` of the world's English and ``l2``, with each vocabulary learned
    on its own corpus as a run's ``world`` stage learns it (``vocab_size`` and ``algorithm`` as
    the run's settings; ``documents``: count tokens on the first so many documents only)."""
    from xlviz.data.tokenization import train_tokenizer

    corpora = {lang: world.corpus(lang) for lang in (world.l1, l2)}
    toks = {lang: train_tokenizer(texts, vocab_size, algorithm=algorithm) for lang, texts in corpora.items()}
    return subword_overlap(toks[world.l1], toks[l2], corpora[world.l1][:documents], corpora[l2][:documents])


# --------------------------------------------------------------------------- QA overlap
def _stemmer():
    try:
        from nltk.stem import PorterStemmer
    except ImportError:  # nltk is the `real` extra
        raise XlvizError("the QA overlap needs nltk's Porter stemmer: pip install -e '.[real]'", field="nltk") from None
    return PorterStemmer()


def content_stems(text: str, stemmer=None) -> list[str]:
    """Lower-cased words of ``text`` without English stop words (scikit-learn's list and
    :data:`EXTRA_STOP_WORDS`), each Porter-stemmed ("watches" and "watch" are one word)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    stemmer = stemmer or _stemmer()
    return [stemmer.stem(w) for w in WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS and w not in EXTRA_STOP_WORDS]


def sentence_at(context: str, offset: int) -> tuple[int, int]:
    """Character span of the sentence of ``context`` that holds ``offset``."""
    start = 0
    for m in SENTENCE_END.finditer(context):
        if m.start() > offset:
            return start, m.start()
        start = m.end()
    return start, len(context)


def _window(context: str, start: int, end: int, k: int) -> tuple[int, int]:
    """Characters from k words before the answer's first word to k words after its last."""
    words = [m.span() for m in WORD.finditer(context)]
    inside = [i for i, (s, e) in enumerate(words) if e > start and s < end]
    if not inside:
        return start, end
    lo, hi = max(0, inside[0] - k), min(len(words) - 1, inside[-1] + k)
    return words[lo][0], words[hi][1]


@dataclass(frozen=True)
class QuestionOverlap:
    """One question: ``paragraph`` (its index in the set, the bootstrap's cluster), its content
    words and how many of them occur in the answer's sentence / window (``share`` = found /
    words; questions without content words are left out)."""

    id: str
    paragraph: int
    words: int
    found: int

    @property
    def share(self) -> float:
        return self.found / self.words


def qa_lexical_overlap(squad: dict, *, window: int | None = None, path: str | None = None) -> list[QuestionOverlap]:
    """Per question of a SQuAD v1.1-format set: its content stems (:func:`content_stems`) found
    among the content stems of the answer's sentence (``window`` None) or of the text from
    ``window`` words before the first answer's start to ``window`` words after its end; the
    answer's own words count (a question rarely repeats them). Distinct stems, counted once."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 0):
        raise XlvizError(f"must be a non-negative integer or None, got {window!r}", path=path, field="window")
    data = squad.get("data") if isinstance(squad, dict) else None
    if not isinstance(data, list):
        raise XlvizError("not a SQuAD-format set: no 'data' list", path=path, field="data")
    stemmer = _stemmer()
    rows: list[QuestionOverlap] = []
    p_idx = 0
    for article in data:
        for para in article.get("paragraphs", []):
            context = para.get("context")
            if not isinstance(context, str):
                raise XlvizError("a paragraph without a 'context' text", path=path, field="data.paragraphs.context")
            for qa in para.get("qas", []):
                answers = qa.get("answers") or []
                if not answers:
                    continue
                start = answers[0].get("answer_start")
                text = answers[0].get("text", "")
                if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(context):
                    raise XlvizError(f"answer_start {start!r} outside its context (question {qa.get('id')!r})", path=path,
                                     field="data.paragraphs.qas.answers.answer_start")
                lo, hi = sentence_at(context, start) if window is None else _window(context, start, start + len(text), window)
                q = set(content_stems(qa.get("question", ""), stemmer))
                if not q:
                    continue
                near = set(content_stems(context[lo:hi], stemmer))
                rows.append(QuestionOverlap(str(qa.get("id")), p_idx, len(q), len(q & near)))
            p_idx += 1
    return rows


def mean_share(rows: Sequence[QuestionOverlap]) -> float:
    """The mean over questions of their :attr:`QuestionOverlap.share`."""
    return sum(r.share for r in rows) / len(rows) if rows else float("nan")


__all__ = ["SubwordOverlap", "subword_overlap", "world_subword_overlap", "vocabulary_types", "QuestionOverlap",
           "qa_lexical_overlap", "content_stems", "sentence_at", "mean_share"]
