"""Extractive QA, zero-shot in every language of the run: on the generated world's test sets
(world source), or on SQuAD-format files such as XQuAD (a corpus source's ``qa_eval``; the
questions of the articles or paragraphs fine-tuned on are left out). Scored per system in its
scoring stage (:meth:`QA.score`, the one entry on either source); the model is fine-tuned on
L1 QA by the system's own stages (corpus sources: :func:`finetune`, MONOTRANS's step 3).

Everything that scores QA in a transfer run lives here: the test-set scores every route shares
(:func:`score_test_set`: predictions, EM/F1 under the source's normalisation, the official v1.1
scores, paragraph-bootstrap intervals), the world's rows (:func:`score_world`: exports,
verdicts, its own L1 model's scores, slices) and a corpus source's (:func:`score_corpus`), and
the hooks a QA fine-tuning on the world's L1 training set asks the run for (:func:`judge`,
:func:`dev_scorer`, behind ``ctx.judge_qa`` and ``ctx.dev_scorer``)."""

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
    from xlviz.methods import corpus as corpus_methods
    from xlviz.models.monotrans import freeze_for_step3, qa_from_mlm
    from xlviz.transfer.qa import repair_answer_starts, train_qa

    cfg = ctx.cfg
    ctx.micro_batch(cfg.batch_size)
    l1, l1_tok = corpus_methods.load_l1(ctx)
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


def score_test_set(ctx, model, tok, data: dict, *, articles: list[str] | None = None, language: str | None = None,
                   max_answer_length: int = 30, accelerator=None) -> tuple[dict, dict, dict[str, str], list[dict]]:
    """(scores, official v1.1 scores, predictions, per-question rows) of ``model`` on the SQuAD
    dict ``data``: EM/F1 normalised with ``articles`` (the world's languages, MLQA-style) or a
    real ``language`` (MLQA's script), followed by their paragraph-bootstrap intervals
    (questions share paragraphs: the interval resamples whole paragraphs; fixed seed, so a
    resumed run writes the same results.json). ``accelerator``: predictions sharded over its
    processes and gathered (:func:`xlviz.transfer.qa.predict_answers`)."""
    from xlviz.evaluation.squad_metric import evaluate_squad, per_question_scores
    from xlviz.evaluation.uncertainty import paragraph_ids, score_intervals
    from xlviz.transfer.qa import predict_answers

    cfg = ctx.cfg
    preds = predict_answers(model, tok, data, accelerator=accelerator, max_length=cfg.qa_max_length, doc_stride=cfg.doc_stride,
                            batch_size=64, max_answer_length=max_answer_length)
    scores = evaluate_squad(data, preds, articles=articles, language=language)
    per_question = per_question_scores(data, preds, articles=articles, language=language)
    scores.update(score_intervals(per_question, paragraph_ids(data)))
    return scores, evaluate_squad(data, preds), preds, per_question


# --------------------------------------------------------------------------- the world
def world_scores(ctx, model, tok, lang: str) -> tuple[dict, dict, dict[str, str], list[dict]]:
    """:func:`score_test_set` on the world's ``lang`` test set. Each language's own articles are
    stripped (MLQA-style), so L2/L1 compares like with like; the official v1.1 numbers
    (English articles only) are kept beside them."""
    return score_test_set(ctx, model, tok, ctx.world.qa("test", lang), articles=ctx.world.articles(lang),
                       max_answer_length=ctx.cfg.max_answer_length)


def slice_rows(ctx, lang: str, per_question: list[dict]) -> list[dict]:
    """The results row's ``slices``: EM/F1 of the per-question rows of ``lang``'s test set per
    slice of the world's questions (what each asks about, where its answer lies, its
    paragraph's size; :func:`xlviz.evaluation.slices.world_slices`), each with its
    paragraph-bootstrap interval, scored as the row (the language's own articles stripped):
    ``xlviz report --slices``'s rows of this system and language, without its ``all`` row."""
    from xlviz.evaluation.slices import WORLD_DIMENSIONS, row_slices, world_slices
    from xlviz.evaluation.uncertainty import paragraph_ids

    data = ctx.world.qa("test", lang)
    return row_slices(per_question, paragraph_ids(data), world_slices(ctx.world, lang), order=WORLD_DIMENSIONS)


