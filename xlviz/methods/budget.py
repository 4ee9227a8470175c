"""A run's cost follows its budget: how much of a corpus its data stages read.

Why: on a corpus source the vocabularies (:mod:`xlviz.methods.corpus`, the joint models'
vocabularies) and CLWE's skip-gram vectors were learned on each corpus's first
``tokenizer_lines`` lines whatever the run's length: a tiny multi30k run (30 pre-training
steps of 64 blocks of 64 tokens, 123k tokens read) spent over 12 minutes of its 16 on
skip-gram over 145,000 lines a language. The rule, declared here once: a data stage reads at
most about as many tokens as the run's longest masked-LM training reads (``max(pretrain_steps,
transfer_steps) x mlm_batch_size x block_size``), counted as :data:`TOKENS_PER_LINE` tokens a
line, and never fewer than :data:`MIN_LINES` lines (a vocabulary needs text to learn from).

CLWE's mapping (VecMap's self-learning, :func:`xlviz.models.clwe.self_learning`) costs
``iterations x vocab_cutoff^2``, hundreds of iterations over every subword of the
vocabularies: it follows the budget too (:func:`clwe_mapping`): the dictionary is induced
among at most ``budget_lines / 4`` of the most frequent subwords (VecMap's cutoff is 20,000)
and the loop runs at most ``max(pretrain_steps, transfer_steps)`` iterations (VecMap's 1,000),
never fewer than :data:`MIN_MAPPING_WORDS` words and :data:`MIN_MAPPING_ITERATIONS` iterations.

At the corpus sources' default budgets the rule never binds (1000 steps x 64 x 64 tokens /
16 = 256,000 lines, more than multi30k's 145,000 or the files source's 100,000
``tokenizer_lines``; 64,000 mapping words and 1,000 iterations, VecMap's own limits), so
those runs read and compute exactly what they did before. The generated world
is not capped at all: its corpus is sized by ``world.corpus_documents``, a budget flag itself.
"""

from __future__ import annotations

TOKENS_PER_LINE = 16  # a generous line: multi30k's captions hold 13-16 subwords of an 8000-subword vocabulary
MIN_LINES = 5_000
MIN_MAPPING_WORDS = 1_000
MIN_MAPPING_ITERATIONS = 100
VECMAP_CUTOFF, VECMAP_ITERATIONS = 20_000, 1_000  # xlviz.models.clwe.self_learning's defaults


def budget_tokens(cfg) -> int:
    """Tokens the run's longest masked-LM training reads (steps x blocks a batch x block size)."""
    return max(int(cfg.pretrain_steps), int(cfg.transfer_steps)) * int(cfg.mlm_batch_size) * int(cfg.block_size)


def budget_lines(cfg) -> int:
    """The most corpus lines a data stage of this run reads (:data:`MIN_LINES` at least)."""
    return max(MIN_LINES, -(-budget_tokens(cfg) // TOKENS_PER_LINE))


def sample_lines(cfg, requested: int) -> int:
    """``requested`` lines (``tokenizer_lines``), capped by the run's budget."""
    return min(int(requested), budget_lines(cfg))


def clwe_mapping(cfg) -> dict:
    """Options for :func:`xlviz.models.clwe.self_learning` that the budget caps: only those
    below VecMap's own limits (empty at default budgets, so the call is the same as before)."""
    out = {}
    words = max(MIN_MAPPING_WORDS, budget_lines(cfg) // 4)
    if words < VECMAP_CUTOFF:
        out["vocab_cutoff"] = words
    iterations = max(MIN_MAPPING_ITERATIONS, int(cfg.pretrain_steps), int(cfg.transfer_steps))
    if iterations < VECMAP_ITERATIONS:
        out["max_iterations"] = iterations
    return out
