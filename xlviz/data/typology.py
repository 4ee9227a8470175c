"""An L2's grammar as a set of typological parameters (WALS-style features) and named presets.

Why: the generated world used to offer two orders, ``svo`` (a word-for-word cipher of English)
and ``sov`` (everything reversed at once), so transfer could only be seen to "work" or "fail".
Real languages sit in between. Each feature here is one WALS chapter the grammar renders; a
preset fixes all of them, and :func:`typological_distance` counts the features in which a
grammar differs from English, so a sweep can put transfer against a number.

A grammar is given as a preset name (``"tr"``), a mapping of features (missing ones take
English's value), or ``"PRESET+feature=value+..."`` on the command line.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Mapping

from xlviz.errors import XlvizError

# feature -> its values (the first is English's), with the WALS chapter it follows.
FEATURES: dict[str, tuple[str, ...]] = {
    "word_order": ("svo", "sov", "vso"),         # 81A order of subject, object and verb
    "adposition": ("pre", "post"),               # 85A order of adposition and noun phrase
    "adjective": ("before", "after"),            # 87A order of adjective and noun
    "modifier": ("after", "before"),             # 86A/90A possessor or NP modifier ("near the cats") and noun
    "determiner": ("before", "after", "none"),   # 37A/38A articles: before or after the noun, or none
    "question": ("fronted", "in-situ"),          # 93A position of the interrogative phrase
}
FEATURE_HELP = {
    "word_order": "order of subject, object and verb",
    "adposition": "prepositions (pre) or postpositions (post)",
    "adjective": "adjective before or after the noun",
    "modifier": "possessor / NP modifier ('near the cats') before or after the noun",
    "determiner": "articles before or after the noun, or none",
    "question": "wh word fronted or in situ",
}


@dataclass(frozen=True)
class Grammar:
    """One value per feature; English is the default."""

    word_order: str = "svo"
    adposition: str = "pre"
    adjective: str = "before"
    modifier: str = "after"
    determiner: str = "before"
    question: str = "fronted"

    def features(self) -> dict[str, str]:
        return asdict(self)


ENGLISH = Grammar()

# The one-feature-at-a-time series from svo to sov: verb-final first (the change every study
# finds the largest), then postpositions, then wh in situ; sov adds adjectives after the noun.
_STEP1 = Grammar(word_order="sov")
_STEP2 = Grammar(word_order="sov", adposition="post")
_STEP3 = Grammar(word_order="sov", adposition="post", question="in-situ")

PRESETS: dict[str, Grammar] = {
    # a word-for-word cipher of English (do-support in questions included)
    "svo": ENGLISH,
    "step1": _STEP1,
    "step2": _STEP2,
    "step3": _STEP3,
    # verb-final, postpositions, adjectives after the noun, wh in situ (the world's original "sov")
    "sov": Grammar(word_order="sov", adposition="post", adjective="after", question="in-situ"),
    # the head-final type of Turkish, Hindi, Japanese: SOV, postpositions, adjective and
    # possessor before the noun, no articles, wh in situ
    "tr": Grammar(word_order="sov", adposition="post", modifier="before", determiner="none", question="in-situ"),
    # Welsh: verb-initial, prepositions, adjectives after the noun, articles before, wh fronted
    "cy": Grammar(word_order="vso", adjective="after"),
}
PRESET_HELP = {
    "svo": "English's grammar (a cipher of English)",
    "step1": "svo but verb-final",
    "step2": "step1 + postpositions",
    "step3": "step2 + wh in situ",
    "sov": "step3 + adjectives after the noun (verb-final, postpositions, wh in situ)",
    "tr": "Turkish/Hindi/Japanese type: SOV, postpositions, adjective and possessor before the noun, no articles, wh in situ",
    "cy": "Welsh type: VSO, prepositions, adjectives after the noun",
}


def _fail(message: str, *, field: str, path: str | os.PathLike | None) -> XlvizError:
    return XlvizError(message, path=path, field=field)


def grammar_of(spec: object, *, field: str = "world.languages.order", path: str | os.PathLike | None = None) -> Grammar:
    """The grammar a spec names: a :class:`Grammar`, a preset name, ``"PRESET+feature=value+..."``
    (or ``"feature=value+..."`` over English), or a mapping of features (over English, or over
    the preset its ``"preset"`` key names). Anything else: an XlvizError naming the field."""
    if isinstance(spec, Grammar):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    if isinstance(spec, Mapping):
        d = dict(spec)
        base = d.pop("preset", "svo")
        return _with(grammar_of(base, field=f"{field}.preset", path=path), d, field=field, path=path)
    if not isinstance(spec, str) or not spec:
        raise _fail(f"a grammar is a preset name or an object of features, got {spec!r}", field=field, path=path)
    parts = spec.split("+")
    head, rest = (parts[0], parts[1:]) if "=" not in parts[0] else ("svo", parts)
    if head not in PRESETS:
        raise _fail(f"unknown word order / grammar preset {head!r}; choose from {list(PRESETS)} or give typological features", field=field, path=path)
    changes = {}
    for item in rest:
        key, eq, value = item.partition("=")
        if not eq:
            raise _fail(f"{item!r} is not feature=value (in {spec!r})", field=field, path=path)
        changes[key.strip()] = value.strip()
    return _with(PRESETS[head], changes, field=field, path=path)


def _with(base: Grammar, changes: Mapping, *, field: str, path: str | os.PathLike | None) -> Grammar:
    values = base.features()
    for key, value in changes.items():
        if key not in FEATURES:
            raise _fail(f"unknown typological feature {key!r}; known: {list(FEATURES)}", field=field, path=path)
        if value not in FEATURES[key]:
            raise _fail(f"unknown value {value!r} for {key}; choose from {list(FEATURES[key])}", field=f"{field}.{key}", path=path)
        values[key] = value
    return Grammar(**values)


def typological_distance(spec: object) -> int:
    """How many features of the grammar ``spec`` (anything :func:`grammar_of` reads, or a
    ``LanguageSpec``) differ from English's: 0 for ``svo``, 4 for ``sov``, 5 for ``tr``."""
    spec = getattr(spec, "order", spec)
    g = grammar_of(spec)
    return sum(getattr(g, f) != getattr(ENGLISH, f) for f in FEATURES)


