"""Masked-LM data and loss.

Texts are streamed, tokenized in chunks, packed into full blocks (``[CLS] ... [SEP]``, no
padding) and shuffled through a bounded buffer, so memory depends on the batch and buffer
sizes, never on the corpus size. Each process of a multi-process run keeps every
``world_size``-th block.

The loss computes vocabulary logits, and the last encoder layer's queries and feed-forward
block, only at masked positions (~15% of tokens), which is what makes it cheaper than a
plain ``BertForMaskedLM`` forward with ``labels``.
"""

from __future__ import annotations

import random
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward

from xlviz.errors import XlvizError
from xlviz.training.loop import BF16_ATTENTION
from xlviz.training.masking import MASK_PROBABILITY, RANDOM_SHARE
from xlviz.training.streamed import replaced_positions


def iter_blocks(
    texts: Callable[[], Iterable[str]],
    tokenizer,
    block_size: int,
    *,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
    shuffle_buffer: int = 2048,
    chunk: int = 512,
    epochs: int | None = None,
    field: str = "block_size",
) -> Iterator[list[int]]:
    """Yield packed token blocks forever (or for ``epochs`` passes over ``texts()``); a corpus
    too small for one block is an XlvizError naming ``field``, the setting that sized it."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    body = block_size - 2
    rng = random.Random(seed)
    buffer: list[list[int]] = []
    index = 0  # global block counter: block i belongs to process i % world_size
    epoch = 0

    def chunks() -> Iterator[list[str]]:
        lines: list[str] = []
        for text in texts():
            lines.append(text)
            if len(lines) == chunk:
                yield lines
                lines = []
        if lines:
            yield lines

    while epochs is None or epoch < epochs:
        stream: list[int] = []
        produced = False
        for lines in chunks():
            for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]:
                stream.extend(ids)
                stream.append(sep)
            n_blocks = len(stream) // body
            for k in range(n_blocks):
                if index % world_size == rank:
                    buffer.append([cls] + stream[k * body:(k + 1) * body] + [sep])
                    produced = True
                index += 1
                if len(buffer) >= shuffle_buffer:
                    yield buffer.pop(rng.randrange(len(buffer)))
            stream = stream[n_blocks * body:]
        rng.shuffle(buffer)
        while buffer:
            yield buffer.pop()
        if not produced:
            # an XlvizError (a ValueError) naming the setting: a documented block size can still
            # exceed what a small corpus yields, and that is the user's to change, not a crash
            raise XlvizError(f"corpus too small: not one block of {block_size} tokens; lower {field} or use a larger corpus",
                             field=field)
        epoch += 1


def iter_batches(blocks: Iterator[list[int]], batch_size: int) -> Iterator[torch.Tensor]:
    while True:
        rows = []
        for _ in range(batch_size):
            try:
                rows.append(next(blocks))
            except StopIteration:
                if rows:
                    yield torch.tensor(rows)
                return
        yield torch.tensor(rows)


def is_long_step(step: int, share: float) -> bool:
    """Whether batch ``step`` (0-based) of :func:`mlm_batches` holds long blocks: the long
    batches are spread evenly, the k-th at the first step where ``(step + 1) * share`` reaches
    k, so any run of n steps holds ``n * share`` of them, give or take one."""
    return share > 0 and int((step + 1) * share + 1e-9) > int(step * share + 1e-9)


def mlm_batches(
    texts: Callable[[], Iterable[str]],
    tokenizer,
    block_size: int,
    batch_size: int,
    *,
    long_block_size: int = 0,
    long_share: float = 0.0,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[torch.Tensor]:
    """Masked-LM batches of packed ``block_size``-token blocks, of which a ``long_share`` (spread
    evenly, :func:`is_long_step`) hold ``long_block_size``-token blocks instead.

    Why: a model trained on short blocks only never trains the position embeddings past
    ``block_size``, yet QA inputs reach the longest position. BERT pre-trained 90% of its steps
    at 128 tokens and 10% at 512 for this reason (Devlin et al. 2019, App. A.2). A long batch
    holds about as many tokens as a short one (fewer blocks), so a step costs about the same
    and the optimiser sees the same number of tokens. ``long_share`` 0 gives exactly the short
    stream (``iter_batches(iter_blocks(...))`` with the same seed)."""
    short = iter_batches(iter_blocks(texts, tokenizer, block_size, seed=seed, rank=rank, world_size=world_size), batch_size)
    if long_share <= 0 or long_block_size <= block_size:
        yield from short
        return
    long_batch = max(1, round(batch_size * block_size / long_block_size))
    long = iter_batches(iter_blocks(texts, tokenizer, long_block_size, seed=seed + 1, rank=rank, world_size=world_size,
                                    field="long_block_share"), long_batch)
    step = 0
    while True:
        try:
            yield next(long if is_long_step(step, long_share) else short)
        except StopIteration:
            return
        step += 1


def mask_tokens(
    input_ids: torch.Tensor, *, mask_id: int, vocab_size: int, n_special: int = 5, prob: float = MASK_PROBABILITY, generator: torch.Generator | None = None,
    candidates: torch.Tensor | None = None, random_share: float = RANDOM_SHARE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: ``prob`` of the non-special tokens become targets; of those 80% -> [MASK],
    10% -> a random token, 10% unchanged. Returns (inputs, labels with -100 elsewhere).
    ``candidates`` (bool, the shape of the ids) says which positions may be masked, for
    vocabularies whose special tokens are not the first ``n_special`` ids. ``random_share`` is the
    random token's share (``mlm_random_share``); the unchanged share stays 10%, the rest are
    [MASK]. The generator draws the same numbers at any share, so two shares at one seed pick
    the same targets."""
    ids = input_ids.clone()
    labels = input_ids.clone()
    candidates = ids >= n_special if candidates is None else candidates
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & candidates
    labels[~chosen] = -100
    roll = torch.rand(ids.shape, generator=generator)
    mask_pos, rand_pos = replaced_positions(chosen, roll, random_share)
    ids[mask_pos] = mask_id
    ids[rand_pos] = torch.randint(n_special, vocab_size, ids.shape, generator=generator)[rand_pos]
    return ids, labels


