"""The settings every transfer run has, each declared once: its one default and a line of
help in a dataclass field (:func:`xlviz.fields.setting`). ``xlviz transfer``'s flags (and
``demo``'s and ``sweep``'s), the merge of the flags a command got into a run's config
(:func:`with_flags`) and the app's Runs and Sweeps forms are generated from these fields; a
run's world declares its flagged settings in :class:`xlviz.data.world.WorldConfig`, a data
source its options in its options dataclass (:mod:`xlviz.data.sources`).

Reading and checking a config is :class:`xlviz.transfer.config.TransferSettings`'s (a subclass:
the same fields in the same order). No torch here: the app's forms read these settings
before any page needs the model stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlviz.data.world import WorldConfig
from xlviz.fields import Setting, given, setting, settings_of
from xlviz.training.masking import MASK_PROBABILITY, RANDOM_SHARE


def methods_help() -> str:
    """``--methods``'s help: every system of the method registry and the groups."""
    from xlviz.methods import aliases, methods

    systems = "; ".join(f"{m.name}: {', '.join(m.systems)}" for m in methods().values())
    return (f"comma list of systems to train and score ({systems}), or a group: {', '.join(aliases())}")


def sources_help() -> str:
    """``--source``'s help: every data source of the registry."""
    from xlviz.data.sources import sources

    return "data source: " + "; ".join(f"{s.name}: {s.description}" for s in sources().values()) + " (default: world)"


def tasks_help() -> str:
    """``--tasks``'s help: every evaluation task of the registry."""
    from xlviz.transfer.tasks import tasks

    return ("comma list of evaluation tasks (default: every task the source supports): "
            + "; ".join(f"{t.name}: {t.description}" for t in tasks().values()))