def normal_form(spec: object, *, field: str = "world.languages.order", path: str | os.PathLike | None = None) -> str | dict:
    """What a config stores for a grammar: a preset name as given (so today's configs keep
    their bytes), any other spec as the full mapping of features (explicit and reproducible)."""
    if isinstance(spec, str) and spec in PRESETS:
        return spec
    return grammar_of(spec, field=field, path=path).features()


def parse_languages(text: str) -> list[dict]:
    """``--languages``: a JSON list of language entries, or a comma list of
    ``code[:grammar[:script]]`` where a code that names a preset takes that grammar (``tr,cy``)
    and ``grammar`` is a preset or ``PRESET+feature=value+...``. Entries as ``LanguageSpec``
    keywords, grammars validated (one line naming the field)."""
    text = text.strip()
    if text.startswith("["):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            raise XlvizError(f"not valid JSON: {e.msg} (line {e.lineno} column {e.colno})", field="languages") from None
        if not isinstance(entries, list):
            raise XlvizError("must be a JSON list of language entries", field="languages")
        return entries
    specs = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if not parts[0]:
            raise XlvizError("empty language code", field="languages")
        if len(parts) > 3:
            raise XlvizError(f"unknown field(s) {parts[3:]} in {item.strip()!r}: a language is code[:grammar[:script]]",
                             field="languages")
        code = parts[0]
        order = parts[1] if len(parts) > 1 and parts[1] else (code if code in PRESETS else "svo")
        script = parts[2] if len(parts) > 2 else ("cyrillic" if code == "sov" else "latin")
        specs.append({"code": code, "order": normal_form(order, field="languages"), "script": script})
    return specs


__all__ = ["FEATURES", "FEATURE_HELP", "Grammar", "ENGLISH", "PRESETS", "PRESET_HELP", "grammar_of", "typological_distance",
           "normal_form", "parse_languages"]
