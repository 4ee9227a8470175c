"""How many torch threads a small model's forward passes get, for the pages and the CLI alike.

Why here (no Streamlit): the pages compute with it, and the jobs that store a page's numbers
in a run (``xlviz analyse agreement RUN``) compute the same way and as fast.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

SMALL_HIDDEN = 256  # models at most this wide run their forward passes on one thread


@contextlib.contextmanager
def few_threads(model) -> Iterator[None]:
    """One torch thread while a small model (``model``, or its hidden size: at most
    ``SMALL_HIDDEN``, the bench's tiny and small models) computes: its matrices are too small to share out, and a second thread's
    waiting costs more than it gains (a tiny model's 16 batches of 32 sentences: 0.42 s on one
    thread, 0.50 s on two with 2 cores shared; 1.0 against 8.3 s when threads spin). Larger
    models keep torch's threads."""
    import torch

    hidden = model if isinstance(model, int) else getattr(getattr(model, "config", None), "hidden_size", None)
    if not isinstance(hidden, int) or hidden > SMALL_HIDDEN or torch.get_num_threads() == 1:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["SMALL_HIDDEN", "few_threads"]
