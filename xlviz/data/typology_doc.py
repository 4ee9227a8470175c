"""``python -m xlviz.data.typology_doc [PATH]``: write docs/typology.md from the generator.

Why: the page shows one sentence, question and answer span per grammar preset, as the world
renders them; a test regenerates the page and compares, so the page cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from xlviz.data.grammar import NP, PP, Clause, Language, Question, constituent_span
from xlviz.data.typology import ENGLISH, FEATURE_HELP, FEATURES, PRESET_HELP, PRESETS, typological_distance
from xlviz.data.world import LanguageSpec, World, WorldConfig, render

# One clause that shows every feature: an adjective, a plural object, an NP modifier on the
# subject, a location (adposition), articles; the question asks for the object.
EXAMPLE = Clause(NP("dog", "sg", "the", ("big",), PP("near", NP("lake", "sg", "the"))), "see",
                 NP("ball", "pl", "the", ("red",)), PP("in", NP("garden", "sg", "a")))
QUESTIONS = ("obj", "loc")


def _gloss(words: list, english: list) -> str:
    """The English word of each word's slot (its gold alignment), in the L2's order."""
    by_slot = {slot: w for w, slot in english}
    return " ".join(by_slot.get(slot, "?" if slot != "punct" else w) for w, slot in words)


def examples(seed: int = 0) -> list[dict]:
    """Per preset: the example statement and questions, each with its English gloss (the
    English word of every slot) and the answer span, rendered by the generator with one
    lexicon (the world's first L2's), so that only the grammar differs between presets."""
    world = World(WorldConfig(seed=seed, languages=[LanguageSpec("svo")]))
    lexicon = world.lang["svo"].lexicon
    en = world.lang["en"]
    out = []
    for name in ["en"] + list(PRESETS):
        language = en if name == "en" else Language(name, PRESETS[name], lexicon)
        statement = render(language, EXAMPLE)
        rows = []
        for target in QUESTIONS:
            question = Question(EXAMPLE, target)
            q = render(language, question)
            start, end = constituent_span(statement.words, statement.spans, target)
            rows.append({"target": target, "question": q.text, "gloss": _gloss(q.words, render(en, question).words),
                         "answer": statement.text[start:end], "start": start})
        out.append({"name": name, "statement": statement.text, "gloss": _gloss(statement.words, render(en, EXAMPLE).words),
                    "questions": rows})
    return out


def page(seed: int = 0) -> str:
    """The Markdown text of docs/typology.md."""
    lines = [
        "# Typology: the grammars of the generated world's L2s",
        "",
        "<!-- written by `python -m xlviz.data.typology_doc`; tests/test_typology.py checks it against the generator -->",
        "",
        "An L2's grammar is a set of typological features, each a WALS-style parameter the generator",
        "renders. Every rendered word keeps its slot (the tree position it comes from), so gold word",
        "alignments, parallel pairs and QA answers (whole constituents) hold in every grammar.",
        "A run names a grammar per L2: a preset (`--languages tr,cy`), a preset with changes",
        "(`--languages x:tr+determiner=before`), or a JSON entry with features",
        "(`--languages '[{\"code\": \"x\", \"features\": {\"word_order\": \"vso\"}}]'`).",
        "",
        "| feature | values (English's first) | what it sets |",
        "|---|---|---|",
    ]
    for f, values in FEATURES.items():
        lines.append(f"| `{f}` | {' / '.join(values)} | {FEATURE_HELP[f]} |")
    lines += [
        "",
        "The typological distance of a grammar (`xlviz.data.typology.typological_distance`) is the",
        "number of features in which it differs from English. `step1` to `step3` change one feature",
        "at a time from `svo` to `sov`; `svo` and `sov` are the world's original two grammars.",
        "",
        "| preset | distance | " + " | ".join(FEATURES) + " | |",
        "|---|---|" + "---|" * len(FEATURES) + "---|",
    ]
    for name, g in PRESETS.items():
        cells = [getattr(g, f) if getattr(g, f) == getattr(ENGLISH, f) else f"**{getattr(g, f)}**" for f in FEATURES]
        lines.append(f"| `{name}` | {typological_distance(name)} | " + " | ".join(cells) + f" | {PRESET_HELP[name]} |")
    lines += ["", f"## Examples (seed {seed})", "",
              "One clause in every grammar, with a question about its object and one about its location;",
              "the answer is the span of the asked constituent in the statement (character offset in brackets).",
              "Every preset is rendered with the same invented words (the world's first L2's lexicon), so only",
              "the grammar differs; under each line, in brackets, the English word of each word's slot (its",
              "gold alignment), \"?\" for a word with no English partner.", ""]
    for ex in examples(seed):
        lines += [f"### `{ex['name']}`", "", "```text", ex["statement"]]
        if ex["name"] != "en":
            lines.append(f"  ({ex['gloss']})")
        for q in ex["questions"]:
            lines.append(f"{q['question']}  ->  {q['answer']}  [{q['start']}]")
            if ex["name"] != "en":
                lines.append(f"  ({q['gloss']})")
        lines += ["```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0] if argv else "docs/typology.md")
    from xlviz.io import atomic_write_text

    atomic_write_text(path, page())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
