"""Packed MLM blocks: full blocks, every token once per epoch, sharding, bounded memory."""

from __future__ import annotations

import itertools

import pytest

from xlviz.training.mlm import iter_batches, iter_blocks


class CharTok:
    cls_token_id, sep_token_id = 2, 3

    def __call__(self, lines, add_special_tokens=False):
        return {"input_ids": [[10 + int(c) for c in line.split()] for line in lines]}


LINES = [" ".join(str((i + j) % 10) for j in range(i % 5 + 1)) for i in range(200)]


def test_blocks_are_full_and_cover_the_corpus_once_per_epoch():
    blocks = list(iter_blocks(lambda: LINES, CharTok(), 10, chunk=7, epochs=1))
    assert all(len(b) == 10 and b[0] == 2 and b[-1] == 3 for b in blocks)
    stream = [t for line in LINES for t in [10 + int(c) for c in line.split()] + [3]]
    assert len(blocks) == len(stream) // 8
    assert sorted(t for b in blocks for t in b[1:-1]) == sorted(stream[: len(blocks) * 8])


def test_processes_get_disjoint_shards():
    one = list(iter_blocks(lambda: LINES, CharTok(), 10, epochs=1))
    a = list(iter_blocks(lambda: LINES, CharTok(), 10, epochs=1, rank=0, world_size=2))
    b = list(iter_blocks(lambda: LINES, CharTok(), 10, epochs=1, rank=1, world_size=2))
    assert sorted(map(tuple, a + b)) == sorted(map(tuple, one))
    assert abs(len(a) - len(b)) <= 1


def test_streaming_reads_only_what_it_needs():
    consumed = []

    def endless():
        for i in itertools.count():
            consumed.append(i)
            yield LINES[i % len(LINES)]

    batches = iter_batches(iter_blocks(endless, CharTok(), 10, shuffle_buffer=16, chunk=8), 4)
    for _ in range(3):
        next(batches)
    assert len(consumed) < 200, "memory is bounded by the shuffle buffer, not the corpus"


def test_too_small_corpus_says_so():
    with pytest.raises(ValueError, match="corpus too small"):
        next(iter_blocks(lambda: ["1"], CharTok(), 10))
