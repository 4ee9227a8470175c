"""Word translation (bilingual lexicon induction) against the source's dictionary, per layer:
each system's L1 and L2 encoders read the parallel pairs, contextual vectors are averaged per
word type, and each L1 word's nearest L2 word type (cosine) must be one of its gold
translations (:func:`xlviz.analysis.alignment.word_translation_accuracy`; both directions,
averaged). Scored per system in ``s4_<system>``:

- on the generated world, against the held-out part of its gold dictionary
  (:func:`xlviz.data.dictionary.gold_split`: ``gold_dictionary_test_fraction`` of its L1 words,
  seeded by the run's seed; the part WECHSEL's fit never reads) on its word-segmented pairs, so
  no system is scored on pairs it was fitted on and every system on the same words; the rows
  record the split's sizes (``word_translation_train_pairs``, ``word_translation_test_pairs``);
- on a corpus source with parallel training lines (``parallel_train``, e.g. Multi30k task 1
  train), against the held-out test part of a dictionary induced from those lines
  (:mod:`xlviz.data.dictionary`), on the source's scored parallel pairs (e.g. Multi30k val)
  split into words; the nearest word type is searched among every L2 word of those pairs. The
  dictionary is induced once per run, written to ``dictionaries/<l1>-<l2>.json`` (its size,
  settings, train and test parts) and recorded in the run's manifest.

Result fields ``word_translation_per_layer`` (percent) and ``word_translation_words`` (source
words scored). Opt-in (``--tasks retrieval,word-translation``)."""

from __future__ import annotations

import json

from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.transfer.tasks import Task, degenerate_mark


def _per_layer(rows: list[dict]) -> list:
    return [None if r.get("word_translation_a_to_b") is None
            else round(100 * (r["word_translation_a_to_b"] + r["word_translation_b_to_a"]) / 2, 2) for r in rows]


def corpus_dictionary(ctx) -> dict:
    """The run's induced dictionary (``dictionaries/<l1>-<l2>.json``): read when an earlier
    ``s4_`` stage wrote it with the same settings, else induced from the source's parallel
    training pairs, split (train / held-out test, disjoint by source word, seeded by the run's
    seed), written and recorded in the manifest."""
    from xlviz.data.dictionary import induce_dictionary, split_dictionary
    from xlviz.runs import artefact_relpath

    data, o = ctx.data, ctx.data.o
    file = ctx.run.path.joinpath(*artefact_relpath("dictionary", language=data.l2, pair=data.l1).split("/"))
    settings = {"parallel_train": [str(p) for p in data.parallel_train_files()], "dictionary_lines": o.dictionary_lines,
                "min_count": o.dictionary_min_count, "threshold": o.dictionary_threshold, "lowercase": o.lowercase,
                "test_fraction": o.dictionary_test_fraction, "seed": ctx.cfg.seed}
    if file.is_file():
        try:
            held = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            held = None
        if isinstance(held, dict) and held.get("request") == settings:
            return held
    pairs, dropped = data.parallel_train_pairs()
    book = induce_dictionary(pairs, min_count=o.dictionary_min_count, threshold=o.dictionary_threshold, lowercase=o.lowercase)
    train, test = split_dictionary(book.entries, o.dictionary_test_fraction, seed=ctx.cfg.seed)
    out = {"l1": data.l1, "l2": data.l2, "request": settings, **book.settings, "training_lines": len(pairs),
           "left_out_sharing_a_scored_line": dropped, "size": len(book), "train_size": len(train), "test_size": len(test),
           "fields": ["l1_word", "l2_word", "p_l2_given_l1", "p_l1_given_l2", "pairs_with_both"],
           "train": [list(e) for e in train], "test": [list(e) for e in test]}
    atomic_write_json(file, out, root=ctx.run.path)
    ctx.record_artefact("dictionary", file, language=data.l2, pair=data.l1, role="dictionary",
                        setting=f"IBM Model 1, {len(pairs)} training pairs: {len(book)} pairs ({len(train)} train, {len(test)} test)")
    ctx.log(f"  dictionary {data.l1}-{data.l2}: {len(book)} one-to-one pairs induced from {len(pairs)} parallel training pairs "
            f"({dropped} left out sharing a line with the scored pairs); {len(train)} train, {len(test)} held out for scoring")
    return out


