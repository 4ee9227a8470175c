"""The generated world's vocabulary: English lemmas and their invented L2 counterparts.

The L2 lexicon is a bijection from English lemmas to invented stems drawn from a seeded
syllable generator, with its own regular morphology (noun plural, verb agreement suffixes)
and optionally another script, so no word form is shared with English.
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


@dataclass
class L2Lexicon:
    """Invented stems for every English lemma of the world, in one script."""

    stems: dict[str, str]
    script: str = "latin"

    @classmethod
    def generate(cls, seed: int, script: str = "latin", shared_names: bool = False) -> "L2Lexicon":
        """``shared_names``: people's names keep their English spelling (written in the L2's
        script, as real languages share names: identical strings in a Latin-script L2)."""
        if script not in SCRIPTS:
            raise ValueError(f"unknown script {script!r}; choose from {sorted(SCRIPTS)}")
        rng = random.Random(f"lexicon-{seed}")
        used: set[str] = set(NAMES) if shared_names else set()
        stems: dict[str, str] = {}
        for lemma in all_lemmas():
            short = lemma in FUNCTION or lemma in PREPOSITIONS
            while True:
                n_syll = 1 if short else rng.choice([2, 2, 3])
                stem = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(n_syll))
                if short:
                    stem += rng.choice(["", "n", "k"])
                if stem not in used and len(stem) >= 2:
                    break
            used.add(stem)
            stems[lemma] = lemma if shared_names and lemma in NAMES else stem
        return cls(stems=stems, script=script)

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