@dataclass
class RunSettings:
    """The settings every run has, with their defaults: a run's ``config.json`` lists them in
    this order (each method's options follow, :data:`xlviz.transfer.config.TransferConfig`)."""

    name: str = setting("transfer", "run name prefix", blank=True)
    seed: int = setting(0, "the run's seed (the world's too, unless the config gives world.seed)")
    world: WorldConfig = setting(default_factory=WorldConfig, nested=True, help="the generated world's settings")
    # The systems to train and score (xlviz.methods registry names, or 'all', a method's name,
    # 'wu-sweep'); configs written before the registry say "variants" instead (read as these).
    methods: list[str] = setting(default_factory=lambda: ["monotrans", "floor", "dictionary-oracle"], help=methods_help, blank=True)
    model_size: str = setting("small", "tiny | small | medium")
    vocab_size: int = setting(400, "vocabulary size of each language's tokenizer")
    tokenizer: str = setting("wordpiece", "the vocabularies' tokenizer model")
    block_size: int = setting(24, "masked-LM block length in tokens")  # short blocks let step 1 leave the unigram plateau
    qa_max_length: int = setting(96, "QA input length in tokens (question and paragraph window)")
    doc_stride: int = setting(48, "overlap of a paragraph's QA windows in tokens")
    # Longest answer span (tokens) considered when decoding predictions. SQuAD's 30 suits
    # Wikipedia; the generated world's answers are noun phrases of 1-4 subwords in every
    # language. At 12, fine-tuned models stretched answers past the phrase (English F1
    # 1.7-3.3 points lower) and blind ones (the floor) filled the span (docs/world.md).
    max_answer_length: int = setting(6, "longest answer span in tokens considered when decoding QA predictions")
    batch_size: int = setting(32, "QA fine-tuning batch (paragraph windows)")
    # Masked-LM batches (steps 1 and 2) of short blocks: a small BERT leaves the unigram
    # plateau (loss ~3.6) only with many short sequences per step (docs/world.md).
    mlm_batch_size: int = setting(128, "masked-LM batch of steps 1 and 2 (blocks)")
    mlm_probability: float = setting(MASK_PROBABILITY, "share of the tokens that become masked-LM targets (BERT's by default)")
    # Share of the masked targets shown as a random token (BERT's 10%; drawn from the model's
    # whole vocabulary, every language's on a joint model). The unchanged share stays 10%, the
    # rest are [MASK]: 0 is Dufter & Schuetze's `no-random` (90% [MASK], 10% unchanged).
    # Read through xlviz.training.masking.masking, the one place masking reads its settings.
    mlm_random_share: float = setting(RANDOM_SHARE, "share of the masked-LM targets shown as a random token (BERT's by "
                                                    "default; the unchanged share stays 0.1, the rest are [MASK])")
    # Share of MLM batches (steps 1 and 2, every masked-LM stage) of full-length blocks
    # (max(block_size, qa_max_length) tokens, as many tokens per batch as a short one), spread
    # evenly, so that every position QA inputs reach is trained (the paper trains at full length
    # throughout; BERT 10% of its steps). 0: short blocks only, the code before (positions past
    # block_size kept their random init). Plateau check and earlier measurements: docs/methods.md,
    # "Faithfulness changes", and docs/world.md.
    long_block_share: float = setting(0.1, "share of masked-LM batches of full-length blocks (0: short blocks only)")
    # Budgeted for the 5-minute demo on a 2-core CPU with bf16 (auto); step 1's length and
    # learning rate matter most for transfer, step 3's for English F1 (docs/world.md).
    pretrain_steps: int = setting(1000, "steps of masked-LM pre-training (step 1, and every pre-training from scratch)")
    pretrain_lr: float = setting(2e-3, "learning rate of the pre-trainings")
    transfer_steps: int = setting(320, "steps of learning the L2 embeddings (step 2)")
    transfer_lr: float = setting(5e-3, "learning rate of step 2")
    finetune_steps: int = setting(600, "steps of QA fine-tuning on L1 (step 3)")
    finetune_lr: float = setting(1e-3, "learning rate of QA fine-tuning")
    # Std of step 2's new L2 embedding rows, so also of the floor's untrained ones. Near zero,
    # untrained rows carry almost no token identity: the floor then measures what the body
    # gets from positions and sentence structure alone, the same for every seed; at BERT's
    # 0.02, random rows let the QA model match identical words and the floor varies by seed.
    # Step 2 learns as well from either (docs/world.md).
    l2_init_std: float = setting(0.002, "std of step 2's new L2 embedding rows (and so of the floor's untrained ones)")
    # The optimizer of every stage trained through the staged run's loop: the share of linear
    # warm-up updates and AdamW's beta2 (torch's 0.999; RoBERTa pre-trains with 0.98). Settings
    # so the plateau fix can be swept (docs/methods.md, "Stage verdicts").
    warmup_ratio: float = setting(0.06, "share of linear warm-up updates of every stage but the pre-trainings from scratch")
    adam_beta2: float = setting(0.999, "AdamW's beta2 of every stage")
    # The warm-up share of masked-LM pre-trainings from scratch, apart from the other stages'
    # ``warmup_ratio``: ``pretrain_warmup_ratio`` for one-language bodies (MONOTRANS's step 1,
    # mono-L2, CLWE's body), ``joint_warmup_ratio`` for models pre-trained on several languages at
    # once (the joint and pair models, Wu's, VECO's). At 0.06 half the pair models of seeds 0-2
    # ended on the unigram plateau (float32); warming up over a quarter of the updates took every
    # pair model of the census off it and raised their English F1 (docs/methods.md, "Stage
    # verdicts"). ``l2_body_warmup_ratio``: the L2 bodies pre-trained from scratch
    # (``s1_pretrain-<l2>``: mono-L2, the xx→en bodies): at 0.06 the seed-0 `svo` body stayed on
    # the plateau (bf16); at 0.25 every body of seeds 0-9 left it. ``pretrain_warmup_ratio``: the
    # English bodies (MONOTRANS's step 1, CLWE's body): at 0.06 CLWE's seed-6 body stayed on the
    # plateau (bf16, on a GPU and on a CPU) and step 1 at seeds 6 and 8 ended barely off it; at
    # 0.25 that body left it. So every pre-training from scratch warms up over a quarter of its
    # updates (corpus sources keep the 0.06 their runs were measured with).
    pretrain_warmup_ratio: float = setting(0.25, "warm-up share of one-language pre-trainings from scratch (L1 bodies)")
    joint_warmup_ratio: float = setting(0.25, "warm-up share of pre-trainings on several languages at once (joint and pair models)")
    l2_body_warmup_ratio: float = setting(0.25, "warm-up share of the L2 bodies pre-trained from scratch")
    # auto: bf16 where matmuls run natively in bf16 (CPUs with AMX or AVX512-BF16, GPUs), else float32. On a
    # CPU, bf16 trains the model in bf16 with float32 master weights (bench/bench_mlm.py).
    mixed_precision: str = setting("auto", "auto (default: bf16 on GPUs and on CPUs with AMX or AVX512-BF16, else no) | no | bf16 | fp16")
    grad_accum: int = setting(1, "gradient accumulation steps")
    log_every: int = setting(10, "steps between logged losses")
    # where metrics go besides metrics.jsonl, through accelerate's trackers: "tensorboard" (event
    # files under <run>/tensorboard), "wandb", "mlflow", "aim", a comma list, "all" or "none"
    log_with: str = setting("tensorboard", "trackers besides metrics.jsonl, through accelerate: tensorboard (default: "
                                           "event files in the run folder) | wandb | mlflow | aim | all | none, or a comma list")
    # QA fine-tuning on L1 scores the model on the world's L1 dev set every eval_every steps (and
    # at its last): dev_exact_match / dev_f1 in metrics.jsonl and the trackers; 0: never
    # The demo: 2 dev scores per fine-tuning, ~3 s each on one core (~2% of its time).
    eval_every: int = setting(300, "QA fine-tuning steps between L1 dev scores (0: never)")
    # Independent stages (the pair models, step 2 per language, the fine-tunings) run at once
    # in this many worker processes, each on cores / workers torch threads; 0: one per core (at
    # most 4), what `xlviz demo` uses. The small models here train as fast on one thread as on
    # two, so on 2 cores 2 workers nearly halve a run (bench/bench_workers.py). A stage's bytes
    # depend on its thread count: the same seed gives the same bytes for the same workers on
    # the same machine.
    workers: int = setting(1, "stages trained at once in worker processes (0: one per CPU core, at most 4; "
                              "the demo's default; 1: one after the other, the default of transfer)")
    # Stage verdicts (xlviz.training.verdicts; docs/methods.md, "Stage verdicts"): a pre-training
    # stage is degenerate unless its final MLM loss is verdict_mlm_margin nats below the unigram
    # entropy of its targets; a QA stage unless its L1 dev F1 beats the first-k-words baseline by
    # verdict_qa_margin points. strict: stop the run at the first degenerate stage.
    verdict_mlm_margin: float = setting(1.0, "nats a pre-training's final MLM loss must lie below its targets' unigram entropy")
    verdict_qa_margin: float = setting(10.0, "F1 points a QA stage must beat the first-k-words baseline by on the L1 dev split")
    strict: bool = setting(False, "stop the run at the first degenerate stage (an MLM loss not below its corpus's unigram "
                                  "entropy, a QA model no better than a trivial baseline on the dev split)")
    # --- the data source (xlviz.data.sources) ------------------------------------------------
    # "world" (generated), "multi30k", "files" or a registered source; a source sizes some of
    # the settings above for its data when the config does not give them (Source.defaults).
    source: str = setting("world", sources_help, blank=True)
    # the source's options (files: l1, l2, l1_corpus, l2_corpus, parallel, qa_train ...): their flags
    # come from each source's options dataclass
    data: dict = setting(default_factory=dict, nested=True, help="the source's options")
    # Step 1 from this model (an HF encoder folder or hub id; MiniLM offline: xlviz.models.minilm)
    # instead of pre-training here; one without an MLM head gets step 1b (mlm_head_*).
    init_model: str | None = setting(None, "corpus sources: step 1 from this model (an HF encoder folder or hub id) "
                                           "instead of pre-training")
    # --- sentence retrieval on a corpus source's parallel pairs (the alignment stage) ----------
    eval_pooling: str = setting("mean_no_special", "sentence retrieval's pooling: mean | mean_no_special | cls")
    eval_max_length: int = setting(64, "sentence retrieval's input length in tokens")
    # --- what the run scores (xlviz.transfer.tasks): task names; empty: every task its source supports
    tasks: list[str] = setting(default_factory=list, help=tasks_help, blank=True)