class WordTranslation(Task):
    def check(self, ctx) -> None:
        """On a corpus source: the parallel training and scored files exist (and differ)."""
        if ctx.world is None:
            ctx.data.parallel_train_files()

    def score(self, ctx, system: str) -> None:
        if not ctx.main:
            return
        if ctx.world is None:
            return self.score_corpus(ctx, system)
        ctx.add_task_rows(self.name, self.world_rows(ctx, system))

    def world_rows(self, ctx, system: str, *, log: bool = True) -> list[dict]:
        """``system``'s rows on the generated world, one per L2, computed from the run's
        encoders without writing anything (a benchmark reads a finished run this way)."""
        from xlviz.analysis.reports import ParallelData, system_alignment
        from xlviz.methods import method_of

        from xlviz.data.dictionary import gold_split

        world, method = ctx.world, method_of(system)
        rows = []
        for l2 in world.l2s:
            train, held_out = gold_split(world, l2, ctx.cfg.gold_dictionary_test_fraction, ctx.cfg.seed)
            b = method.encoder(ctx, system, l2)
            a = (method.pair_l1_encoder(ctx, system, l2) if l2 != world.l2s[0] else None) or method.encoder(ctx, system, world.l1)
            if a is None or b is None:
                continue
            pairs = world.parallel_pairs(l2, n=world.config.parallel_pairs)
            data = ParallelData(world.l1, l2, [p["src"] for p in pairs], [p["tgt"] for p in pairs], [p["id"] for p in pairs],
                                f"generated world ({world.l1}-{l2})", [p["src_words"] for p in pairs], [p["tgt_words"] for p in pairs],
                                [[tuple(x) for x in p["alignment"]] for p in pairs],
                                held_out)
            layers = system_alignment(a[0].eval(), a[1], b[0].eval(), b[1], data, pooling="mean", words=True,
                                      max_length=ctx.cfg.qa_max_length, seed=ctx.cfg.seed)
            per_layer = _per_layer(layers)
            rows.append({"system": system, "language": l2, "word_translation_per_layer": per_layer,
                         "word_translation_words": layers[0].get("n_words"), "word_translation_dictionary_size": len(train) + len(held_out),
                         "word_translation_train_pairs": len(train), "word_translation_test_pairs": len(held_out)})
            if log:
                ctx.log(f"  {system} {l2}: word translation per layer ({len(held_out)} held-out gold pairs) " + " ".join("-" if x is None else f"{x:.1f}" for x in per_layer))
        return rows

    def score_corpus(self, ctx, system: str) -> None:
        """``system`` on a corpus source: its L1 encoder on the L1 side of the scored pairs,
        its L2 encoder on the L2 side, against the dictionary's held-out test part."""
        from xlviz.analysis.reports import word_translation_rows, word_vectors
        from xlviz.data.dictionary import words
        from xlviz.methods import method_of

        data, lc = ctx.data, ctx.data.o.lowercase
        book = corpus_dictionary(ctx)
        scored = data.parallel_pairs()
        src_words = [words(a, lc) for a, _ in scored]
        tgt_words = [words(b, lc) for _, b in scored]
        keep = [i for i in range(len(scored)) if src_words[i] and tgt_words[i]]
        src_words, tgt_words = [src_words[i] for i in keep], [tgt_words[i] for i in keep]
        flat_a, flat_b = [w for s in src_words for w in s], [w for s in tgt_words for w in s]
        present_a, present_b = set(flat_a), set(flat_b)
        gold = [(a, b) for a, b, *_ in book["test"] if a in present_a and b in present_b]
        if not gold:
            raise XlvizError(f"no pair of the dictionary's test part ({book['test_size']} pairs) has both words in the "
                             f"scored parallel pairs; lower dictionary_min_count or give more parallel_train lines",
                             field="data.parallel_train")
        method = method_of(system)  # the system's L1 encoder on the L1 side, its L2 encoder on the L2 side
        l1, l1_tok = method.encoder(ctx, system, data.l1)
        model, tok = method.encoder(ctx, system, data.l2)
        length = ctx.cfg.eval_max_length
        wa, _ = word_vectors(l1.eval(), l1_tok, src_words, length)
        wb, _ = word_vectors(model.eval(), tok, tgt_words, length)
        layers = word_translation_rows(wa, wb, flat_a, flat_b, gold)
        per_layer = _per_layer(layers)
        ctx.add_task_rows(self.name, [{"system": system, "language": data.l2, "word_translation_per_layer": per_layer,
                                       "word_translation_words": layers[0].get("n_words"),
                                       "word_translation_dictionary_size": book["size"],
                                       "word_translation_test_pairs": len(gold), **degenerate_mark(ctx, system, [data.l1, data.l2])}])
        ctx.log(f"  {system} {data.l2}: word translation per layer (test part of the induced dictionary, {len(gold)} pairs in "
                f"the scored lines) " + " ".join("-" if x is None else f"{x:.1f}" for x in per_layer))


TASK = WordTranslation("word-translation", "word translation per layer against the source's dictionary (nearest word type)",
                       needs=frozenset({"dictionary", "parallel"}), kinds=("world", "corpus"), order=30, default=False)
