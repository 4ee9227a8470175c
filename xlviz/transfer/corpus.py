"""MONOTRANS on real monolingual corpora (``xlviz transfer-corpus``): the generated world's
pipeline with the world replaced by text files.

Stages (a :class:`~xlviz.transfer.pipeline.Pipeline` subclass, so status, resume and logging
are the demo's):

- ``world``: one vocabulary per language learned on its own corpus (``world/tokenizers/<lang>``;
  the L2 vocabulary is shaped like the L1 tokenizer, see :mod:`xlviz.data.vocabulary`) and
  the parallel evaluation pairs (``world/parallel/<l1>-<l2>.jsonl``, the app's attention view
  reads them). With ``init_model`` the L1 tokenizer is that model's.
- ``s1_pretrain``: masked-LM pre-training of a small BERT on the L1 corpus, streamed from the
  files; or, with ``init_model`` ("MONOTRANS on a pre-trained model"), nothing: step 1 *is*
  that model (an English BERT, RoBERTa, ... any encoder with an MLM head).
- ``s1b_mlm_head`` (only when ``init_model`` has no masked-LM head, e.g. the sentence encoder
  all-MiniLM-L6-v2): step 1b learns a BERT MLM head and the ``[MASK]`` input row on the L1
  corpus with the body frozen and the output layer tied to the embeddings
  (:mod:`xlviz.models.mlm_head`), and saves the
  completed step-1 model to ``s1_pretrain/``, where steps 2-4 and the analyses read it.
- ``s2_transfer-<l2>``: the L1 body frozen, new L2 token embeddings learned with MLM on the L2
  corpus (never on parallel text).
- ``alignment``: sentence retrieval per layer on the parallel set, L1 model on the L1 side vs
  the L2 model on the L2 side, for the transferred embeddings (``monotrans``) and for the
  floor (``floor``: the same body with untrained L2 embeddings). ``alignment.json`` holds the
  per-layer numbers; ``results.json`` rows ``{"system", "language", "retrieval",
  "retrieval_layer", ...}`` (percent, like EM/F1): the layer is chosen on one seeded half of the
  pairs and ``retrieval`` is measured on the other half (``retrieval_selection_pairs``,
  ``retrieval_reported_pairs``).
- optional QA (``qa_train``): ``s3_finetune`` on L1 SQuAD-format data with the L1 token
  embeddings frozen, then ``s4_monotrans`` / ``s4_floor`` zero-shot in L1 and L2 on
  ``qa_eval`` files, writing the demo's ``{"system", "language", "exact_match", "f1"}`` rows.

Memory is bounded by the batch and shuffle-buffer sizes: corpora are streamed line by line
(:func:`xlviz.data.real.read_text_corpus` -> :func:`xlviz.training.mlm.iter_blocks`) and never
held in memory. Under ``accelerate launch`` every process reads the same stream and trains on
its slice of each global batch (:mod:`xlviz.transfer.runner`).

Corpus paths are files or globs; ``shared:multi30k/task2/train.*.en.gz`` is resolved in the
shared data folder (``$XLVIZ_SHARED_DATA`` or ``../shared/data``).
"""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch

from xlviz.data.real import read_parallel_lines, read_text_corpus, shared_data_dir
from xlviz.data.vocabulary import special_ids_of, special_row_map, train_tokenizer_like
from xlviz.errors import XlvizError
from xlviz.io import atomic_dir, atomic_write_json
from xlviz.models.monotrans import MODEL_SIZES
from xlviz.transfer.config import MIXED_PRECISION
from xlviz.transfer.runner import ConfigMixin, StagedRun, check_positive, masked_lm_batches

POOLINGS = ("mean", "mean_no_special", "cls")
EMBEDDING_INITS = ("random", "l1_stats")
SYSTEMS = ("monotrans", "floor")


def shared_path(text: str, what: str) -> str:
    """``shared:x/y`` -> the shared data folder's ``x/y`` (files or folders); other paths unchanged."""
    if not str(text).startswith("shared:"):
        return str(text)
    root = shared_data_dir()
    if root is None:
        raise XlvizError("the shared data folder was not found (../shared/data); set XLVIZ_SHARED_DATA", field=what)
    return str(root / str(text)[len("shared:"):])