# --- the settings' flags (xlviz.fields): generated from the declarations above ---------------
# The settings `xlviz demo` and `xlviz sweep` take as flags too, in their --help's order;
# `xlviz transfer` takes every setting's flag (run_settings), these first.
EVERY_COMMAND = ("methods", "name", "seed", "languages", "model_size", "vocab_size", "pretrain_steps", "transfer_steps",
                 "finetune_steps", "batch_size", "mlm_batch_size", "block_size", "corpus_documents", "qa_train_paragraphs",
                 "qa_test_paragraphs", "mixed_precision", "grad_accum", "log_with", "strict", "workers")


def run_settings() -> list[Setting]:
    """Every setting of a run that has a flag: :class:`RunSettings`'s in field order, the
    world's in its place (path ``world.corpus_documents``), then the options of every registered
    source (``data.l1``; an option several sources have, once)."""
    from xlviz.data.sources import sources

    out = settings_of(RunSettings)
    seen = {s.path for s in out}
    for src in sources().values():
        for s in settings_of(src.options_class, prefix="data.") if src.options_class is not None else ():
            if s.path not in seen:
                seen.add(s.path)
                out.append(s)
    return out


def named_settings(names) -> list[Setting]:
    """The settings called ``names``, in that order (the world's, for a name a source's options share)."""
    by_name: dict[str, Setting] = {}
    for s in run_settings():
        by_name.setdefault(s.name, s)
    return [by_name[name] for name in names]


def with_flags(args, d: dict) -> dict:
    """The config dict ``d`` (a config file's, or empty) with the setting flags given in
    ``args`` (:func:`xlviz.fields.given`): a run setting into ``d``, a world setting into its
    ``world``, a source option into its ``data``. A name the world and the source options share
    (``--qa-train-paragraphs``) sets the run's source's: the world's on the world, ``data``'s
    on a corpus source. The world's seed is the run's unless the world gives one."""
    settings = run_settings()
    homes: dict[str, set[str]] = {}
    for s in settings:
        homes.setdefault(s.name, set()).add(s.path.rpartition(".")[0])
    flags = given(args, settings)
    for s, value in flags:
        if "." not in s.path:
            d[s.path] = value
    corpus = d.get("source", "world") != "world"
    nested = {"world": dict(d.get("world") or {}), "data": dict(d.get("data") or {})}
    for s, value in flags:
        home, _, key = s.path.rpartition(".")
        if home and not (len(homes[s.name]) > 1 and (home == "world") == corpus):
            nested[home][key] = value
    if "seed" in d:
        nested["world"].setdefault("seed", d["seed"])
    for home, values in nested.items():
        if values:
            d[home] = values
    return d
