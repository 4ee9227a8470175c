"""Sentence structures of the generated world and how each language renders them.

A clause is a small tree (subject, verb, object, optional location). Every rendered word
carries a *slot* naming the tree position it comes from, so translations come with a gold
word alignment for free and QA answers (whole constituents) stay contiguous in every word
order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from xlviz.data.lexicon import DATE_PREPOSITION, HYPERNYMS, NAMES, L2Lexicon, english_3sg, english_plural, noun_class, surface_lemma
from xlviz.data.typology import PRESETS, Grammar, grammar_of

ORDERS = tuple(PRESETS)  # the named grammars (xlviz.data.typology); any feature set is allowed too
# Marked English orders real English has besides subject-verb-object (world setting
# ``l1_variety``): "it is the letter that paul reads ." (an object cleft, O S V),
# "the letter, paul reads ." (a topicalised object, O S V) and "near the lake, paul reads the
# letter ." (a fronted location, before subject and verb).
L1_VARIANTS = ("object-cleft", "topicalised-object", "fronted-location")


@dataclass(frozen=True)
class NP:
    head: str
    number: str = "sg"
    det: str | None = "the"
    adjs: tuple[str, ...] = ()
    mod: "PP | None" = None  # NP-internal modifier: "the dog near the cats"
    # A cardinal numeral ("3 red apples"), written in digits in every language (world setting
    # ``numeral_share``). Left out of the repr, which seeds English's marked orders
    # (Language.variant), so that worlds without numerals keep every byte.
    count: int | None = field(default=None, repr=False)

    @property
    def is_name(self) -> bool:
        return self.head in NAMES

    @property
    def wh(self) -> str:
        return "who" if self.is_name or noun_class(self.head) == "person" else "what"


@dataclass(frozen=True)
class PP:
    prep: str
    np: NP


@dataclass(frozen=True)
class Clause:
    subj: NP
    verb: str
    obj: NP
    loc: PP | None = None
    # A date adverbial ("on 1999-05-12"), the date written the same in every language (world
    # setting ``date_share``); out of the repr for the reason NP.count is.
    when: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Question:
    clause: Clause
    target: str  # "subj" | "obj" | "loc"
    # Worded unlike its statement (world setting ``qa_paraphrase``): every noun phrase it does
    # not ask about names its head by its class ("the big animal", "a place"), without its
    # modifier, as real questions paraphrase their answer's sentence.
    paraphrase: bool = field(default=False, repr=False)


Word = tuple[str, str]  # (surface form, slot)


@dataclass(frozen=True)
class Language:
    """How one language renders clauses: English words, or an invented lexicon in an order."""

    code: str
    order: "str | Grammar" = "svo"  # a preset name or a Grammar (xlviz.data.typology)
    lexicon: L2Lexicon | None = None  # None = English
    variety: float = 0.0  # English only: the share of statements in one of L1_VARIANTS
    variety_seed: int = 0

    def variant(self, c: Clause) -> str | None:
        """The marked order this statement takes, if any: a fixed function of the clause and the
        seed (so a clause reads the same in the corpus, the QA sets and the parallel pairs, and in
        every process)."""
        if not self.is_english or self.variety <= 0:
            return None
        h = hashlib.blake2b(f"{self.variety_seed}|{c!r}".encode(), digest_size=8).digest()
        if int.from_bytes(h[:4], "big") / 2**32 >= self.variety:
            return None
        options = L1_VARIANTS if c.loc else L1_VARIANTS[:2]
        return options[int.from_bytes(h[4:], "big") % len(options)]

    @property
    def is_english(self) -> bool:
        return self.lexicon is None

    @cached_property
    def grammar(self) -> Grammar:
        return grammar_of(self.order)

    # --- words ---------------------------------------------------------------
    def noun(self, np: NP) -> str:
        if self.is_english:
            w = surface_lemma(np.head)
            return english_plural(w) if np.number == "pl" and not np.is_name else w
        if np.is_name:
            return self.lexicon.word(np.head)
        return self.lexicon.noun(np.head, np.number)

    def verb(self, lemma: str, number: str | None) -> str:
        """number None is English's base form (after do-support), which L2s mirror with the plural."""
        if self.is_english:
            return english_3sg(lemma) if number == "sg" else lemma
        return self.lexicon.verb(lemma, number or "pl")

    def fn(self, lemma: str) -> str:
        return lemma if self.is_english else self.lexicon.word(lemma)

    # --- phrases -------------------------------------------------------------
    def render_np(self, np: NP, slot: str) -> list[Word]:
        g = self.grammar
        adjs = [(self.fn(a), f"{slot}/adj{i}") for i, a in enumerate(np.adjs)]
        head = (self.noun(np), f"{slot}/head")
        core = adjs + [head] if g.adjective == "before" else [head] + adjs
        if np.count is not None:  # numeral before the noun phrase in every grammar (WALS 89A's majority)
            core = [(str(np.count), f"{slot}/num")] + core
        det: list[Word] = []
        if np.det and g.determiner != "none":
            word = self.fn(np.det)
            if self.is_english and word == "a" and core[0][0][0] in "aeiou":
                word = "an"
            det = [(word, f"{slot}/det")]
        mod = self.render_pp(np.mod, f"{slot}/mod") if np.mod is not None else []
        if g.modifier == "before":  # "the near-the-cats dog" / "cats-near dog"
            return det + mod + core if g.determiner == "before" else mod + core + det
        # an article after the noun attaches to the noun's phrase, before its modifier
        return (det + core if g.determiner == "before" else core + det) + mod

    def render_pp(self, pp: PP, slot: str) -> list[Word]:
        prep = (self.fn(pp.prep), f"{slot}/prep")
        inner = self.render_np(pp.np, f"{slot}/np")
        return inner + [prep] if self.grammar.adposition == "post" else [prep] + inner

    def render_time(self, when: str | None) -> list[Word]:
        """A date adverbial: the language's "on" as a pre- or postposition, the date as is."""
        if when is None:
            return []
        prep, date = (self.fn(DATE_PREPOSITION), "time/prep"), (when, "time/date")
        return [date, prep] if self.grammar.adposition == "post" else [prep, date]

    # --- clauses ---------------------------------------------------------------
    def _clause_order(self, subj: list[Word], verb: list[Word], obj: list[Word], loc: list[Word],
                      time: list[Word] = ()) -> list[Word]:
        """The constituents in the grammar's word order (a location goes before the object in a
        verb-final clause, after it otherwise; a date right after the subject in a verb-final
        clause, last otherwise)."""
        order, time = self.grammar.word_order, list(time)
        if order == "sov":
            return subj + time + loc + obj + verb
        if order == "vso":
            return verb + subj + obj + loc + time
        return subj + verb + obj + loc + time

    def render_statement(self, c: Clause, verb_number: str | None = None) -> list[Word]:
        number = verb_number or c.subj.number
        subj = self.render_np(c.subj, "subj")
        verb = [(self.verb(c.verb, number), "verb")]
        obj = self.render_np(c.obj, "obj")
        loc = self.render_pp(c.loc, "loc") if c.loc else []
        time = self.render_time(c.when)
        variant = self.variant(c)
        if variant == "object-cleft":
            words = [("it", "cleft"), ("is", "cleft")] + obj + [("that", "cleft")] + subj + verb + loc + time
        elif variant == "topicalised-object":
            words = obj + [(",", "punct")] + subj + verb + loc + time
        elif variant == "fronted-location":
            words = loc + [(",", "punct")] + subj + verb + obj + time
        else:
            words = self._clause_order(subj, verb, obj, loc, time)
        return words + [(".", "punct")]

    def render_question(self, q: Question) -> list[Word]:
        c = paraphrased(q) if q.paraphrase else q.clause
        g = self.grammar
        wh_lemma = {"subj": c.subj.wh, "obj": c.obj.wh, "loc": "where"}[q.target]
        wh = [(self.fn(wh_lemma), "wh")]
        parts = {"subj": self.render_np(c.subj, "subj"), "obj": self.render_np(c.obj, "obj"),
                 "loc": self.render_pp(c.loc, "loc") if c.loc else []}
        time = self.render_time(c.when)
        if g.word_order == "svo" and g.question == "fronted":
            # English order with do-support; an svo L2 mirrors it word by word
            subj, obj, loc = parts["subj"], parts["obj"], parts["loc"]
            aux = [(self.fn("does" if c.subj.number == "sg" else "do"), "aux")]
            if q.target == "subj":
                words = wh + [(self.verb(c.verb, "sg"), "verb")] + obj + loc + time
            elif q.target == "obj":
                words = wh + aux + subj + [(self.verb(c.verb, None), "verb")] + loc + time
            else:
                words = wh + aux + subj + [(self.verb(c.verb, None), "verb")] + obj + time
        else:  # no auxiliary, the verb agrees; the wh word in the asked phrase's place, or first
            verb = [(self.verb(c.verb, "sg" if q.target == "subj" else c.subj.number), "verb")]
            if g.question == "in-situ":
                parts[q.target] = wh
                words = self._clause_order(parts["subj"], verb, parts["obj"], parts["loc"], time)
            else:
                parts[q.target] = []
                words = wh + self._clause_order(parts["subj"], verb, parts["obj"], parts["loc"], time)
        return words + [("?", "punct")]


