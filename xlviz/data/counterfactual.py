"""Counterfactual renderings: the world's facts with one language's words under another's grammar.

Why: an L2's zero-shot loss mixes two costs, words the model has not aligned with English and a
word order it has not learned to read. The world renders the same facts with any lexicon under
any grammar, so crossing them separates the costs on the same questions: the L2's words in
English's order (only the words differ from English), English words in the L2's order (only the
order differs). The L2's own words in its own order is its test set, byte for byte.

The order cost splits further: English with English's grammar except ONE typological feature
set to the L2's value (:func:`feature_language`; :data:`xlviz.data.typology.FEATURES`), one
rendering per feature in which the L2's grammar differs from English's, each named by that
feature. Every feature of :class:`~xlviz.data.typology.Grammar` can be set alone (any feature
set is a grammar), and with its English value the rendering is English's test set byte for
byte (English's marked orders, ``l1_variety``, included). Two features carry more than their
own words' positions, because the grammar code (:class:`xlviz.data.grammar.Language`) couples
them:

- ``word_order``: ``_clause_order`` places a location before the object and a date right
  after the subject in a verb-final clause (after the verb, object and location in an svo
  one), so the location and the date move with the verb; a statement without either moves
  only its verb. English's marked statements (object clefts, topicalised objects, fronted
  locations) keep their own order. In questions, English's do-support exists only in an svo
  grammar with fronted wh words, so any other word order also drops ``does``/``do`` and
  inflects the verb ("what the big dog in a garden sees?").
- ``question``: wh in situ drops do-support for the same reason ("the big dog sees what?").
  Statements do not change at all (the feature is the questions').

``modifier`` places a noun phrase's modifier ("the dog near the cats"); the QA test facts have
none, so its rendering of the test set is English's (the analysis says so instead of scoring it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xlviz.data.grammar import Language, constituent_span
from xlviz.data.typology import FEATURES, Grammar
from xlviz.errors import XlvizError

# what else a feature moves when it is set alone (see the module's doc)
COUPLED: dict[str, str] = {
    "word_order": "a location and a date move with the verb; questions lose do-support",
    "question": "questions lose do-support",
}


def crossed_language(world, words: str, order: str) -> Language:
    """``words``' lexicon (English's when ``words`` is the L1) under ``order``'s grammar."""
    for lang, what in ((words, "words"), (order, "order")):
        if lang not in world.languages:
            raise XlvizError(f"unknown language {lang!r}; this world has {world.languages}", field=what)
    lex, gram = world.lang[words], world.lang[order]
    if words == order:
        return lex
    return Language(words, gram.order, lex.lexicon)


def feature_language(world, feature: str, value: str, words: str | None = None) -> Language:
    """English's grammar with ``feature`` set to ``value`` and nothing else changed, in
    ``words``' lexicon (English's by default, its marked orders kept)."""
    if feature not in FEATURES:
        raise XlvizError(f"unknown typological feature {feature!r}; known: {list(FEATURES)}", field="feature")
    if value not in FEATURES[feature]:
        raise XlvizError(f"unknown value {value!r} for {feature}; choose from {list(FEATURES[feature])}", field=feature)
    words = words or world.l1
    if words not in world.languages:
        raise XlvizError(f"unknown language {words!r}; this world has {world.languages}", field="words")
    english, lex = world.lang[world.l1], world.lang[words]
    grammar = Grammar(**{**english.grammar.features(), feature: value})
    if lex.is_english:
        return dataclasses.replace(english, order=grammar)
    return Language(words, grammar, lex.lexicon)


@dataclass(frozen=True)
class Rendering:
    """One rendering of the world's facts for an L2: whose words, whose order, and which of a
    system's exports reads it (the one of its words' language)."""

    name: str  # "en", "words", "order", "l2", or the one feature changed
    words: str
    order: str  # a language code, or "en+feature=value" for a one-feature rendering
    language: Language
    feature: str | None = None
    value: str | None = None

    @property
    def reader(self) -> str:
        return self.words

    @property
    def label(self) -> str:
        if self.feature is not None:
            return f"English, only {self.feature} = {self.value}"
        return LABELS[self.name]


LABELS = {"en": "English", "words": "L2 words, English order", "order": "English words, L2 order", "l2": "L2"}


