"""A bilingual dictionary induced from parallel training lines (for word translation on real text).

Word alignment models learn, from sentence pairs alone, which words translate which: IBM Model 1
(Brown et al., 1993) estimates lexical translation probabilities ``t(b | a)`` by EM over all
word pairings of each sentence pair. We train it in both directions (``nltk.translate.IBMModel1``,
deterministic: uniform start, fixed number of iterations, no sampling) and keep the confident
one-to-one pairs:

- both words occur in at least ``min_count`` training pairs (the frequency floor),
- each is the other's most probable translation (the intersection of the two directions,
  which makes the dictionary one-to-one), and
- both probabilities ``t(b | a)`` and ``t(a | b)`` are at least ``threshold``.

Words are runs of letters (:func:`words`; digits, punctuation and the NULL word left out),
lowercased by default. :func:`split_dictionary` splits the pairs into a train and a held-out
test part, disjoint by source word, with a seeded shuffle. Same lines, same settings: the same
pairs in the same order, with the same scores (rounded to 6 digits), whatever the hash seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from xlviz.errors import XlvizError

WORD = re.compile(r"[^\W\d_]+")


def words(line: str, lowercase: bool = True) -> list[str]:
    """The words of a line: maximal runs of letters (any script), lowercased by default."""
    return WORD.findall(line.lower() if lowercase else line)


@dataclass
class Dictionary:
    """Induced pairs ``(a_word, b_word, t(b|a), t(a|b), pairs both occur in)`` and how they were built."""

    entries: list[tuple[str, str, float, float, int]]
    settings: dict = field(default_factory=dict)

    def pairs(self) -> list[tuple[str, str]]:
        return [(a, b) for a, b, *_ in self.entries]

    def __len__(self) -> int:
        return len(self.entries)


def _ibm1(bitext: Sequence[tuple[list[str], list[str]]], iterations: int) -> dict:
    """``t[b][a]`` = P(b | a) of IBM Model 1 trained on (a words, b words) pairs (nltk)."""
    try:
        from nltk.translate import AlignedSent, IBMModel1
    except ImportError:  # pragma: no cover - nltk is a dependency of the real-text extra
        raise XlvizError("inducing a dictionary needs nltk (pip install -e '.[real]')", field="parallel_train") from None
    # AlignedSent(words, mots): ``words`` are the target side, ``mots`` the source side
    model = IBMModel1([AlignedSent(b, a) for a, b in bitext], iterations)
    return model.translation_table


def induce_dictionary(pairs: Iterable[tuple[str, str]], *, min_count: int = 5, threshold: float = 0.3,
                      iterations: int = 5, lowercase: bool = True) -> Dictionary:
    """Confident one-to-one word pairs from line-aligned (L1 line, L2 line) pairs (see the module)."""
    bitext = [(words(a, lowercase), words(b, lowercase)) for a, b in pairs]
    bitext = [(a, b) for a, b in bitext if a and b]
    if not bitext:
        raise XlvizError("no parallel training pair has words on both sides", field="parallel_train")
    count_a = Counter(w for a, _ in bitext for w in set(a))
    count_b = Counter(w for _, b in bitext for w in set(b))
    joint = Counter((x, y) for a, b in bitext for x in set(a) for y in set(b)
                    if count_a[x] >= min_count and count_b[y] >= min_count)
    t_ba = _ibm1(bitext, iterations)  # t_ba[b][a] = P(b | a)
    t_ab = _ibm1([(b, a) for a, b in bitext], iterations)  # t_ab[a][b] = P(a | b)

    def best(table: dict, given: str, candidates: Iterable[str]) -> tuple[str | None, float]:
        """The most probable word among ``candidates`` given ``given`` (ties: alphabetical)."""
        scored = [(table.get(c, {}).get(given, 0.0), c) for c in candidates]
        scored = [(p, c) for p, c in scored if p > 0]
        if not scored:
            return None, 0.0
        p, c = min(scored, key=lambda pc: (-round(pc[0], 12), pc[1]))
        return c, p

    # candidate translations: the words each word co-occurs with (IBM1 gives others zero mass)
    partners_a: dict[str, set[str]] = {}
    partners_b: dict[str, set[str]] = {}
    for (x, y) in joint:
        partners_a.setdefault(x, set()).add(y)
        partners_b.setdefault(y, set()).add(x)
    best_b = {x: best(t_ba, x, sorted(ys)) for x, ys in partners_a.items()}
    best_a = {y: best(t_ab, y, sorted(xs)) for y, xs in partners_b.items()}
    entries = []
    for x in sorted(best_b):
        y, p_ba = best_b[x]
        if y is None or best_a.get(y, (None, 0.0))[0] != x:
            continue
        p_ab = best_a[y][1]
        if p_ba >= threshold and p_ab >= threshold:
            entries.append((x, y, round(p_ba, 6), round(p_ab, 6), joint[(x, y)]))
    settings = {"method": "IBM Model 1 both directions (nltk.translate.IBMModel1), mutual best translations",
                "iterations": iterations, "min_count": min_count, "threshold": threshold, "lowercase": lowercase,
                "training_pairs": len(bitext)}
    return Dictionary(entries, settings)


def split_dictionary(entries: Sequence, test_fraction: float = 0.5, seed: int | str = 0) -> tuple[list, list]:
    """(train, test) parts of dictionary entries (tuples starting ``(a_word, b_word, ...)``),
    disjoint by source word: the source words are shuffled with ``seed`` and the first
    ``round(test_fraction * n)`` of them go to the test part. Each part keeps the input order."""
    if not 0 < test_fraction < 1:
        raise XlvizError(f"test_fraction must be between 0 and 1, got {test_fraction!r}", field="dictionary_test_fraction")
    sources = sorted({e[0] for e in entries})
    random.Random(seed).shuffle(sources)
    test_words = set(sources[: round(test_fraction * len(sources))])
    return [e for e in entries if e[0] not in test_words], [e for e in entries if e[0] in test_words]


# The share of the gold dictionary's L1 words held out (the default of the run option
# ``gold_dictionary_test_fraction``, declared with WECHSEL's options).
GOLD_TEST_FRACTION = 0.2


def gold_split(world, l2: str, test_fraction: float, seed: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training, held-out) (L1 word, L2 word) pairs of the generated world's gold dictionary
    for ``l2``, disjoint by L1 word (:func:`split_dictionary`, seeded by the run's ``seed`` and
    the language). A method fitted on a dictionary reads the training part only; every
    system's word-translation score reads the held-out part only, so no score is measured on
    pairs a system was fitted on and every system is scored on the same words."""
    pairs = sorted({(r[world.l1], r[l2]) for r in world.dictionary(l2)})
    return split_dictionary(pairs, test_fraction, seed=f"gold-dictionary-{seed}-{l2}")


__all__ = ["WORD", "words", "Dictionary", "induce_dictionary", "split_dictionary", "gold_split", "GOLD_TEST_FRACTION"]