def score_world(ctx, system: str) -> list[dict]:
    """Export each language's QA model and encoder and score the QA model on that language's
    test set (pair models: also their own L1 scores, ``l1_f1`` and ``l1_exact_match``);
    stores the Alignment page's encodings of the encoders; returns the rows."""
    from pathlib import Path

    from xlviz.methods import method_of
    from xlviz.methods.base import setting_of
    from xlviz.training.verdicts import DEGENERATE, OK, degenerate_reason, degenerate_stages
    from xlviz.transfer.exports import export_encoder, store_encodings

    world = ctx.world
    method = method_of(system)
    verdicts = ctx.run.verdicts()
    rows = []
    uses = {"translate_test": False, **method.uses(system, ctx.cfg)}
    encoders: dict[str, Path] = {}  # language -> the encoder folder written
    pair_l1: dict[str, Path] = {}  # l2 -> a pair model's L1 encoder folder
    for lang in world.languages:
        export_encoder(ctx, system, lang, encoders, pair_l1)
        qa = method.qa_model(ctx, system, lang)
        if qa is None:
            continue
        model, tok = qa
        scores, v11, preds, per_question = world_scores(ctx, model, tok, lang)
        ctx.write_predictions(system, lang, preds, setting=setting_of(uses))
        ctx.save_artefact(model, tok, "export", system, lang, role="qa", setting=setting_of(uses),
                          depends_on=method.row_stages(ctx, system, lang))
        # four decimals: tables print one, and two stored decimals rounded twice (7.4499 -> 7.45 -> 7.5)
        row = {"system": system, "method": method.name, "language": lang, "setting": setting_of(uses),
               "exact_match": round(scores["exact_match"], 4), "f1": round(scores["f1"], 4),
               **{k: v for k, v in scores.items() if k not in ("exact_match", "f1")},
               "exact_match_v11": round(v11["exact_match"], 4), "f1_v11": round(v11["f1"], 4), **uses,
               "resources": method.resources(system, ctx.cfg, ctx, lang)}
        bad = degenerate_stages(method.row_stages(ctx, system, lang), verdicts)
        row["verdict"] = DEGENERATE if bad else OK
        if bad:  # no result: every table shows it as degenerate and leaves it out of ratios and means
            row["degenerate_stages"] = bad
        own = method.own_l1_model(ctx, system, lang)
        if own is not None:  # its own L1 model's scores: the ratios divide by them (EM beside F1)
            l1_scores = world_scores(ctx, *own, world.l1)[0]
            row["l1_f1"] = round(l1_scores["f1"], 4)
            row["l1_exact_match"] = round(l1_scores["exact_match"], 4)
        row["tasks"] = ["qa"]
        # last, so every other field keeps its place: EM/F1 per slice of the world's questions
        row["slices"] = slice_rows(ctx, lang, per_question)
        rows.append(row)
        ctx.log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} (v1.1: EM {v11['exact_match']:.1f} F1 {v11['f1']:.1f})"
                + (f"; its own {world.l1} model: F1 {row['l1_f1']:.1f}" if "l1_f1" in row else "")
                + (f"; DEGENERATE ({degenerate_reason(row)}): not a result" if bad else ""))
    ctx.add_results(rows)
    store_encodings(ctx, system, encoders, pair_l1)
    return rows


def first_words_baseline(data: dict, max_words: int, articles: list[str] | None = None) -> tuple[float, int]:
    """(F1, k) of the best trivial answer "the first k words of the context", k = 1 ..
    ``max_words``, on a SQuAD dict: what a model that never read the question scores."""
    from xlviz.evaluation.squad_metric import evaluate_squad

    best = (0.0, 1)
    for k in range(1, max(1, max_words) + 1):
        preds = {qa["id"]: " ".join(p["context"].split()[:k]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]}
        f1 = evaluate_squad(data, preds, articles=articles)["f1"]
        if f1 > best[0]:
            best = (f1, k)
    return best


def judge(ctx, stage: str, model, tokenizer) -> None:
    """A QA model fine-tuned on the L1 training set against the trivial baseline on the
    world's L1 dev split (:func:`first_words_baseline`); records the stage's verdict."""
    from xlviz.evaluation.squad_metric import evaluate_squad
    from xlviz.training.verdicts import qa_verdict
    from xlviz.transfer.qa import predict_answers

    if not ctx.main:
        return
    cfg, world = ctx.cfg, ctx.world
    data = world.qa("dev", world.l1)
    articles = world.articles(world.l1)
    preds = predict_answers(model, tokenizer, data, max_length=cfg.qa_max_length, doc_stride=cfg.doc_stride, batch_size=64,
                            max_answer_length=cfg.max_answer_length)
    f1 = evaluate_squad(data, preds, articles=articles)["f1"]
    baseline, k = first_words_baseline(data, cfg.max_answer_length, articles)
    ctx.add_verdict(stage, qa_verdict(f1, baseline, cfg.verdict_qa_margin, baseline=f"the first {k} word{'s' * (k > 1)} of the context"))


