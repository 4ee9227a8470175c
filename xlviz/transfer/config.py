"""The configuration of one transfer run: everything needed to reproduce it.

Validated on load so a bad value stops the run at once with a message naming the field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from xlviz.data.world import WorldConfig
from xlviz.errors import XlvizError
from xlviz.models.monotrans import MODEL_SIZES, NOISE_RULES, NOISE_STD
from xlviz.names import check_config

MIXED_PRECISION = ("auto", "no", "bf16", "fp16")
DEMO_METHODS = ["monotrans", "floor", "dictionary-oracle", "jointpair-disjoint"]


def parse_variants(text: str | list[str]) -> list[str]:
    """The former ``--variants`` ("base,floor" or "all") -> MONOTRANS system names."""
    from xlviz.methods.monotrans import LEGACY_VARIANTS

    items = text if isinstance(text, list) else [t.strip() for t in str(text).split(",") if t.strip()]
    if items == ["all"]:
        return list(LEGACY_VARIANTS.values())
    unknown = [v for v in items if v not in LEGACY_VARIANTS]
    if unknown or not items:
        raise XlvizError(f"unknown variant(s) {unknown}; choose from {list(LEGACY_VARIANTS)} or 'all'", field="variants")
    return [LEGACY_VARIANTS[v] for v in items]


@dataclass
class TransferConfig:
    name: str = "transfer"
    seed: int = 0
    world: WorldConfig = field(default_factory=WorldConfig)
    # The systems to train and score (xlviz.methods registry names, or 'all', a method's name,
    # 'wu-sweep'); configs written before the registry say "variants" instead (read as these).
    methods: list[str] = field(default_factory=lambda: ["monotrans", "floor", "dictionary-oracle"])
    model_size: str = "small"
    vocab_size: int = 400
    # What the paper's 32k subwords are for the joint vocabularies (jointpair-joint: one of this
    # size for both languages; jointmulti: this; jointmulti-large: 200k/32k = 6.25 x this);
    # 0: vocab_size, the size of each language's own (disjoint) vocabulary (xlviz.methods.joint).
    joint_vocab_size: int = 0
    # Exponent of the smoothed language sampling q_i ∝ p_i^alpha (p_i: a language's share of the
    # corpus tokens) for the joint models' batches and joint vocabularies (Conneau & Lample 2019;
    # mBERT's 0.7). 0: balanced, 1: the natural proportions.
    language_alpha: float = 0.7
    # CLWE's VecMap initialisation: "unsupervised" (intra-lingual similarity distributions) or
    # "identical" (identical strings; needs languages that share some, e.g. Latin-script subwords).
    clwe_init: str = "unsupervised"
    tokenizer: str = "wordpiece"
    block_size: int = 24  # masked-LM blocks; short ones let step 1 leave the unigram plateau
    qa_max_length: int = 96
    doc_stride: int = 48
    # Longest answer span (tokens) considered when decoding predictions. SQuAD's 30 suits
    # Wikipedia; the generated world's answers are noun phrases of 1-4 subwords in every
    # language. At 12, fine-tuned models stretched answers past the phrase (English F1
    # 1.7-3.3 points lower) and blind ones (the floor) filled the span (docs/world.md).
    max_answer_length: int = 6
    batch_size: int = 32
    # Masked-LM batches (steps 1 and 2) of short blocks: a small BERT leaves the unigram
    # plateau (loss ~3.6) only with many short sequences per step (docs/world.md).
    mlm_batch_size: int = 128
    mlm_probability: float = 0.15  # BERT's share of masked tokens
    # Share of MLM batches (steps 1 and 2, every masked-LM stage) of full-length blocks
    # (max(block_size, qa_max_length) tokens, as many tokens per batch as a short one), spread
    # evenly, so that every position QA inputs reach is trained (the paper trains at full length
    # throughout; BERT 10% of its steps). 0: short blocks only, the code before (positions past
    # block_size kept their random init). Plateau check and earlier measurements: docs/methods.md,
    # "Faithfulness changes", and docs/world.md.
    long_block_share: float = 0.1
    # Budgeted for the 5-minute demo on a 2-core CPU with bf16 (auto); step 1's length and
    # learning rate matter most for transfer, step 3's for English F1 (docs/world.md).
    pretrain_steps: int = 1000
    pretrain_lr: float = 2e-3
    transfer_steps: int = 320
    transfer_lr: float = 5e-3
    finetune_steps: int = 600
    finetune_lr: float = 1e-3
    adapter_size: int = 32
    # Std of step 2's new L2 embedding rows, so also of the floor's untrained ones. Near zero,
    # untrained rows carry almost no token identity: the floor then measures what the body
    # gets from positions and sentence structure alone, the same for every seed; at BERT's
    # 0.02, random rows let the QA model match identical words and the floor varies by seed.
    # Step 2 learns as well from either (docs/world.md).
    l2_init_std: float = 0.002
    noise_std: float = NOISE_STD  # noised fine-tuning's Gaussian std (Appendix A, sized for BERT-base)
    # "scaled": sigma = noise_std x the model's word-embedding row norm at initialisation
    # (init std x sqrt(width)) / BERT-base's (0.02 x sqrt(768)): the paper's noise-to-norm ratio,
    # 0.031 for the 128-wide small model; "absolute": noise_std as is (models.monotrans.noise_std_for).
    noise_rule: str = "scaled"
    # auto: bf16 where matmuls run natively in bf16 (CPUs with AMX or AVX512-BF16, GPUs), else float32. On a
    # CPU, bf16 trains the model in bf16 with float32 master weights (bench/bench_mlm.py).
    mixed_precision: str = "auto"
    grad_accum: int = 1
    log_every: int = 10
    # where metrics go besides metrics.jsonl, through accelerate's trackers: "tensorboard" (event
    # files under <run>/tensorboard), "wandb", "mlflow", "aim", a comma list, "all" or "none"
    log_with: str = "tensorboard"
    # QA fine-tuning on L1 scores the model on the world's L1 dev set every eval_every steps (and
    # at its last): dev_exact_match / dev_f1 in metrics.jsonl and the trackers; 0: never
    eval_every: int = 300  # the demo: 2 dev scores per fine-tuning, ~3 s each on one core (~2% of its time)
    # Independent stages (the pair models, step 2 per language, the fine-tunings) run at once
    # in this many worker processes, each on cores / workers torch threads; 0: one per core (at
    # most 4), what `xlviz demo` uses. The small models here train as fast on one thread as on
    # two, so on 2 cores 2 workers nearly halve a run (bench/bench_workers.py). A stage's bytes
    # depend on its thread count: the same seed gives the same bytes for the same workers on
    # the same machine.
    workers: int = 1
    # Stage verdicts (xlviz.training.verdicts; docs/methods.md, "Stage verdicts"): a pre-training
    # stage is degenerate unless its final MLM loss is verdict_mlm_margin nats below the unigram
    # entropy of its targets; a QA stage unless its L1 dev F1 beats the first-k-words baseline by
    # verdict_qa_margin points. strict: stop the run at the first degenerate stage.
    verdict_mlm_margin: float = 1.0
    verdict_qa_margin: float = 10.0
    strict: bool = False
    # VECO (xlviz.methods.veco): "scratch" pre-trains the cross-attention model on the world
    # from scratch; "jointpair-disjoint" starts from that system's pair model (as the paper
    # starts from XLM-R), the new cross-attention trained alone for veco_ca_steps, then
    # everything for pretrain_steps.
    veco_init: str = "scratch"
    veco_ca_steps: int = 200
    # --- PPA (xlviz.methods.ppa; Pan et al. 2021) ---------------------------------------------
    # The model PPA aligns: a joint system of xlviz (jointpair-disjoint, jointpair-joint,
    # jointmulti) or the folder of a Hugging Face multilingual masked LM (never remote code).
    ppa_base: str = "jointpair-disjoint"
    ppa_objective: str = "moco+tlm"  # Table 5's ablations: moco | tlm | moco+mlm (TLM replaced by MLM)
    ppa_pairs: int = 0  # parallel training pairs per L2; 0: all of the world's (world.parallel_train_pairs)
    # Scaled to the world's budget (docs/methods.md, "PPA measured"): with the paper's ratios
    # (300 steps, lr 5e-4, momentum 0.999) top-layer retrieval on en-sov reached 2.5%; 1,000
    # steps at lr 1e-3 reached 36.5% at momentum 0.999 and 89.5% at 0.99 (2,000 steps: 89.8%).
    ppa_steps: int = 1000
    ppa_lr: float = 1e-3
    ppa_batch_size: int = 128  # pairs per step and process (the paper's 128)
    # Negatives in the MoCo queue. The paper's 32k for 250k-2M pairs is ~13% of its smallest
    # corpus and keys at most 250 steps old; 512 is a quarter of the world's 2,000 pairs, 4
    # batches: a pair's own earlier key is rarely in the queue as a false negative, keys stay fresh.
    ppa_queue_size: int = 512
    # The paper's 0.999 gives the key encoder a time constant of 1/(1-m) = 1,000 steps, a
    # small part of its ~20k-step runs from an aligned mBERT; over a 1,000-step run from an
    # unaligned model it would barely move. 0.99 keeps the paper's ratio (a tenth of the run).
    ppa_momentum: float = 0.99
    ppa_temperature: float = 0.05
    ppa_projection_dim: int = 128  # d_k of the head (the paper: 300 for mBERT's 768)
    # --- active forgetting and WECHSEL (xlviz.methods.forgetting, xlviz.methods.wechsel) -------
    # Re-draw step 1's token embeddings every K updates; 0: the paper's ratio (1,000 of 125,000
    # updates), round(pretrain_steps / 125), 8 at 1,000 steps (docs/methods.md).
    forget_every: int = 0
    # The bilingual dictionary WECHSEL aligns its static spaces with: "gold" (the world's: an
    # upper bound), "seed" (wechsel_seed_size gold entries drawn with the seed) or "identical"
    # (the strings both vocabularies share; with world.shared_names, the names).
    wechsel_dictionary: str = "gold"
    wechsel_seed_size: int = 50
    wechsel_neighbours: int = 10  # k, the paper's 10
    wechsel_temperature: float = 0.1  # tau, the paper's 0.1

    @property
    def systems(self) -> list[str]:
        return list(self.methods)

    @classmethod
    def from_dict(cls, d: dict, *, path: str | None = None) -> "TransferConfig":
        if not isinstance(d, dict):
            raise XlvizError("a transfer config must be a JSON object", path=path)
        d = dict(d)
        d.pop("versions", None)
        if "variants" in d:  # a config or run folder from before the method registry
            legacy = parse_variants(d.pop("variants"))
            d.setdefault("methods", legacy)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise XlvizError(f"unknown setting(s) {unknown}; known: {sorted(known)}", path=path, field=unknown[0])
        world = d.pop("world", None)
        cfg = cls(**d)
        if isinstance(world, WorldConfig):
            cfg.world = world
        elif world is not None:
            if not isinstance(world, dict):
                raise XlvizError("must be an object", path=path, field="world")
            cfg.world = WorldConfig.from_dict(world, path=path)
        cfg.validate(path=path)
        return cfg

    @classmethod
    def from_file(cls, path: str | Path) -> "TransferConfig":
        from xlviz.io import read_json

        return cls.from_dict(read_json(path, what="transfer config"), path=str(path))

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self, *, path: str | None = None) -> None:
        for name in ("vocab_size", "block_size", "qa_max_length", "doc_stride", "batch_size", "mlm_batch_size", "pretrain_steps",
                     "transfer_steps", "finetune_steps", "adapter_size", "grad_accum", "log_every", "max_answer_length"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise XlvizError(f"must be a positive integer, got {v!r}", path=path, field=name)
        for name in ("pretrain_lr", "transfer_lr", "finetune_lr", "noise_std", "l2_init_std"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0:
                raise XlvizError(f"must be a positive number, got {v!r}", path=path, field=name)
        if isinstance(self.mlm_probability, bool) or not isinstance(self.mlm_probability, (int, float)) or not 0 < self.mlm_probability < 1:
            raise XlvizError(f"must be a number in (0, 1), got {self.mlm_probability!r}", path=path, field="mlm_probability")
        if isinstance(self.long_block_share, bool) or not isinstance(self.long_block_share, (int, float)) or not 0 <= self.long_block_share <= 1:
            raise XlvizError(f"must be a number in [0, 1], got {self.long_block_share!r}", path=path, field="long_block_share")
        if self.model_size not in MODEL_SIZES:
            raise XlvizError(f"unknown model size {self.model_size!r}; choose from {list(MODEL_SIZES)}", path=path, field="model_size")
        if self.mixed_precision not in MIXED_PRECISION:
            raise XlvizError(f"choose from {list(MIXED_PRECISION)}", path=path, field="mixed_precision")
        if isinstance(self.eval_every, bool) or not isinstance(self.eval_every, int) or self.eval_every < 0:
            raise XlvizError(f"must be 0 (no dev scores) or a positive integer, got {self.eval_every!r}", path=path, field="eval_every")
        from xlviz.training.tracking import parse_log_with

        parse_log_with(self.log_with, path=path)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 0 <= self.workers <= 64:
            raise XlvizError(f"must be an integer from 0 (one per core) to 64, got {self.workers!r}", path=path, field="workers")
        for name in ("verdict_mlm_margin", "verdict_qa_margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not -100 <= v <= 100:
                raise XlvizError(f"must be a number from -100 to 100, got {v!r}", path=path, field=name)
        if not isinstance(self.strict, bool):
            raise XlvizError(f"must be true or false, got {self.strict!r}", path=path, field="strict")
        if self.doc_stride >= self.qa_max_length:
            raise XlvizError("must be smaller than qa_max_length", path=path, field="doc_stride")
        if isinstance(self.joint_vocab_size, bool) or not isinstance(self.joint_vocab_size, int) or self.joint_vocab_size < 0 \
                or 0 < self.joint_vocab_size < 50:
            raise XlvizError(f"must be 0 (vocab_size) or an integer of at least 50, got {self.joint_vocab_size!r}",
                             path=path, field="joint_vocab_size")
        if isinstance(self.language_alpha, bool) or not isinstance(self.language_alpha, (int, float)) or not 0 <= self.language_alpha <= 1:
            raise XlvizError(f"must be a number in [0, 1], got {self.language_alpha!r}", path=path, field="language_alpha")
        if self.noise_rule not in NOISE_RULES:
            raise XlvizError(f"choose from {list(NOISE_RULES)}, got {self.noise_rule!r}", path=path, field="noise_rule")
        if self.clwe_init not in ("unsupervised", "identical"):
            raise XlvizError("choose from ['unsupervised', 'identical']", path=path, field="clwe_init")
        if self.veco_init not in ("scratch", "jointpair-disjoint"):
            raise XlvizError(f"choose from ['scratch', 'jointpair-disjoint'], got {self.veco_init!r}", path=path, field="veco_init")
        if isinstance(self.veco_ca_steps, bool) or not isinstance(self.veco_ca_steps, int) or self.veco_ca_steps <= 0:
            raise XlvizError(f"must be a positive integer, got {self.veco_ca_steps!r}", path=path, field="veco_ca_steps")
        if self.vocab_size < 50:
            raise XlvizError("must be at least 50", path=path, field="vocab_size")
        self.validate_ppa(path=path)
        self.validate_plastic(path=path)
        from xlviz.methods import method_of, resolve

        self.methods = resolve(self.methods, layers=MODEL_SIZES[self.model_size][0])
        for system in self.methods:
            method_of(system).validate(system, self)
        if not isinstance(self.seed, int):
            raise XlvizError(f"must be an integer, got {self.seed!r}", path=path, field="seed")
        self.world.validate(path=path)
        check_config(self, path=path)

    def validate_ppa(self, *, path: str | None = None) -> None:
        """The ``ppa_`` settings (``ppa_base``'s folder and the queue against the pairs are checked by the
        method, for runs with PPA: xlviz.methods.ppa)."""
        from xlviz.training.ppa import OBJECTIVES

        for name in ("ppa_steps", "ppa_batch_size", "ppa_queue_size", "ppa_projection_dim"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise XlvizError(f"must be a positive integer, got {v!r}", path=path, field=name)
        if isinstance(self.ppa_pairs, bool) or not isinstance(self.ppa_pairs, int) or self.ppa_pairs < 0:
            raise XlvizError(f"must be 0 (every pair of the world) or a positive integer, got {self.ppa_pairs!r}", path=path, field="ppa_pairs")
        if self.ppa_pairs > self.world.parallel_train_pairs:
            raise XlvizError(f"the world has {self.world.parallel_train_pairs} parallel training pairs per L2 (world.parallel_train_pairs), "
                             f"got {self.ppa_pairs}", path=path, field="ppa_pairs")
        if self.ppa_objective not in OBJECTIVES:
            raise XlvizError(f"choose from {list(OBJECTIVES)}, got {self.ppa_objective!r}", path=path, field="ppa_objective")
        for name in ("ppa_lr", "ppa_temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise XlvizError(f"must be a positive number, got {v!r}", path=path, field=name)
        if isinstance(self.ppa_momentum, bool) or not isinstance(self.ppa_momentum, (int, float)) or not 0 <= self.ppa_momentum < 1:
            raise XlvizError(f"must be a number in [0, 1), got {self.ppa_momentum!r}", path=path, field="ppa_momentum")
        if not isinstance(self.ppa_base, str) or not self.ppa_base.strip():
            raise XlvizError("must be a joint system (jointpair-disjoint, jointpair-joint, jointmulti, jointmulti-large) or a model folder",
                             path=path, field="ppa_base")

    def validate_plastic(self, *, path: str | None = None) -> None:
        """The ``forget_every`` and ``wechsel_`` settings."""
        for name, low in (("forget_every", 0), ("wechsel_seed_size", 1), ("wechsel_neighbours", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise XlvizError(f"must be an integer of at least {low}, got {v!r}", path=path, field=name)
        if self.wechsel_dictionary not in ("gold", "seed", "identical"):
            raise XlvizError(f"choose from ['gold', 'seed', 'identical'], got {self.wechsel_dictionary!r}", path=path,
                             field="wechsel_dictionary")
        t = self.wechsel_temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
            raise XlvizError(f"must be a positive number, got {t!r}", path=path, field="wechsel_temperature")

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
