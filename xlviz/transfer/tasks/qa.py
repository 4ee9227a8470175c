"""Extractive QA, zero-shot in every language of the run: on the generated world's test sets
(world source), or on SQuAD-format files such as XQuAD (a corpus source's ``qa_eval``; the
questions of the articles or paragraphs fine-tuned on are left out). Scored per system in its
``s4_<system>`` stage; the model is fine-tuned on L1 QA by the system's own stages (corpus
sources: :func:`finetune`, MONOTRANS's step 3)."""

from __future__ import annotations

from xlviz.errors import XlvizError
from xlviz.transfer.tasks import Task


def article_split(data: dict, n_train: int, seed: int) -> tuple[dict, set[str]]:
    """(training SQuAD dict, its question ids): ``n_train`` whole articles drawn with ``seed``.
    Paragraphs of one article share its topic and names; splitting by article keeps them all
    on one side, a stricter held-out test than a paragraph split."""
    import random

    from xlviz.transfer.qa import squad_subset

    n = len(data["data"])
    if not 0 < n_train < n:
        raise XlvizError(f"must be between 1 and {n - 1} (the file has {n} articles)", field="qa_train_articles")
    chosen = set(random.Random(seed).sample(range(n), n_train))
    ids = {qa["id"] for i, a in enumerate(data["data"]) if i in chosen for p in a["paragraphs"] for qa in p["qas"]}
    return squad_subset(data, lambda qid: qid in ids), ids


def qa_data(ctx) -> tuple[dict, set[str]]:
    """(the L1 QA training data, its question ids) of a corpus source: whole articles or paragraphs."""
    from xlviz.data.sources.files import shared_path
    from xlviz.data.squad import read_squad_json
    from xlviz.transfer.qa import paragraph_split

    o, seed = ctx.data.o, ctx.cfg.seed
    data = read_squad_json(shared_path(o.qa_train, "qa_train"))
    if o.qa_train_articles is not None:
        return article_split(data, o.qa_train_articles, seed)
    return paragraph_split(data, o.qa_train_paragraphs, seed)


def finetune(ctx) -> None:
    """Step 3 on a corpus source: QA fine-tuning on L1 with the L1 token embeddings frozen (special rows train)."""
    from xlviz.data.squad import squad_examples
    from xlviz.data.vocabulary import special_ids_of
    from xlviz.methods import method_of, stream
    from xlviz.models.monotrans import freeze_for_step3, qa_from_mlm
    from xlviz.transfer.qa import repair_answer_starts, train_qa

    cfg = ctx.cfg
    ctx.micro_batch(cfg.batch_size)
    l1, l1_tok = stream.load_l1(ctx)
    model = qa_from_mlm(l1, seed=cfg.seed + 3)
    del l1
    freeze_for_step3(model, special_ids=special_ids_of(l1_tok))
    data, ids = qa_data(ctx)
    data, repaired, dropped = repair_answer_starts(data)
    examples = squad_examples(data)
    ctx.log(f"  {len(examples)} training questions ({repaired} offsets repaired, {dropped} dropped)")
    _, on_log = ctx.loop("s3_finetune", cfg.finetune_steps, cfg.finetune_lr)
    model = train_qa(model, l1_tok, examples, accelerator=ctx.acc, steps=cfg.finetune_steps, lr=cfg.finetune_lr,
                     batch_size=cfg.batch_size, grad_accum=cfg.grad_accum, max_length=cfg.qa_max_length,
                     doc_stride=cfg.doc_stride, seed=cfg.seed + 5, log_every=cfg.log_every, on_log=on_log, desc="s3_finetune")
    ctx.save(model, ctx.path("s3_finetune"), l1_tok, language=ctx.data.l1, role="finetuned")


def score_corpus(ctx, system: str) -> list[dict]:
    """Zero-shot QA in L1 and L2 on a corpus source's ``qa_eval`` files; exports each model and
    its predictions; returns the rows."""
    from xlviz.data.sources.files import shared_path
    from xlviz.data.squad import read_squad_json
    from xlviz.evaluation.squad_metric import mlqa_languages, per_question_scores
    from xlviz.evaluation.uncertainty import paragraph_ids, score_intervals
    from xlviz.methods import method_of
    from xlviz.models.loading import load_model
    from xlviz.models.monotrans import zero_shot_model
    from xlviz.data.vocabulary import special_row_map
    from xlviz.transfer.qa import evaluate_qa, qa_files, squad_subset

    cfg, data = ctx.cfg, ctx.data
    files = qa_files([shared_path(f, "qa_eval") for f in data.o.qa_eval])
    langs = [lang for lang in (data.l1, data.l2) if lang in files]
    if not langs:
        raise XlvizError(f"no {data.l1} or {data.l2} file among the QA evaluation files {sorted(files)}", field="data.qa_eval")
    train_ids = qa_data(ctx)[1]
    qa, l1_tok = load_model(ctx.path("s3_finetune"), task="qa", attn_implementation="sdpa")
    l2 = None
    rows = []
    for lang in langs:
        if lang == data.l1:
            model, tok = qa, l1_tok
        else:
            if l2 is None:  # the system's L2 masked LM (step 2's, or the floor's untrained rows)
                l2 = method_of(system).encoder(ctx, system, data.l2)
            model = zero_shot_model(qa, l2[0], special_rows=special_row_map(l1_tok, l2[1]))
            tok = l2[1]
        test = squad_subset(read_squad_json(files[lang]), lambda qid: qid not in train_ids)
        model.to(ctx.acc.device)
        # real languages are scored as MLQA's script scores them (official v1.1 kept beside)
        norm = lang if lang in mlqa_languages() else None
        scores, preds = evaluate_qa(model, tok, test, accelerator=ctx.acc, max_length=cfg.qa_max_length,
                                    doc_stride=cfg.doc_stride, batch_size=64, language=norm)
        model.to("cpu")
        if ctx.main:
            # questions share paragraphs: the interval resamples whole paragraphs, as on the world
            intervals = score_intervals(per_question_scores(test["data"], preds, language=norm), paragraph_ids(test))
            ctx.write_predictions(system, lang, preds, setting="zero-shot")
            ctx.save_artefact(model, tok, "export", system, lang, role="qa", setting="zero-shot")
            rows.append({"system": system, "language": lang, "exact_match": round(scores["exact_match"], 4),
                         "f1": round(scores["f1"], 4), "n_questions": scores["n_questions"],
                         **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in scores.items()
                            if k in ("exact_match_v11", "f1_v11", "normalisation")}, **intervals,
                         "resources": method_of(system).resources(system, cfg, ctx, lang)})
            ctx.log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} ({scores['n_questions']} questions)")
    return rows


class QA(Task):
    def score(self, ctx, system: str) -> None:
        if ctx.source_kind == "world":
            return ctx.stage_evaluate(system)  # the world's test sets, exports and encoders (xlviz.transfer.pipeline)
        ctx.add_task_rows(self.name, score_corpus(ctx, system))


TASK = QA("qa", "extractive QA zero-shot in every language: the world's test sets, or SQuAD-format files such as XQuAD",
          needs=frozenset({"qa_train", "qa_test"}), order=10)
