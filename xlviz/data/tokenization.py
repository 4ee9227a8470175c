"""Per-language subword vocabularies: each learned on its own language's corpus, sharing
nothing but the special tokens, which have the same ids in every language so that swapping
embeddings in step 4 keeps [PAD], [UNK], [CLS], [SEP], [MASK] in place.

The paper learns SentencePiece unigram models. ``tokenizers``' unigram trainer (0.23) splits
the most frequent words of a small corpus into single characters ("the" -> t h e), which
would cripple the generated world, so the default is WordPiece, BERT's own algorithm;
``algorithm="unigram"`` is available for large real corpora.

WordPiece and BPE vocabularies are learned by :mod:`xlviz.data.subword_trainer`, which is
deterministic: ``tokenizers``' own trainers break ties in an order that changes from process
to process, so one seed gave different vocabularies and results from run to run. Unigram
(``tokenizers``' trainer) keeps its learned pieces and ids; its scores are rounded so float
noise does not change the file.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from xlviz.errors import XlvizError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
ALGORITHMS = ("wordpiece", "unigram", "bpe")


def learn_tokenizer(texts: Iterable[str], vocab_size: int, specials: list[str], unk: str, algorithm: str, normalizer, pre_tokenizer) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` with its vocabulary learned on ``texts``, the same in every
    process (see the module docstring); special tokens take ids 0, 1, ... in ``specials`` order."""
    from xlviz.data.subword_trainer import train_model

    if algorithm in ("wordpiece", "bpe"):
        tok = Tokenizer(train_model(texts, vocab_size, specials, unk, algorithm, normalizer, pre_tokenizer))
        tok.decoder = decoders.WordPiece()
    else:
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token=unk, show_progress=False)
        tok.decoder = decoders.Metaspace()
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    if algorithm == "unigram":
        tok.train_from_iterator(texts, trainer=trainer)
        tok = _rounded_unigram(tok)
    return tok


def _rounded_unigram(tok: Tokenizer) -> Tokenizer:
    """The unigram model with its piece scores rounded (float noise differs between processes)."""
    import json

    state = json.loads(tok.to_str())
    state["model"]["vocab"] = [[piece, round(score, 6)] for piece, score in state["model"]["vocab"]]
    return Tokenizer.from_str(json.dumps(state))


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 500, *, algorithm: str = "wordpiece", lowercase: bool = True, model_max_length: int = 512
) -> PreTrainedTokenizerFast:
    """Learn a subword vocabulary on ``texts`` and wrap it as a BERT-style fast tokenizer
    (``[CLS] a [SEP] b [SEP]`` with token type ids and character offsets for QA)."""
    if algorithm not in ALGORITHMS:
        raise XlvizError(f"unknown tokenizer algorithm {algorithm!r}; choose from {list(ALGORITHMS)}", field="tokenizer")
    normalizer = normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else []))
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = learn_tokenizer(texts, vocab_size, SPECIAL_TOKENS, "[UNK]", algorithm, normalizer, pre_tokenizer)
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            raise AssertionError(f"special token {t} must have id {i}")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=model_max_length,
        pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
