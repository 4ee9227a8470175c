"""Tiny random encoders of every supported architecture, saved as real HF folders, for tests.

Why: transfer, attention, alignment and QA code must work on BERT, RoBERTa, XLM-R, DistilBERT
and ELECTRA alike, and the hub is out of reach. ``make_tiny`` builds a model of a few thousand
parameters with a matching tokenizer built here (WordPiece for BERT-style models, byte-level
BPE for RoBERTa, Unigram for XLM-R) and saves both with ``save_pretrained`` (safetensors), so
tests go through exactly the loading path users do. Deterministic (seeded) and fast (well under
a second per model once transformers is imported).

    from tests.tiny_models import make_tiny
    folder = make_tiny("roberta", tmp_path / "rob", task="mlm")
    model, tok = load_model(folder, task="mlm")
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

ARCHS = ("bert", "roberta", "xlm-roberta", "distilbert", "electra")
TASKS = ("mlm", "qa", "base", "pretraining")

DEFAULT_WORDS = (
    "the a cat cats dog dogs sat sits on mat house big small red green is are was were and of to in "
    "who what where when book books reads read river tree trees man men woman women "
    "der die das ein eine katze katzen hund hunde sitzt auf matte haus gross klein rot ist sind und im"
).split()

# Shared tiny sizes; override any of them through make_tiny(**config_overrides).
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


def _wordpiece_vocab(words: Iterable[str]) -> dict[str, int]:
    """[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 (the xlviz convention), then words, subword pieces and punctuation."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = sorted({w.lower() for w in words})
    extra = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"] + ["##s", "##en", "##e"] + list(".,?!'\"-")
    extra += list("abcdefghijklmnopqrstuvwxyz")
    for t in pieces + extra:
        if t not in tokens:
            tokens.append(t)
    return {t: i for i, t in enumerate(tokens)}


def make_tokenizer(arch: str, words: Iterable[str] | None = None):
    """A tokenizer object of the class transformers' AutoTokenizer picks for ``arch``."""
    words = list(words or DEFAULT_WORDS)
    if arch in ("bert", "distilbert", "electra"):
        from transformers import BertTokenizer, DistilBertTokenizer

        cls = DistilBertTokenizer if arch == "distilbert" else BertTokenizer
        return cls(vocab=_wordpiece_vocab(words), do_lower_case=True)
    if arch == "roberta":
        import json

        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
        from transformers import RobertaTokenizer

        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=256 + len(specials) + 64,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        bpe.train_from_iterator([" ".join(words)] * 3, trainer=trainer)
        model = json.loads(bpe.to_str())["model"]
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
        return RobertaTokenizer(vocab=model["vocab"], merges=merges)
    if arch == "xlm-roberta":
        from transformers import XLMRobertaTokenizer

        specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
        pieces = [(f"\u2581{w.lower()}", -2.0) for w in sorted(set(words))]
        chars = sorted({c for w in words for c in w.lower()} | set(".,?!'\"-"))
        pieces += [(c, -5.0) for c in chars] + [("\u2581", -3.0)]
        vocab = specials + pieces + [("<mask>", 0.0)]
        return XLMRobertaTokenizer(vocab=vocab)
    raise ValueError(f"unknown arch {arch!r}; choose from {ARCHS}")


def make_config(arch: str, tokenizer, **overrides):
    """A tiny config whose vocab and special ids match ``tokenizer``."""
    from transformers import BertConfig, DistilBertConfig, ElectraConfig, RobertaConfig, XLMRobertaConfig

    sizes = {**TINY, **overrides}
    ids = dict(pad_token_id=tokenizer.pad_token_id, vocab_size=len(tokenizer))
    if arch == "bert":
        return BertConfig(**ids, **sizes)
    if arch in ("roberta", "xlm-roberta"):
        cls = RobertaConfig if arch == "roberta" else XLMRobertaConfig
        # RoBERTa positions start after padding_idx: keep the same usable length as BERT.
        sizes["max_position_embeddings"] += tokenizer.pad_token_id + 1
        return cls(**ids, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, type_vocab_size=1, **sizes)
    if arch == "distilbert":
        return DistilBertConfig(
            **ids,
            dim=sizes.pop("hidden_size"),
            n_layers=sizes.pop("num_hidden_layers"),
            n_heads=sizes.pop("num_attention_heads"),
            hidden_dim=sizes.pop("intermediate_size"),
            **sizes,
        )
    if arch == "electra":
        sizes.setdefault("embedding_size", sizes["hidden_size"] // 2)
        return ElectraConfig(**ids, **sizes)
    raise ValueError(f"unknown arch {arch!r}; choose from {ARCHS}")


def model_class(arch: str, task: str):
    """The concrete transformers class saved for ``arch`` and ``task``.

    task "pretraining" is BertForPreTraining for BERT and the ELECTRA *discriminator*
    (ElectraForPreTraining, no MLM head) for ELECTRA; "mlm" for ELECTRA is the generator.
    """
    import transformers as tf

    prefix = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta", "distilbert": "DistilBert", "electra": "Electra"}[arch]
    suffix = {"mlm": "ForMaskedLM", "qa": "ForQuestionAnswering", "base": "Model", "pretraining": "ForPreTraining"}[task]
    if task == "pretraining" and arch not in ("bert", "electra"):
        raise ValueError(f"task 'pretraining' exists for bert and electra only, not {arch!r}")
    return getattr(tf, prefix + suffix)


def make_tiny(
    arch: str,
    path: str | Path,
    task: str = "mlm",
    words: Iterable[str] | None = None,
    seed: int = 0,
    save_tokenizer: bool = True,
    **config_overrides,
) -> Path:
    """Build, save and return a folder with a tiny random ``arch`` model for ``task`` plus its tokenizer.

    ``path`` is the folder to create (``tmp_path / "bert"``); if it names an existing folder
    with files, a subfolder ``<arch>-<task>`` is used. ``words`` seeds the vocabulary.
    """
    import torch
    from transformers.utils import logging as hf_logging

    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose from {ARCHS}")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
    folder = Path(path)
    if folder.is_dir() and any(folder.iterdir()):
        folder = folder / f"{arch}-{task}"
    tok = make_tokenizer(arch, words)
    config = make_config(arch, tok, **config_overrides)
    torch.manual_seed(seed)
    model = model_class(arch, task)(config)
    model.eval()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bars in test output
    try:
        model.save_pretrained(folder)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if save_tokenizer:
        tok.save_pretrained(folder)
    return folder


def make_all(path: str | Path, task: str = "mlm") -> dict[str, Path]:
    """One tiny folder per architecture under ``path``: ``{arch: folder}``."""
    return {arch: make_tiny(arch, Path(path) / f"{arch}-{task}", task=task) for arch in ARCHS}
