"""Per-language subword vocabularies: each learned on its own language's corpus, sharing
nothing but the special tokens, which have the same ids in every language so that swapping
embeddings in step 4 keeps [PAD], [UNK], [CLS], [SEP], [MASK] in place.

The paper learns SentencePiece unigram models. ``tokenizers``' unigram trainer (0.23) splits
the most frequent words of a small corpus into single characters ("the" -> t h e), which
would cripple the generated world, so the default is WordPiece, BERT's own algorithm;
``algorithm="unigram"`` is available for large real corpora.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from xlviz.errors import XlvizError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
ALGORITHMS = ("wordpiece", "unigram", "bpe")


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 500, *, algorithm: str = "wordpiece", lowercase: bool = True, model_max_length: int = 512
) -> PreTrainedTokenizerFast:
    """Learn a subword vocabulary on ``texts`` and wrap it as a BERT-style fast tokenizer
    (``[CLS] a [SEP] b [SEP]`` with token type ids and character offsets for QA)."""
    if algorithm not in ALGORITHMS:
        raise XlvizError(f"unknown tokenizer algorithm {algorithm!r}; choose from {list(ALGORITHMS)}", field="tokenizer")
    if algorithm == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS)
        tok.decoder = decoders.WordPiece()
    elif algorithm == "bpe":
        tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, continuing_subword_prefix="##")
        tok.decoder = decoders.WordPiece()
    else:
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, unk_token="[UNK]")
        tok.decoder = decoders.Metaspace()
    tok.normalizer = normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else []))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainer=trainer)
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