def _general(np: NP) -> NP:
    """The noun phrase named by its class noun ("the big dog" -> "the big animal"); a name
    stays a name."""
    if np.is_name:
        return np
    return NP(HYPERNYMS[noun_class(np.head)], np.number, np.det, np.adjs, None, count=np.count)


def paraphrased(q: Question) -> Clause:
    """The clause a paraphrased question renders: the asked phrase as it is (its wh word comes
    from it), the others by their class nouns; the verb stays, so the question still picks
    one fact of its paragraph (no two facts of a paragraph share a verb)."""
    c = q.clause
    subj = c.subj if q.target == "subj" else _general(c.subj)
    obj = c.obj if q.target == "obj" else _general(c.obj)
    loc = c.loc if q.target == "loc" or c.loc is None else PP(c.loc.prep, _general(c.loc.np))
    return Clause(subj, c.verb, obj, loc, when=c.when)


def join_words(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """Join words with spaces, attaching sentence punctuation; return text and char spans."""
    text = ""
    spans = []
    for w in words:
        if text and w not in (".", "?", ","):
            text += " "
        spans.append((len(text), len(text) + len(w)))
        text += w
    return text, spans


def constituent_span(words: list[Word], spans: list[tuple[int, int]], role: str) -> tuple[int, int]:
    """Char span of the contiguous constituent whose slots start with ``role``."""
    idx = [i for i, (_, slot) in enumerate(words) if slot == role or slot.startswith(role + "/")]
    if not idx:
        raise ValueError(f"no constituent {role!r} in {words}")
    if idx != list(range(idx[0], idx[-1] + 1)):
        raise AssertionError(f"constituent {role!r} is not contiguous in {words}")
    return spans[idx[0]][0], spans[idx[-1]][1]


def word_alignment(a: list[Word], b: list[Word]) -> list[tuple[int, int]]:
    """Gold alignment: words of the two renderings that come from the same slot."""
    where_b = {slot: j for j, (_, slot) in enumerate(b) if slot != "punct"}
    return [(i, where_b[slot]) for i, (_, slot) in enumerate(a) if slot in where_b]
