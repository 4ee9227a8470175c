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


__all__ = ["crossed_language", "render_qa", "render_question"]