def dev_scorer(ctx, tok, stage: str):
    """``on_eval`` for a QA fine-tuning on the L1 training set (:func:`xlviz.methods.common.finetune_qa`
    asks the run for it): EM/F1 (percent, official v1.1) of the model being trained on the
    world's L1 dev set, logged as ``dev_exact_match`` / ``dev_f1`` every ``eval_every``
    steps. A model the plain QA decoder cannot read (one that needs a language or a pair
    input) is noted once in the log and not evaluated again."""
    from xlviz.data.squad import squad_examples
    from xlviz.evaluation.qa_predict import predict_qa
    from xlviz.evaluation.squad_metric import evaluate_squad

    cfg = ctx.cfg
    dev = ctx.world.qa("dev")
    examples = squad_examples(dev)
    state = {"on": bool(examples)}

    def on_eval(step: int, module) -> dict:
        if not state["on"]:
            return {}
        try:
            preds = predict_qa(module.model, tok, examples, max_length=cfg.qa_max_length, doc_stride=cfg.doc_stride,
                               batch_size=64, max_answer_length=cfg.max_answer_length)
        except Exception as e:  # noqa: BLE001 - a dev score is a convenience; the run goes on
            state["on"] = False
            ctx.log(f"  {stage}: no dev scores during fine-tuning ({type(e).__name__}: {str(e)[:120]})")
            return {}
        scores = evaluate_squad(dev, {k: v["text"] for k, v in preds.items()})
        return {"dev_exact_match": scores["exact_match"], "dev_f1": scores["f1"]}

    return on_eval


# --------------------------------------------------------------------------- a corpus source
def score_corpus(ctx, system: str) -> list[dict]:
    """Zero-shot QA in L1 and L2 on a corpus source's ``qa_eval`` files (the questions trained
    on left out); exports each model and its predictions; returns the rows."""
    from xlviz.data.sources.files import shared_path
    from xlviz.data.squad import read_squad_json
    from xlviz.data.vocabulary import special_row_map
    from xlviz.evaluation.slices import REAL_DIMENSIONS, row_slices, squad_slices
    from xlviz.evaluation.squad_metric import mlqa_languages
    from xlviz.evaluation.uncertainty import paragraph_ids
    from xlviz.methods import method_of
    from xlviz.models.loading import load_model
    from xlviz.models.monotrans import zero_shot_model
    from xlviz.transfer.qa import qa_files, squad_subset

    cfg, data = ctx.cfg, ctx.data
    files = qa_files([shared_path(f, "qa_eval") for f in data.o.qa_eval])
    langs = [lang for lang in (data.l1, data.l2) if lang in files]
    if not langs:
        raise XlvizError(f"no {data.l1} or {data.l2} file among the QA evaluation files {sorted(files)}", field="data.qa_eval")
    train_ids = qa_data(ctx)[1]
    # XQuAD shares question ids across languages: the slices' question word is read from English
    english = read_squad_json(files["en"]) if "en" in files else None
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
        scores, v11, preds, per_question = score_test_set(ctx, model, tok, test, language=norm, accelerator=ctx.acc)
        model.to("cpu")
        if ctx.main:
            ctx.write_predictions(system, lang, preds, setting="zero-shot")
            ctx.save_artefact(model, tok, "export", system, lang, role="qa", setting="zero-shot")
            named = {"exact_match_v11": round(v11["exact_match"], 4), "f1_v11": round(v11["f1"], 4),
                     "normalisation": f"mlqa-{norm}"} if norm is not None else {}
            intervals = {k: v for k, v in scores.items() if k not in ("exact_match", "f1")}
            rows.append({"system": system, "language": lang, "exact_match": round(scores["exact_match"], 4),
                         "f1": round(scores["f1"], 4), "n_questions": scores["n_questions"], **named, **intervals,
                         "resources": method_of(system).resources(system, cfg, ctx, lang),
                         # EM/F1 per slice of the text's questions (question word, answer length and
                         # position, question-context overlap), each with its paragraph interval
                         "slices": row_slices(per_question, paragraph_ids(test), squad_slices(test, english), order=REAL_DIMENSIONS)})
            ctx.log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} ({scores['n_questions']} questions)")
    return rows


class QA(Task):
    """Extractive QA: scores a system (:meth:`score`), and owns what a run asks of QA besides:
    step 3 on a corpus source (:meth:`finetune`), a fine-tuned model's verdict and its dev
    scores during training on the world (:meth:`judge`, :meth:`dev_scorer`)."""

    def finetune(self, ctx) -> None:
        finetune(ctx)

    def judge(self, ctx, stage: str, model, tokenizer) -> None:
        judge(ctx, stage, model, tokenizer)

    def dev_scorer(self, ctx, tok, stage: str):
        return dev_scorer(ctx, tok, stage)

    def score(self, ctx, system: str) -> None:
        """Score ``system`` on the run's source: the world's test sets (rows replaced, with the
        exports and encoders), or a corpus source's files (fields merged into the rows)."""
        if ctx.source_kind == "world":
            if ctx.main:
                score_world(ctx, system)
            return
        ctx.add_task_rows(self.name, score_corpus(ctx, system))


TASK = QA("qa", "extractive QA zero-shot in every language: the world's test sets, or SQuAD-format files such as XQuAD",
          needs=frozenset({"qa_train", "qa_test"}), order=10)
