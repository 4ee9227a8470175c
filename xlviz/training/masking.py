"""BERT's masking shares, and the one reader of a run's masking settings (:func:`masking`).

No torch here: the stage verdicts (:mod:`xlviz.training.verdicts`, which the pages import)
need the random share too.
"""

from __future__ import annotations

# BERT's masking (Devlin et al. 2019): this share of the tokens become masked-LM targets, and of
# those this share is shown as a random token (the unchanged share is 0.1, the rest [MASK]). A
# run's ``mlm_probability`` and ``mlm_random_share`` start from these (xlviz.transfer.settings) and
# every masking function defaults to them.
MASK_PROBABILITY = 0.15
RANDOM_SHARE = 0.1


def masking(cfg) -> dict[str, float]:
    """A run config's masking as the masking functions take it (``prob``, ``random_share``): the
    one place ``mlm_probability`` and ``mlm_random_share`` are read (a config without them, a
    QA-only run's, masks as BERT did)."""
    return {"prob": getattr(cfg, "mlm_probability", MASK_PROBABILITY), "random_share": getattr(cfg, "mlm_random_share", RANDOM_SHARE)}


__all__ = ["MASK_PROBABILITY", "RANDOM_SHARE", "masking"]
