"""The generated world's vocabulary: English lemmas and their invented L2 counterparts.

The L2 lexicon is a bijection from English lemmas to invented stems drawn from a seeded
syllable generator, with its own regular morphology (noun plural, verb agreement suffixes)
and optionally another script, so no word form is shared with English, unless the world
asks for shared material: names spelled as in English (``shared_names``) and a share of
content lemmas borrowed from English (``loanword_share``: the English word lightly respelt,
:func:`respell`, inflected with the L2's own suffixes), as real languages share both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = ["anna", "tom", "maria", "peter", "lucy", "david", "sara", "john", "emma", "paul", "nina", "mark"]
# Animate nouns can be subjects of any verb; "class" drives which verbs take them as objects.
ANIMALS = ["dog", "cat", "bird", "horse", "cow", "fox", "rabbit", "goat"]
PEOPLE = ["boy", "girl", "farmer", "teacher", "doctor", "baker", "child", "singer"]
THINGS = ["ball", "apple", "book", "box", "cake", "letter", "flower", "hat", "key", "cup", "stone", "bag", "bread", "song"]
PLACES = ["garden", "river", "market", "school", "house", "forest", "bridge", "village", "park", "lake"]
ADJECTIVES = ["big", "small", "red", "blue", "green", "old", "young", "happy", "quiet", "tall"]
VERBS = ["see", "like", "find", "carry", "eat", "read", "feed", "watch", "buy", "sell", "paint", "follow", "hold", "wash", "bring", "swing"]
PREPOSITIONS = ["in", "near", "behind", "under", "at"]
FUNCTION = ["the", "a", "does", "do", "who", "what", "where"]
# The preposition of a date ("on 1999-05-12", world setting ``date_share``). Its L2 stem is
# drawn after every other lemma's, so adding it left every other stem as it was.
DATE_PREPOSITION = "on"
# Class nouns a paraphrased question uses for the noun phrases it does not ask about ("what
# does the big animal see?" of "the big dog sees the ball": world setting ``qa_paraphrase``),
# by noun_class; stems drawn after DATE_PREPOSITION's, for the same reason.
HYPERNYMS = {"animal": "animal", "person": "person", "place": "place", "food": "thing", "text": "thing", "tool": "thing",
             "thing": "thing"}

# Homonyms: one English form, two senses, two different L2 words. Sense 1 is an animal that
# can act as a subject; sense 2 is a thing that only appears as an object.
HOMONYMS = {"bat": ("bat#animal", "bat#thing"), "seal": ("seal#animal", "seal#thing"), "crane": ("crane#animal", "crane#thing")}

# Which object classes a verb selects (kept loose so corpora stay varied).
VERB_OBJECTS = {
    "eat": ("food",), "read": ("text",), "feed": ("animal",), "swing": ("tool",),
}
FOOD = {"apple", "cake", "bread"}
TEXT = {"book", "letter", "song"}
TOOLS = {"bat#thing", "stone", "bag", "key"}


def noun_class(lemma: str) -> str:
    if lemma in ANIMALS or lemma.endswith("#animal"):
        return "animal"
    if lemma in PEOPLE:
        return "person"
    if lemma in FOOD:
        return "food"
    if lemma in TEXT:
        return "text"
    if lemma in TOOLS:
        return "tool"
    if lemma in PLACES:
        return "place"
    return "thing"


def surface_lemma(lemma: str) -> str:
    """English spelling of a lemma ("bat#animal" -> "bat")."""
    return lemma.split("#", 1)[0]


def english_plural(word: str) -> str:
    if word == "child":
        return "children"
    if word == "person":
        return "people"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def english_3sg(verb: str) -> str:
    if verb.endswith(("s", "x", "ch", "sh")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v"]
VOWELS = ["a", "e", "i", "o", "u"]
# L2 inflection uses letters stems never contain, so stems and inflected forms never collide.
L2_NOUN_PLURAL = "zo"
L2_VERB_SG = "ha"
L2_VERB_PL = "hu"

SCRIPTS = {
    "latin": {},
    "cyrillic": dict(zip("abdefgiklmnoprstuvzh", "абдефгиклмнопрстувзх")),
    "greek": dict(zip("abdefgiklmnoprstuvzh", "αβδεφγικλμνοπρστυωζχ")),
}


def all_lemmas() -> list[str]:
    nouns = ANIMALS + PEOPLE + THINGS + PLACES + [s for pair in HOMONYMS.values() for s in pair]
    return NAMES + nouns + ADJECTIVES + VERBS + PREPOSITIONS + FUNCTION


def content_lemmas() -> list[str]:
    """The lemmas a language may borrow (nouns, adjectives, verbs): loanwords are mostly
    content words; names are shared by ``shared_names`` and function words are not borrowed."""
    nouns = ANIMALS + PEOPLE + THINGS + PLACES + [s for pair in HOMONYMS.values() for s in pair]
    return nouns + ADJECTIVES + VERBS


# English spelling -> the L2's letters (ONSETS + VOWELS: the letters every script of SCRIPTS
# writes, never the suffix letters z and h, so a loan's inflected forms stay unambiguous).
_DIGRAPHS = (("tch", "k"), ("ch", "k"), ("ck", "k"), ("sh", "s"), ("th", "t"), ("ph", "f"), ("qu", "kv"))
_LETTERS = {"c": "k", "h": "", "j": "d", "q": "k", "w": "v", "x": "ks", "y": "i", "z": "s"}


def respell(word: str) -> str:
    """A deterministic light respelling of an English word in the L2's alphabet, as languages
    adapt loans to their spelling: digraphs simplified (ch -> k, sh -> s, th -> t), letters the
    L2 lacks replaced (c -> k, w -> v, y -> i, x -> ks; h dropped), double letters single.
    "teacher" -> "teaker", "apple" -> "aple", "farmer" -> "farmer" (unchanged)."""
    w = surface_lemma(word).lower()
    for a, b in _DIGRAPHS:
        w = w.replace(a, b)
    w = "".join(_LETTERS.get(c, c) for c in w)
    return "".join(c for i, c in enumerate(w) if i == 0 or c != w[i - 1])


@dataclass
class L2Lexicon:
    """Invented stems for every English lemma of the world, in one script."""

    stems: dict[str, str]
    script: str = "latin"
    loans: frozenset[str] = frozenset()  # lemmas whose stem is their English word respelt

    @classmethod
    def generate(cls, seed: int, script: str = "latin", shared_names: bool = False, loanword_share: float = 0.0) -> "L2Lexicon":
        """``shared_names``: people's names keep their English spelling (written in the L2's
        script, as real languages share names: identical strings in a Latin-script L2).
        ``loanword_share``: that share of :func:`content_lemmas` (rounded) take
        :func:`respell` of their English word as stem, in the L2's script and with its own
        suffixes; drawn in a seeded order after the invented stems, so every other stem stays
        as it is and a larger share borrows a superset of a smaller one's lemmas."""
        if script not in SCRIPTS:
            raise ValueError(f"unknown script {script!r}; choose from {sorted(SCRIPTS)}")
        rng = random.Random(f"lexicon-{seed}")
        used: set[str] = set(NAMES) if shared_names else set()
        stems: dict[str, str] = {}
        for lemma in all_lemmas() + [DATE_PREPOSITION] + list(dict.fromkeys(HYPERNYMS.values())):
            short = lemma in FUNCTION or lemma in PREPOSITIONS or lemma == DATE_PREPOSITION
            while True:
                n_syll = 1 if short else rng.choice([2, 2, 3])
                stem = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(n_syll))
                if short:
                    stem += rng.choice(["", "n", "k"])
                if stem not in used and len(stem) >= 2:
                    break
            used.add(stem)
            stems[lemma] = lemma if shared_names and lemma in NAMES else stem
        loans = _borrow(stems, seed, loanword_share) if loanword_share > 0 else {}
        return cls(stems={**stems, **loans}, script=script, loans=frozenset(loans))

    def write(self, text: str) -> str:
        table = SCRIPTS[self.script]
        return "".join(table.get(c, c) for c in text) if table else text

    def noun(self, lemma: str, number: str) -> str:
        stem = self.stems[lemma]
        return self.write(stem + (L2_NOUN_PLURAL if number == "pl" else ""))

    def verb(self, lemma: str, number: str) -> str:
        return self.write(self.stems[lemma] + (L2_VERB_SG if number == "sg" else L2_VERB_PL))

    def word(self, lemma: str) -> str:
        return self.write(self.stems[lemma])


def loan_count(share: float) -> int:
    """How many content lemmas a lexicon borrows at ``share`` (round half up)."""
    return int(share * len(content_lemmas()) + 0.5)


def _borrow(stems: dict[str, str], seed: int, share: float) -> dict[str, str]:
    """lemma -> loan stem for :func:`loan_count` lemmas, walked in a seeded order; a lemma
    whose respelling is shorter than two letters or equals any invented stem or an earlier
    loan (the second sense of a homonym: "bat") keeps its invented stem, and the walk goes on."""
    order = content_lemmas()
    random.Random(f"loans-{seed}").shuffle(order)
    taken, loans = set(stems.values()), {}
    for lemma in order:
        if len(loans) == loan_count(share):
            break
        stem = respell(lemma)
        if len(stem) >= 2 and stem not in taken:
            taken.add(stem)
            loans[lemma] = stem
    return loans