def resolve_files(patterns: list[str] | str, what: str) -> list[Path]:
    """Files for a list of paths/globs (``shared:`` = the shared data folder), sorted per pattern."""
    if isinstance(patterns, (str, Path)):
        patterns = [str(patterns)]
    files: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if text.startswith("shared:"):
            root = shared_data_dir()
            if root is None:
                raise XlvizError("the shared data folder was not found (../shared/data); set XLVIZ_SHARED_DATA", field=what)
            text = str(root / text[len("shared:"):])
        text = str(Path(text).expanduser())
        found = sorted(Path(p) for p in glob.glob(text)) if glob.has_magic(text) else ([Path(text)] if Path(text).is_file() else [])
        if not found:
            raise XlvizError(f"no {what} file matches {pattern!r}", path=text, field=what)
        files += [f for f in found if f not in files]
    if not files:
        raise XlvizError(f"no {what} files given", field=what)
    return files


@dataclass
class CorpusTransferConfig(ConfigMixin):
    """Everything needed to reproduce a real-corpus MONOTRANS run."""

    name: str = "corpus-transfer"
    seed: int = 0
    l1: str = "en"
    l2: str = "de"
    l1_corpus: list[str] = field(default_factory=list)  # files/globs; not needed with init_model (unless QA-only)
    l2_corpus: list[str] = field(default_factory=list)
    parallel: list[str] | None = None  # [l1 file, l2 file], line-aligned: evaluation only
    parallel_max: int = 1000
    init_model: str | None = None  # step 1 from this folder / hub id instead of pre-training here
    model_size: str = "small"  # of the BERT pre-trained here (xlviz.models.monotrans.MODEL_SIZES)
    dropout: float = 0.0
    vocab_size: int = 8000  # L1 vocabulary learned here (ignored with init_model)
    l2_vocab_size: int | None = None  # default: vocab_size
    tokenizer: str = "wordpiece"  # wordpiece | unigram | bpe
    lowercase: bool = True
    tokenizer_lines: int = 100_000  # lines per language used to learn a vocabulary
    max_lines: int | None = None  # lines per language streamed for MLM (None: whole corpus, epoch after epoch)
    block_size: int = 64
    shuffle_buffer: int = 4096  # blocks held for shuffling (memory bound)
    mask_prob: float = 0.15  # share of tokens predicted in MLM (steps 1 and 2)
    batch_size: int = 64  # global blocks per optimizer step
    pretrain_steps: int = 1000
    pretrain_lr: float = 5e-4
    mlm_head_steps: int = 300  # step 1b, only when init_model has no MLM head
    mlm_head_lr: float = 1e-3
    mlm_head_mask_row: bool = True  # step 1b also learns the [MASK] input row (a sentence encoder never read it)
    mlm_head_top_layers: int = 0  # step 1b also trains the body's last K layers (a deviation from the paper)
    transfer_steps: int = 1000
    transfer_lr: float = 2e-3
    embedding_init: str = "random"  # random (paper) | l1_stats (Gaussian with L1 embeddings' mean/std)
    eval_pooling: str = "mean_no_special"
    eval_max_length: int = 64
    qa_train: str | None = None  # L1 SQuAD-format file: enables steps 3-4
    qa_train_paragraphs: int | None = None
    qa_train_articles: int | None = None  # instead: this many whole articles (no article in both train and evaluation)
    qa_eval: list[str] = field(default_factory=list)  # files / folders of <name>.<lang>.json (l1 and l2 used)
    finetune_steps: int = 300
    finetune_lr: float = 1e-4
    qa_batch_size: int = 16
    qa_max_length: int = 256
    doc_stride: int = 128
    mixed_precision: str = "no"
    grad_accum: int = 1
    log_every: int = 10

    def validate(self, *, path: str | None = None) -> None:
        check_positive(self, ("parallel_max", "vocab_size", "tokenizer_lines", "block_size", "shuffle_buffer", "batch_size",
                              "pretrain_steps", "mlm_head_steps", "transfer_steps", "eval_max_length", "finetune_steps", "qa_batch_size",
                              "qa_max_length", "doc_stride", "grad_accum", "log_every"), path)
        check_positive(self, ("pretrain_lr", "mlm_head_lr", "transfer_lr", "finetune_lr"), path, number=True)
        if isinstance(self.mlm_head_top_layers, bool) or not isinstance(self.mlm_head_top_layers, int) or self.mlm_head_top_layers < 0:
            raise XlvizError(f"must be a whole number >= 0, got {self.mlm_head_top_layers!r}", path=path, field="mlm_head_top_layers")
        if not isinstance(self.mlm_head_mask_row, bool):
            raise XlvizError(f"must be true or false, got {self.mlm_head_mask_row!r}", path=path, field="mlm_head_mask_row")
        for name in ("l1_corpus", "l2_corpus", "qa_eval"):
            if isinstance(getattr(self, name), str):
                setattr(self, name, [getattr(self, name)])
        if not self.l2_corpus:
            raise XlvizError("no L2 corpus given", path=path, field="l2_corpus")
        if not self.l1_corpus and not self.init_model:
            raise XlvizError("give an L1 corpus to pre-train on, or init_model to start from", path=path, field="l1_corpus")
        if self.l1 == self.l2 or not self.l1 or not self.l2 or "-" in self.l2:
            raise XlvizError("l1 and l2 must be two different language codes without '-'", path=path, field="l2")
        if self.parallel is not None and (not isinstance(self.parallel, list) or len(self.parallel) != 2):
            raise XlvizError("expected two files [l1 side, l2 side]", path=path, field="parallel")
        if self.l2_vocab_size is not None:
            check_positive(self, ("l2_vocab_size",), path)
        if self.max_lines is not None:
            check_positive(self, ("max_lines",), path)
        if self.qa_train_paragraphs is not None:
            check_positive(self, ("qa_train_paragraphs",), path)
        if self.qa_train_articles is not None:
            check_positive(self, ("qa_train_articles",), path)
            if self.qa_train_paragraphs is not None:
                raise XlvizError("give qa_train_paragraphs or qa_train_articles, not both", path=path, field="qa_train_articles")
        if self.model_size not in MODEL_SIZES:
            raise XlvizError(f"unknown model size {self.model_size!r}; choose from {list(MODEL_SIZES)}", path=path, field="model_size")
        if self.tokenizer not in ("wordpiece", "unigram", "bpe"):
            raise XlvizError("choose from wordpiece, unigram, bpe", path=path, field="tokenizer")
        if self.mixed_precision not in MIXED_PRECISION:
            raise XlvizError(f"choose from {list(MIXED_PRECISION)}", path=path, field="mixed_precision")
        if self.eval_pooling not in POOLINGS:
            raise XlvizError(f"choose from {list(POOLINGS)}", path=path, field="eval_pooling")
        if self.embedding_init not in EMBEDDING_INITS:
            raise XlvizError(f"choose from {list(EMBEDDING_INITS)}", path=path, field="embedding_init")
        if not 0.0 < float(self.mask_prob) < 1.0:
            raise XlvizError("must be between 0 and 1", path=path, field="mask_prob")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise XlvizError("must be in [0, 1)", path=path, field="dropout")
        if self.doc_stride >= self.qa_max_length:
            raise XlvizError("must be smaller than qa_max_length", path=path, field="doc_stride")
        if self.qa_train and not self.qa_eval:
            raise XlvizError("qa_train needs qa_eval files (L1 and/or L2 SQuAD-format files)", path=path, field="qa_eval")


