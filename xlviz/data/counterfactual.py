"""Counterfactual renderings: the world's facts with one language's words under another's grammar.

Why: an L2's zero-shot loss mixes two costs, words the model has not aligned with English and a
word order it has not learned to read. The world renders the same facts with any lexicon under
any grammar, so crossing them separates the costs on the same questions: the L2's words in
English's order (only the words differ from English), English words in the L2's order (only the
order differs). The L2's own words in its own order is its test set, byte for byte.
"""

from __future__ import annotations

from xlviz.data.grammar import Language, constituent_span
from xlviz.errors import XlvizError


def crossed_language(world, words: str, order: str) -> Language:
    """``words``' lexicon (English's when ``words`` is the L1) under ``order``'s grammar."""
    for lang, what in ((words, "words"), (order, "order")):
        if lang not in world.languages:
            raise XlvizError(f"unknown language {lang!r}; this world has {world.languages}", field=what)
    lex, gram = world.lang[words], world.lang[order]
    if words == order:
        return lex
    return Language(words, gram.order, lex.lexicon)


def render_qa(world, language: Language, split: str = "test") -> dict:
    """``split``'s questions rendered in ``language`` as SQuAD JSON (the ids of :meth:`World.qa`),
    as the world renders its own test sets; with the lexicon's articles for MLQA-style scoring."""
    from xlviz.data.world import render

    articles = []
    for p_idx, facts in enumerate(world.qa_facts(split)):
        if p_idx % 5 == 0:
            articles.append({"title": f"world-{split}-{p_idx // 5:03d}", "paragraphs": []})
        sents = [render(language, c) for c, _ in facts]
        context = " ".join(r.text for r in sents)
        qas, pos = [], 0
        for f_idx, ((c, questions), r) in enumerate(zip(facts, sents)):
            for q in questions:
                start, end = constituent_span(r.words, r.spans, q.target)
                qas.append({"id": f"{split}-{p_idx:04d}-{f_idx}-{q.target}", "question": render(language, q).text,
                            "answers": [{"text": context[pos + start: pos + end], "answer_start": pos + start}]})
            pos += len(r.text) + 1
        articles[-1]["paragraphs"].append({"context": context, "qas": qas})
    out = {"version": f"xlviz-world-{split}-{language.code}", "data": articles}
    if not language.is_english:
        out["articles"] = [language.fn("the"), language.fn("a")]
    return out


__all__ = ["crossed_language", "render_qa"]