def changed_features(world, l2: str) -> dict[str, str]:
    """``{feature: the L2's value}`` for the features in which the L2's grammar differs from English's."""
    if l2 not in world.languages:
        raise XlvizError(f"unknown language {l2!r}; this world has {world.languages}", field="language")
    en, g = world.lang[world.l1].grammar, world.lang[l2].grammar
    return {f: getattr(g, f) for f in FEATURES if getattr(g, f) != getattr(en, f)}


def renderings_of(world, l2: str) -> dict[str, Rendering]:
    """Every rendering of the L2's words-versus-order split, by name: English, the L2's words
    in English's order, English words in the L2's order, the L2, then one per feature in which
    the L2 differs from English (English with only that feature set to the L2's value)."""
    l1 = world.l1
    out = {name: Rendering(name, w, o, crossed_language(world, w, o))
           for name, (w, o) in {"en": (l1, l1), "words": (l2, l1), "order": (l1, l2), "l2": (l2, l2)}.items()}
    for feature, value in changed_features(world, l2).items():
        out[feature] = Rendering(feature, l1, f"{l1}+{feature}={value}", feature_language(world, feature, value),
                                 feature, value)
    return out


def _paragraph(language: Language, split: str, p_idx: int, facts) -> dict:
    """One paragraph of :func:`render_qa`: the context and its questions (ids of :meth:`World.qa`)."""
    from xlviz.data.world import render

    sents = [render(language, c) for c, _ in facts]
    context = " ".join(r.text for r in sents)
    qas, pos = [], 0
    for f_idx, ((c, questions), r) in enumerate(zip(facts, sents)):
        for q in questions:
            start, end = constituent_span(r.words, r.spans, q.target)
            qas.append({"id": f"{split}-{p_idx:04d}-{f_idx}-{q.target}", "question": render(language, q).text,
                        "answers": [{"text": context[pos + start: pos + end], "answer_start": pos + start}]})
        pos += len(r.text) + 1
    return {"context": context, "qas": qas}


def _squad(language: Language, split: str, articles: list) -> dict:
    out = {"version": f"xlviz-world-{split}-{language.code}", "data": articles}
    if not language.is_english:
        out["articles"] = [language.fn("the"), language.fn("a")]
    return out


def render_qa(world, language: Language, split: str = "test") -> dict:
    """``split``'s questions rendered in ``language`` as SQuAD JSON (the ids of :meth:`World.qa`),
    as the world renders its own test sets; with the lexicon's articles for MLQA-style scoring."""
    articles = []
    for p_idx, facts in enumerate(world.qa_facts(split)):
        if p_idx % 5 == 0:
            articles.append({"title": f"world-{split}-{p_idx // 5:03d}", "paragraphs": []})
        articles[-1]["paragraphs"].append(_paragraph(language, split, p_idx, facts))
    return _squad(language, split, articles)


def render_question(world, language: Language, qid: str) -> dict:
    """One question of :func:`render_qa` (``<split>-<paragraph>-<fact>-<target>``) with its whole
    paragraph as SQuAD JSON: the same context, question and gold answer as the full rendering,
    without rendering the other paragraphs (the XQuAD page shows one question at a time)."""
    parts = str(qid).split("-")
    if len(parts) != 4 or not parts[1].isdigit():
        raise XlvizError(f"{qid!r} is not a question of the generated world (<split>-<paragraph>-<fact>-<target>)", field="question")
    split, p_idx = parts[0], int(parts[1])
    facts = world.qa_facts(split)
    if p_idx >= len(facts):
        raise XlvizError(f"{qid!r}: the world's {split} split has {len(facts)} paragraphs", field="question")
    para = _paragraph(language, split, p_idx, facts[p_idx])
    qas = [q for q in para["qas"] if q["id"] == qid]
    if not qas:
        raise XlvizError(f"{qid!r} is not a question of the world's {split} split", field="question")
    return _squad(language, split, [{"title": f"world-{split}-{p_idx // 5:03d}", "paragraphs": [{**para, "qas": qas}]}])


__all__ = ["crossed_language", "feature_language", "changed_features", "renderings_of", "Rendering", "render_qa",
           "render_question", "COUPLED", "LABELS"]