def retrieval_ranks(X, Y) -> tuple:
    """Rank (1 = nearest) of each row's translation among all rows of the other side, by
    cosine after centring, in both directions: (ranks X->Y, ranks Y->X). For top-k and MRR."""
    import numpy as np

    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    Y /= np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
    sims = X @ Y.T
    gold = np.diag(sims)

    def ranks(s):  # ties count half: the expected rank under random tie-breaking
        return 1 + (s > gold[:, None]).sum(1) + 0.5 * ((s == gold[:, None]).sum(1) - 1)

    return ranks(sims), ranks(sims.T)


def held_out_layer(emb_a, emb_b, seed: int) -> dict:
    """The retrieval layer chosen on one half of the pairs, its retrieval reported on the other.

    Why: the best of several layers, picked and reported on the same pairs, is biased upwards
    (the maximum of noisy estimates). The halves come from a permutation seeded with ``seed``;
    retrieval (centred, mean of both directions) searches among the half's own pairs. Returns
    ``{"layer", "retrieval", "selection_pairs", "reported_pairs", "selection_per_layer",
    "reported_per_layer"}`` (fractions)."""
    import numpy as np

    from xlviz.analysis.alignment import layerwise_alignment

    A, B = np.asarray(emb_a), np.asarray(emb_b)
    n = A.shape[1]
    if n < 4:
        raise XlvizError(f"choosing the retrieval layer on held-out pairs needs at least 4 parallel pairs, got {n}", field="parallel")
    order = np.random.default_rng(seed).permutation(n)
    halves = np.sort(order[: n // 2]), np.sort(order[n // 2:])
    selection, reported = ([(r["retrieval_a_to_b"] + r["retrieval_b_to_a"]) / 2 for r in layerwise_alignment(A[:, h], B[:, h], center=True)]
                           for h in halves)
    layer = int(np.argmax(selection))
    return {"layer": layer, "retrieval": reported[layer], "selection_pairs": len(halves[0]), "reported_pairs": len(halves[1]),
            "selection_per_layer": selection, "reported_per_layer": reported}


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


def _streamed(blocks: Iterator[list[int]], lang: str) -> Iterator[list[int]]:
    try:
        yield from blocks
    except ValueError as e:  # iter_blocks: corpus too small for one block (of block_size tokens)
        raise XlvizError(f"{lang} corpus: {getattr(e, 'message', e)}", field=f"{lang}_corpus") from None


class CorpusPipeline(StagedRun):
    """``CorpusPipeline(CorpusTransferConfig(...), run_dir).run_all()``; ``.resume(run_dir)``."""

    config_class = CorpusTransferConfig

    # --- plan -------------------------------------------------------------------------
    def plan(self) -> list[str]:
        stages = ["world", "s1_pretrain"] + (["s1b_mlm_head"] if self.needs_mlm_head() else []) + [f"s2_transfer-{self.cfg.l2}"]
        if self.cfg.parallel:
            stages.append("alignment")
        if self.cfg.qa_train:
            stages += ["s3_finetune"] + [f"s4_{s}" for s in SYSTEMS]
        return stages

    def run_stage(self, stage: str) -> None:
        if stage == "world":
            return self.stage_world()
        if stage == "s1_pretrain":
            return self.stage_pretrain()
        if stage == "s1b_mlm_head":
            return self.stage_mlm_head()
        if stage.startswith("s2_transfer-"):
            return self.stage_transfer(stage[len("s2_transfer-"):], "")
        if stage == "alignment":
            return self.stage_alignment()
        if stage == "s3_finetune":
            return self.stage_finetune("")
        if stage.startswith("s4_"):
            return self.stage_evaluate(stage[3:])
        raise XlvizError(f"unknown stage {stage!r}")

    # --- inputs -----------------------------------------------------------------------
    def corpus_files(self, lang: str) -> list[Path]:
        files = resolve_files(self.cfg.l1_corpus if lang == self.cfg.l1 else self.cfg.l2_corpus, f"{lang} corpus")
        if self.cfg.parallel:
            held_out = {p.resolve() for p in resolve_files(self.cfg.parallel, "parallel")}
            leaked = [f for f in files if f.resolve() in held_out]
            if leaked:
                raise XlvizError("the parallel evaluation file is also a training corpus file", path=leaked[0], field=f"{lang}_corpus")
        return files

    def texts(self, lang: str, max_lines: int | None) -> Callable[[], Iterator[str]]:
        """A callable returning a fresh line stream over the language's corpus files."""
        files = self.corpus_files(lang)
        return lambda: read_text_corpus(files, max_lines=max_lines)

    def parallel_pairs(self) -> list[tuple[str, str]]:
        a, b = resolve_files(self.cfg.parallel, "parallel")
        return read_parallel_lines(a, b, max_lines=self.cfg.parallel_max)

    def needs_mlm_head(self) -> bool:
        """Step 1b: ``init_model`` is a local BERT folder whose weights have no masked-LM head."""
        from xlviz.models.mlm_head import learns_mlm_head

        return bool(self.cfg.init_model) and learns_mlm_head(self.cfg.init_model)

    def l1_dir(self) -> str | Path:
        return self.cfg.init_model if self.cfg.init_model and not self.needs_mlm_head() else self.path("s1_pretrain")

    def load_l1(self):
        """(L1 masked LM, L1 tokenizer) in eval mode on CPU."""
        from xlviz.models.loading import load_model

        return load_model(self.l1_dir(), task="mlm", attn_implementation="sdpa", tokenizer=self.path("world", "tokenizers", self.cfg.l1))

    def special_rows(self, l1_tok, l2_tok) -> dict[int, int]:
        return special_row_map(l1_tok, l2_tok)

    def new_l2_model(self, l1, l1_tok, l2_tok):
        """Step 2's starting point, and (untrained) the floor: same seed, same init."""
        from xlviz.models.monotrans import make_l2_mlm
        from xlviz.models.surgery import ROBERTA_LIKE, word_embeddings

        if l1.config.model_type in ROBERTA_LIKE and l2_tok.pad_token_id != l1.config.pad_token_id:
            raise XlvizError(f"the {self.cfg.l2} tokenizer pads with id {l2_tok.pad_token_id} but the L1 model's positions assume "
                             f"{l1.config.pad_token_id}; learn the L2 vocabulary with train_tokenizer_like(reference=L1 tokenizer)")
        overrides = {"pad_token_id": l2_tok.pad_token_id}
        model = make_l2_mlm(l1, len(l2_tok), seed=self.cfg.seed + 1, special_rows=self.special_rows(l1_tok, l2_tok),
                            config_overrides=overrides)
        if self.cfg.embedding_init == "l1_stats":
            special = special_ids_of(l2_tok)
            src = word_embeddings(l1).weight.detach().float()
            keep = torch.ones(len(src), dtype=torch.bool)
            keep[special_ids_of(l1_tok)] = False
            mean, std = src[keep].mean(0), src[keep].std(0)
            g = torch.Generator().manual_seed(self.cfg.seed + 2)
            w = word_embeddings(model).weight
            rows = [i for i in range(w.shape[0]) if i not in set(special)]
            with torch.no_grad():
                w[rows] = (mean + std * torch.randn(len(rows), w.shape[1], generator=g)).to(w.dtype)
        return model

    # --- stages -----------------------------------------------------------------------
    def stage_world(self) -> None:
        """Learn one vocabulary per language on its own corpus; write the parallel pairs."""
        if not self.main:
            return
        cfg = self.cfg
        max_len = max(cfg.block_size, cfg.qa_max_length, cfg.eval_max_length)
        if cfg.init_model:
            from xlviz.models.loading import load_model

            # refuses models without an MLM head here, not later (unless step 1b learns one)
            model, l1_tok = load_model(cfg.init_model, task="base" if self.needs_mlm_head() else "mlm")
            self._log(f"  step 1 is {cfg.init_model} ({type(model).__name__}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)")
            del model
        else:
            from xlviz.data.tokenization import train_tokenizer

            l1_tok = train_tokenizer(self.texts(cfg.l1, cfg.tokenizer_lines)(), cfg.vocab_size, algorithm=cfg.tokenizer,
                                     lowercase=cfg.lowercase, model_max_length=max_len)
        l2_tok = train_tokenizer_like(self.texts(cfg.l2, cfg.tokenizer_lines)(), cfg.l2_vocab_size or cfg.vocab_size, l1_tok,
                                      algorithm=cfg.tokenizer, lowercase=cfg.lowercase,
                                      model_max_length=min(max_len, l1_tok.model_max_length or max_len))
        for lang, tok in ((cfg.l1, l1_tok), (cfg.l2, l2_tok)):
            with atomic_dir(self.path("world", "tokenizers", lang)) as tmp:
                tok.save_pretrained(tmp)
            self._log(f"  {lang}: vocabulary of {len(tok)} subwords")
        if cfg.parallel:
            pairs = self.parallel_pairs()
            lines = "".join(json.dumps({"id": str(i), "src": a, "tgt": b}, ensure_ascii=False) + "\n" for i, (a, b) in enumerate(pairs))
            from xlviz.io import atomic_write_text

            atomic_write_text(self.path("world", "parallel", f"{cfg.l1}-{cfg.l2}.jsonl"), lines)
            self._log(f"  {len(pairs)} parallel {cfg.l1}-{cfg.l2} pairs for evaluation")

    def _stream_mlm(self, model, tok, lang: str, stage: str, steps: int, lr: float):
        """Masked-LM training of ``model`` on ``lang``'s corpus, streamed; returns the model."""
        from xlviz.models.surgery import MaskedOnlyLoss
        from xlviz.training.loop import train
        from xlviz.training.mlm import iter_blocks

        cfg = self.cfg
        salt = 0 if lang == cfg.l1 else 1
        blocks = _streamed(iter_blocks(self.texts(lang, cfg.max_lines), tok, cfg.block_size, seed=cfg.seed * 2 + salt,
                                       shuffle_buffer=cfg.shuffle_buffer), lang)
        batches = masked_lm_batches(
            blocks, batch_size=cfg.batch_size, rank=self.acc.process_index, world_size=self.acc.num_processes,
            grad_accum=cfg.grad_accum, mask_id=tok.mask_token_id, vocab_size=min(len(tok), model.config.vocab_size),
            special_ids=special_ids_of(tok), seed=cfg.seed * 2 + salt, prob=cfg.mask_prob,
        )
        loop, on_log = self._loop(stage, steps, lr)
        wrapped = train(MaskedOnlyLoss(model), batches, loop, self.acc, on_log=on_log, desc=stage)
        self.acc.free_memory()
        return wrapped.model

    def stage_pretrain(self) -> None:
        """Step 1: MLM pre-training of a small BERT on the L1 corpus (nothing with init_model)."""
        cfg = self.cfg
        if cfg.init_model:
            self._log(f"  step 1 taken from {cfg.init_model}")
            return
        from transformers import BertForMaskedLM

        from xlviz.models.monotrans import bert_config

        tok = self.tokenizer(cfg.l1)
        size = max(cfg.block_size, cfg.qa_max_length, cfg.eval_max_length)
        model = BertForMaskedLM(bert_config(len(tok), cfg.model_size, max_position_embeddings=size, dropout=cfg.dropout))
        model = self._stream_mlm(model, tok, cfg.l1, "s1_pretrain", cfg.pretrain_steps, cfg.pretrain_lr)
        self._save(model, self.path("s1_pretrain"), tok, language=self.cfg.l1, role="pretrained")

    def stage_mlm_head(self) -> None:
        """Step 1b: learn an MLM head for ``init_model`` on the L1 corpus, body and embeddings
        frozen, output layer tied to the embeddings; the result is the run's step-1 model."""
        from xlviz.models.mlm_head import freeze_for_head, mlm_from_encoder

        cfg = self.cfg
        if not cfg.l1_corpus:
            raise XlvizError(f"{cfg.init_model} has no masked-LM head: step 1b learns one on an L1 corpus; give l1_corpus",
                             field="l1_corpus")
        model, tok = mlm_from_encoder(cfg.init_model, tokenizer=self.path("world", "tokenizers", cfg.l1))
        trainable = freeze_for_head(model, mask_id=tok.mask_token_id if cfg.mlm_head_mask_row else None,
                                    top_layers=cfg.mlm_head_top_layers)
        self._log(f"  step 1b: training {', '.join(trainable)} (the rest of the body and the tied output layer frozen)")
        model = self._stream_mlm(model, tok, cfg.l1, "s1b_mlm_head", cfg.mlm_head_steps, cfg.mlm_head_lr)
        self._save(model, self.path("s1_pretrain"), tok, language=self.cfg.l1, role="pretrained")

    def stage_transfer(self, lang: str, variant: str) -> None:
        """Step 2: freeze the L1 body, learn L2 token embeddings with MLM on the L2 corpus."""
        from xlviz.models.monotrans import freeze_for_step2

        l1, l1_tok = self.load_l1()
        l2_tok = self.tokenizer(lang)
        model = self.new_l2_model(l1, l1_tok, l2_tok)
        del l1
        trainable = freeze_for_step2(model, special_ids=special_ids_of(l2_tok))
        self._log(f"  training {', '.join(trainable)}")
        stage = f"s2_transfer-{lang}"
        model = self._stream_mlm(model, l2_tok, lang, stage, self.cfg.transfer_steps, self.cfg.transfer_lr)
        self._save(model, self.path(stage), l2_tok, language=lang, role="transferred")

    def l2_models(self, l1, l1_tok) -> dict[str, tuple]:
        """``{system: (L2 masked LM, L2 tokenizer)}`` for monotrans and floor."""
        from xlviz.models.loading import load_model

        l2_tok = self.tokenizer(self.cfg.l2)
        mono, _ = load_model(self.path(f"s2_transfer-{self.cfg.l2}"), task="mlm", attn_implementation="sdpa")
        return {"monotrans": (mono, l2_tok), "floor": (self.new_l2_model(l1, l1_tok, l2_tok).eval(), l2_tok)}

    def stage_alignment(self) -> None:
        """Sentence retrieval per layer on the parallel set: transferred vs untrained L2 embeddings.
        The reported retrieval is at the layer chosen on the other half of the pairs (:func:`held_out_layer`)."""
        if not self.main:
            return
        import numpy as np

        from xlviz.analysis.alignment import layerwise_alignment
        from xlviz.analysis.representations import sentence_embeddings

        cfg = self.cfg
        pairs = self.parallel_pairs()
        src, tgt = [a for a, _ in pairs], [b for _, b in pairs]
        l1, l1_tok = self.load_l1()
        kw = dict(pooling=cfg.eval_pooling, max_length=cfg.eval_max_length, batch_size=64)
        emb_l1 = sentence_embeddings(l1, l1_tok, src, **kw)
        out = {"l1": cfg.l1, "l2": cfg.l2, "n_pairs": len(pairs), "pooling": cfg.eval_pooling, "chance": 1 / len(pairs),
               "parallel": [str(p) for p in resolve_files(cfg.parallel, "parallel")], "systems": {},
               "layer_selection": {}}
        rows = []
        for system, (model, tok) in self.l2_models(l1, l1_tok).items():
            emb = sentence_embeddings(model, tok, tgt, **kw)
            centred = layerwise_alignment(emb_l1, emb, center=True)
            raw = layerwise_alignment(emb_l1, emb, center=False)
            layers = []
            for c, r in zip(centred, raw):
                ranks = retrieval_ranks(emb_l1[c["layer"]], emb[c["layer"]])
                layers.append({"layer": c["layer"], "l1_to_l2": c["retrieval_a_to_b"], "l2_to_l1": c["retrieval_b_to_a"],
                               "mean": (c["retrieval_a_to_b"] + c["retrieval_b_to_a"]) / 2, "cka": c["cka"],
                               "top10": float(sum((rk <= 10).mean() for rk in ranks) / 2),
                               "mrr": float(sum((1.0 / rk).mean() for rk in ranks) / 2),
                               "median_rank": float(sum(float(np.median(rk)) for rk in ranks) / 2),
                               "l1_to_l2_uncentred": r["retrieval_a_to_b"], "l2_to_l1_uncentred": r["retrieval_b_to_a"]})
            out["systems"][system] = layers
            # the headline figure: the layer chosen on one seeded half, retrieval on the other half
            best = held_out_layer(emb_l1, emb, seed=cfg.seed)
            out["layer_selection"][system] = best
            rows.append({"system": system, "language": cfg.l2, "retrieval": round(100 * best["retrieval"], 2),
                         "retrieval_layer": best["layer"], "retrieval_selection_pairs": best["selection_pairs"],
                         "retrieval_reported_pairs": best["reported_pairs"],
                         "retrieval_per_layer": [round(100 * x["mean"], 2) for x in layers],
                         "retrieval_top10_per_layer": [round(100 * x["top10"], 2) for x in layers]})
            self._log(f"  {system}: retrieval (mean of both directions, centred) per layer "
                      + " ".join(f"{100 * x['mean']:.1f}" for x in layers) + f"; layer {best['layer']} chosen on "
                      + f"{best['selection_pairs']} pairs gives {100 * best['retrieval']:.1f} on the other {best['reported_pairs']}; "
                      + "top-10 " + " ".join(f"{100 * x['top10']:.1f}" for x in layers))
        atomic_write_json(self.path("alignment.json"), out)
        self.add_result_fields(rows)

    # --- optional QA (steps 3-4) -----------------------------------------------------
    def qa_data(self):
        from xlviz.data.squad import read_squad_json
        from xlviz.transfer.qa import paragraph_split

        if self.cfg.qa_train_articles is not None:
            return article_split(read_squad_json(shared_path(self.cfg.qa_train, "qa_train")), self.cfg.qa_train_articles, self.cfg.seed)
        return paragraph_split(read_squad_json(shared_path(self.cfg.qa_train, "qa_train")), self.cfg.qa_train_paragraphs, self.cfg.seed)

    def stage_finetune(self, variant: str) -> None:
        """Step 3: QA fine-tuning on L1 with the L1 token embeddings frozen (special rows train)."""
        from xlviz.data.squad import squad_examples
        from xlviz.models.monotrans import freeze_for_step3, qa_from_mlm
        from xlviz.transfer.qa import repair_answer_starts, train_qa

        cfg = self.cfg
        self.micro_batch(cfg.qa_batch_size)
        l1, l1_tok = self.load_l1()
        model = qa_from_mlm(l1, seed=cfg.seed + 3)
        del l1
        freeze_for_step3(model, special_ids=special_ids_of(l1_tok))
        data, ids = self.qa_data()
        data, repaired, dropped = repair_answer_starts(data)
        examples = squad_examples(data)
        self._log(f"  {len(examples)} training questions ({repaired} offsets repaired, {dropped} dropped)")
        _, on_log = self._loop("s3_finetune", cfg.finetune_steps, cfg.finetune_lr)
        model = train_qa(model, l1_tok, examples, accelerator=self.acc, steps=cfg.finetune_steps, lr=cfg.finetune_lr,
                         batch_size=cfg.qa_batch_size, grad_accum=cfg.grad_accum, max_length=cfg.qa_max_length,
                         doc_stride=cfg.doc_stride, seed=cfg.seed + 5, log_every=cfg.log_every, on_log=on_log, desc="s3_finetune")
        self._save(model, self.path("s3_finetune"), l1_tok, language=self.cfg.l1, role="finetuned")

    def stage_evaluate(self, system: str) -> None:
        """Step 4: zero-shot QA in L1 and L2; export each model, predictions and result rows."""
        from xlviz.data.squad import read_squad_json
        from xlviz.models.loading import load_model
        from xlviz.models.monotrans import zero_shot_model
        from xlviz.evaluation.squad_metric import mlqa_languages
        from xlviz.transfer.qa import evaluate_qa, qa_files, squad_subset

        cfg = self.cfg
        files = qa_files([shared_path(f, "qa_eval") for f in cfg.qa_eval])
        langs = [lang for lang in (cfg.l1, cfg.l2) if lang in files]
        if not langs:
            raise XlvizError(f"no {cfg.l1} or {cfg.l2} file among the QA evaluation files {sorted(files)}", field="qa_eval")
        train_ids = self.qa_data()[1]
        qa, l1_tok = load_model(self.path("s3_finetune"), task="qa", attn_implementation="sdpa")
        l1 = l2_models = None
        rows = []
        for lang in langs:
            if lang == cfg.l1:
                model, tok = qa, l1_tok
            else:
                if l2_models is None:
                    l1, l1_mlm_tok = self.load_l1()
                    l2_models = self.l2_models(l1, l1_mlm_tok)
                l2, tok = l2_models[system]
                model = zero_shot_model(qa, l2, special_rows=self.special_rows(l1_tok, tok))
            data = squad_subset(read_squad_json(files[lang]), lambda qid: qid not in train_ids)
            model.to(self.acc.device)
            # real languages are scored as MLQA's script scores them (official v1.1 kept beside)
            scores, preds = evaluate_qa(model, tok, data, accelerator=self.acc, max_length=cfg.qa_max_length,
                                        doc_stride=cfg.doc_stride, batch_size=64,
                                        language=lang if lang in mlqa_languages() else None)
            model.to("cpu")
            if self.main:
                self.write_predictions(system, lang, preds, setting="zero-shot")
                self.save_artefact(model, tok, "export", system, lang, role="qa", setting="zero-shot")
                rows.append({"system": system, "language": lang, "exact_match": round(scores["exact_match"], 4),
                             "f1": round(scores["f1"], 4), "n_questions": scores["n_questions"],
                             **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in scores.items()
                                if k in ("exact_match_v11", "f1_v11", "normalisation")}})
                self._log(f"  {system} {lang}: EM {scores['exact_match']:.1f} F1 {scores['f1']:.1f} ({scores['n_questions']} questions)")
        self.add_result_fields(rows)


def run_corpus_transfer(config: CorpusTransferConfig, run_dir: str | Path) -> list[dict]:
    return CorpusPipeline(config, run_dir).run_all()


__all__ = ["CorpusTransferConfig", "CorpusPipeline", "resolve_files", "run_corpus_transfer"]