MASKED_ROW_BUCKET = 64
# Attention functions that take fewer queries than keys with a [B, 1, Lq, Lk] (or
# broadcastable) mask; others (flash attention's 2-D padding mask) get the full last layer.
ROW_ATTENTION = {"eager", "sdpa", BF16_ATTENTION}


class MaskedOnlyMLM(nn.Module):
    """Wraps a BERT-style ``*ForMaskedLM`` so the forward pass returns the MLM loss computed
    only where the loss looks: vocabulary logits at the masked positions (~15% of tokens), and
    the last encoder layer's queries, attention output and feed-forward block at those rows
    too (its keys and values still cover every position). Loss and gradients equal the
    model's own ``labels=`` loss (tested); the work of the last layer and the output layer
    drops by ~85%. Wrapping (not calling ``model.bert`` from outside) keeps
    DistributedDataParallel's gradient sync intact. Falls back to the model's own loss for
    architectures without a BERT head, and to a full last layer for BERT decoders and for
    attention functions outside :data:`ROW_ATTENTION`."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.fast = hasattr(model, "bert") and hasattr(model, "cls")
        config = getattr(model, "config", None)
        self.last_layer_at_rows = self.fast and not (config.is_decoder or getattr(config, "add_cross_attention", False))

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.fast:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        if self.last_layer_at_rows and self.model.config._attn_implementation in ROW_ATTENTION:
            hidden, targets = self._masked_hidden(input_ids, labels, attention_mask)
        else:
            full = self.model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            index, targets = masked_rows(labels)
            hidden = full.reshape(-1, full.size(-1))[index]
        return F.cross_entropy(self.model.cls(hidden).float(), targets)

    def _masked_hidden(self, input_ids, labels, attention_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """BertModel's forward up to the last layer, then the last layer at the masked rows:
        (their hidden states, bucketed as in :func:`masked_rows`; their labels)."""
        bert = self.model.bert
        hidden = bert.embeddings(input_ids=input_ids)
        mask, _ = bert._create_attention_masks(attention_mask=attention_mask, encoder_attention_mask=None,
                                               embedding_output=hidden, encoder_hidden_states=None, past_key_values=None)
        *body, last = bert.encoder.layer
        for layer in body:
            hidden = layer(hidden, mask)
        order = masked_first(labels)
        index, targets = masked_rows(labels.gather(1, order))  # filler positions are unmasked: -100
        return last_layer_at(last, hidden, mask, order, index), targets


def masked_first(labels: torch.Tensor) -> torch.Tensor:
    """Per sequence, the masked positions in order, then unmasked filler positions up to the
    largest masked count M: positions [B, M]."""
    is_target = labels != -100
    width = max(1, int(is_target.sum(1).max()))
    return torch.sort((~is_target).to(torch.uint8), dim=1, stable=True).indices[:, :width]


def last_layer_at(layer: nn.Module, hidden: torch.Tensor, mask: torch.Tensor | None, order: torch.Tensor,
                  index: torch.Tensor) -> torch.Tensor:
    """A ``BertLayer``'s output at some positions only: queries from the rows ``order``
    [B, M], keys and values from all of ``hidden`` [B, L, C], through the model's own
    attention function (eager, SDPA, xlviz's bf16), dropout, adapters and feed-forward
    modules; returned for the rows ``index`` of the flattened [B * M] only, [len(index), C]."""
    attention = layer.attention.self
    batch, _, width = hidden.shape
    rows = hidden.gather(1, order.unsqueeze(-1).expand(-1, -1, width))
    heads = (batch, -1, attention.num_attention_heads, attention.attention_head_size)
    query = attention.query(rows).view(heads).transpose(1, 2)
    key = attention.key(hidden).view(heads).transpose(1, 2)
    value = attention.value(hidden).view(heads).transpose(1, 2)
    if mask is not None and mask.dim() == 4 and mask.size(-2) > 1:  # a per-query mask [B, 1, L, L]: keep the chosen query rows
        mask = mask.gather(2, order[:, None, :, None].expand(-1, mask.size(1), -1, mask.size(-1)))
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
    context, _ = interface(attention, query, key, value, mask,
                           dropout=attention.dropout.p if attention.training else 0.0, scaling=attention.scaling)
    attended = layer.attention.output(context.reshape(-1, width)[index], rows.reshape(-1, width)[index])
    return layer.feed_forward_chunk(attended)


def masked_rows(labels: torch.Tensor, bucket: int = MASKED_ROW_BUCKET) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices of the masked positions and their labels, padded up to a multiple of
    ``bucket`` with position 0 labelled -100 (ignored by the loss, so neither loss nor
    gradients change). The masked count differs in every batch; oneDNN compiles a new bf16
    matmul kernel for each new row count (2.5-5.6 ms on first use here; docs/world.md), so a
    handful of bucketed shapes keeps the output layer's kernels cached."""
    flat = labels.reshape(-1)
    index = (flat != -100).nonzero().squeeze(1)
    pad = -index.numel() % bucket
    targets = torch.cat([flat[index], flat.new_full((pad,), -100)])
    return torch.cat([index, index.new_zeros(pad)]), targets


def plain_mlm_loss(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The baseline: vocabulary logits at every position (what ``labels=`` does)."""
    return model(input_ids=input_ids, labels=labels).loss
