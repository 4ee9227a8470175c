"""Stage verdicts: did a stage learn anything, judged against a reference it can compute itself.

Why: a small BERT sometimes ends its masked-LM pre-training on the *unigram plateau*: it
predicts token frequencies in every context (loss a little below the unigram entropy of its
corpus, docs/world.md) and learns nothing a later stage can use. Its run still "completes"
and its rows look like results. Each judged stage therefore records a verdict, ``ok`` or
``degenerate``, with the numbers it was judged on, and every consumer of a row that depends
on a degenerate stage refuses the row (docs/methods.md, "Stage verdicts").

- masked LM: the final loss (mean of the last steps) against the unigram entropy of the
  targets the stage trained on (counted from its own batches, in nats like the loss; per
  language for models whose vocabulary tells the languages apart) and, for reference, the
  entropy of a target given the token before it. ``degenerate`` when the loss is not at
  least ``margin`` nats below the unigram entropy.
- QA fine-tuning: F1 on the world's dev split against a trivial baseline on the same
  questions (the best of "answer with the first k words of the context"); ``degenerate``
  when F1 does not beat it by ``margin`` points.

Everything here is arithmetic on counts and numbers (no model), so it is unit-tested on
hand-computed values.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping

from xlviz.training.masking import RANDOM_SHARE

if TYPE_CHECKING:  # the pages read verdicts (xlviz.analysis.reports) and must not import torch (2.4 s cold)
    import torch

OK, DEGENERATE, UNJUDGED = "ok", "degenerate", "unjudged"
# batches of a plain masked-LM loss (``denominator``: a streamed batch's share of its global batch's
# targets, :func:`xlviz.training.streamed.masked_lm_batches`)
MLM_KEYS = {"input_ids", "labels", "attention_mask", "language", "denominator"}
# VECO's CA-MLM batches: a second sentence beside the first, and on parallel steps a TLM pair.
# Judged on the masked targets of both sentences, against the loss the training module reports
# for them alone (``monitor_loss``: its self-stream terms), not its summed objective.
PAIR_KEYS = {"pair_input_ids", "pair_labels", "pair_attention_mask"}
TLM_KEYS = {"tlm_input_ids", "tlm_labels", "tlm_attention_mask"}
# Nats by which a pre-training stage's final MLM loss must undercut the unigram entropy of its
# targets. A model on the plateau ends 0.3-0.4 below it (it copies the 10% unchanged targets:
# 3.6-3.7 against 4.01 on the default corpus), healthy step-1 models 1.5-3 below (1.0-2.4);
# joint models that stayed on the plateau ended at 3.73-3.82 (docs/world.md, docs/methods.md).
MLM_MARGIN = 1.0
# F1 points by which a QA stage's dev F1 must beat the best first-k-words baseline.
QA_MARGIN = 10.0


def entropy(counts: Iterable[float]) -> float:
    """Plug-in entropy in nats of a distribution given by counts (zeros ignored)."""
    values = [float(c) for c in counts if c > 0]
    total = sum(values)
    if total <= 0:
        return float("nan")
    return -sum(c / total * math.log(c / total) for c in values)


def conditional_entropy(joint: Mapping[tuple, float]) -> float:
    """H(Y | X) in nats from counts of (x, y) pairs: sum over x of p(x) H(Y | X = x)."""
    by_x: dict = {}
    for (x, y), c in joint.items():
        if c > 0:
            by_x.setdefault(x, []).append(float(c))
    total = sum(sum(v) for v in by_x.values())
    if total <= 0:
        return float("nan")
    return sum(sum(v) / total * entropy(v) for v in by_x.values())


class StageMonitor:
    """What one stage's training loop saw: the loss of every step and, for masked-LM batches,
    counts of the targets (by language group when ``id_groups`` maps ids to groups) and of
    (previous token, target) pairs. Filled by :func:`xlviz.training.loop.train`."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.mlm = True  # False once a batch that is not a plain masked-LM batch was seen
        self.id_groups: torch.Tensor | None = None  # joint id -> language group (-1: special)
        self._unigram: dict[tuple[int, int], int] = {}
        self._bigram: dict[tuple[int, int], int] = {}
        self.targets = 0

    def batch(self, batch: Mapping[str, torch.Tensor]) -> None:
        import torch  # only training fills a monitor

        ids, labels = batch.get("input_ids"), batch.get("labels")
        if PAIR_KEYS <= set(batch) and not set(batch) - MLM_KEYS - PAIR_KEYS - TLM_KEYS:  # VECO: both sentences
            self.batch({"input_ids": ids, "labels": labels})
            self.batch({"input_ids": batch["pair_input_ids"], "labels": batch["pair_labels"]})
            return
        if set(batch) - MLM_KEYS or ids is None or labels is None or ids.shape != labels.shape or ids.dim() != 2:
            self.mlm = False
            return
        # counted on the CPU, where ``id_groups`` lives: a batch on a GPU would index a CPU
        # tensor with GPU indices (the loop hands over the batch before moving it; this holds
        # for any caller)
        ids, labels = ids.cpu(), labels.cpu()
        target = labels != -100
        if not bool(target.any()):
            return
        original = torch.where(target, labels, ids)  # the block before masking
        rows = torch.zeros(ids.shape[0], dtype=torch.long)
        if self.id_groups is not None:
            groups = self.id_groups[original.clamp(0, len(self.id_groups) - 1)]
            n = int(self.id_groups.max()) + 1
            per_row = torch.nn.functional.one_hot((groups + 1).clamp(min=0), n + 1)[..., 1:].sum(1)
            rows = per_row.argmax(1)  # a row's language: the group most of its tokens belong to
        row_of = rows[:, None].expand_as(ids)[target]
        self._add(self._unigram, row_of, labels[target])
        prev = torch.cat([original.new_full((ids.shape[0], 1), -1), original[:, :-1]], 1)[target]
        self._add(self._bigram, prev, labels[target])
        self.targets += int(target.sum())

    @staticmethod
    def _add(table: dict, a: torch.Tensor, b: torch.Tensor) -> None:
        import torch

        pairs, counts = torch.unique(torch.stack([a.long(), b.long()], 1), dim=0, return_counts=True)
        for (x, y), c in zip(pairs.tolist(), counts.tolist()):
            table[(x, y)] = table.get((x, y), 0) + c

    def final_loss(self) -> float | None:
        """Mean loss of the last tenth of the steps (at least 1, at most 50)."""
        if not self.losses:
            return None
        k = min(50, max(1, math.ceil(len(self.losses) / 10)))
        return sum(self.losses[-k:]) / k

    def unigram_entropy(self) -> float:
        """Entropy of the targets (given their row's language group when groups are known)."""
        return conditional_entropy(self._unigram)

    def bigram_entropy(self) -> float:
        """Entropy of a target given the token before it (plug-in: optimistic on few counts)."""
        return conditional_entropy(self._bigram)


def plateau_loss(unigram: float, mask: float = 0.8, random: float = 0.1) -> float:
    """About the loss of a model on the unigram plateau, for targets of entropy ``unigram``
    masked BERT's way (``mask`` of them shown as [MASK], ``random`` as a random token, the rest
    unchanged): at a [MASK] it predicts the frequencies (``unigram`` nats); at a visible token it
    cannot tell an unchanged target from a random one, so it bets ``p = unchanged / (unchanged
    + random)`` on the visible token and the rest on the frequencies (binary entropy of ``p``,
    plus ``unigram`` whenever the token was random). A reference for the reason, not the rule:
    0.9 H + 0.14 at 80/10/10, 3.75 for the default corpus's 4.01, where plateau models ended at
    3.73-3.82."""
    keep = 1.0 - mask - random
    if not 0 <= keep <= 1 or mask >= 1:
        return float(unigram)
    p = keep / (keep + random)
    h = -sum(x * math.log(x) for x in (p, 1 - p) if x > 0)
    return mask * unigram + (1 - mask) * (h + (1 - p) * unigram)


def mlm_verdict(loss: float, unigram: float, bigram: float, margin: float = MLM_MARGIN, random_share: float = RANDOM_SHARE) -> dict:
    """The verdict of a masked-LM stage: ``ok`` when ``loss`` is at least ``margin`` nats below
    the unigram entropy, else ``degenerate`` (a non-finite loss is degenerate)."""
    ok = math.isfinite(loss) and math.isfinite(unigram) and loss <= unigram - margin
    verdict = OK if ok else DEGENERATE
    gap = unigram - loss
    where = f"{gap:.3f} nats below" if gap >= 0 else f"{-gap:.3f} nats above"
    plateau = plateau_loss(unigram, mask=0.9 - random_share, random=random_share)
    reason = (f"final MLM loss {loss:.3f}, {where} the unigram entropy {unigram:.3f} of its targets "
              f"(must end at most at {unigram - margin:.3f}, {margin:g} nats below it; a model predicting only "
              f"frequencies ends near {plateau:.3f}; bigram entropy {bigram:.3f})")
    return {"kind": "mlm", "verdict": verdict, "loss": round(loss, 4), "unigram_entropy": round(unigram, 4),
            "bigram_entropy": round(bigram, 4), "plateau_loss": round(plateau, 4), "margin": margin, "reason": reason}


def qa_verdict(f1: float, baseline_f1: float, margin: float = QA_MARGIN, baseline: str = "") -> dict:
    """The verdict of a QA stage: ``ok`` when its dev F1 beats the trivial baseline's by ``margin``."""
    ok = math.isfinite(f1) and f1 >= baseline_f1 + margin
    reason = (f"dev F1 {f1:.1f} against {baseline_f1:.1f} for the trivial baseline{f' ({baseline})' if baseline else ''}; "
              f"must reach {baseline_f1 + margin:.1f}, {margin:g} points more")
    return {"kind": "qa", "verdict": OK if ok else DEGENERATE, "dev_f1": round(f1, 4), "baseline_f1": round(baseline_f1, 4),
            "baseline": baseline, "margin": margin, "reason": reason}


def degenerate_stages(stages: Iterable[str], verdicts: Mapping[str, Mapping]) -> list[str]:
    """The stages of ``stages`` whose recorded verdict is degenerate."""
    return [s for s in stages if isinstance(verdicts.get(s), Mapping) and verdicts[s].get("verdict") == DEGENERATE]


def degenerate_encoder_stages(stages: Iterable[str], verdicts: Mapping[str, Mapping]) -> list[str]:
    """The stages of ``stages`` that make an encoder (a masked LM: pre-training and transfer
    stages) no result: those judged degenerate, QA fine-tuning stages aside (an encoder never
    passes through one)."""
    return [s for s in degenerate_stages(stages, verdicts) if verdicts[s].get("kind") != "qa"]


def is_degenerate(row: Mapping) -> bool:
    """Whether a result row depends on a degenerate stage (and is no result)."""
    return row.get("verdict") == DEGENERATE


def live(rows):
    """The rows that are results: ``rows`` without those that depend on a degenerate stage.

    The one filter in front of every chart, average, interval and paired test of the app and
    the reports (a table still lists a degenerate row, reading "degenerate"; an export keeps it
    with its verdict column). ``rows``: a list of row dicts (their ``verdict``) or a pandas
    DataFrame (its ``verdict`` column; a frame without one is returned as it is)."""
    if hasattr(rows, "columns"):
        return rows[rows["verdict"] != DEGENERATE] if "verdict" in rows.columns else rows
    return [r for r in rows if not is_degenerate(r)]


def dead(rows):
    """The complement of :func:`live`: the degenerate rows (to name what a chart leaves out)."""
    if hasattr(rows, "columns"):
        return rows[rows["verdict"] == DEGENERATE] if "verdict" in rows.columns else rows.iloc[0:0]
    return [r for r in rows if is_degenerate(r)]


def degenerate_reason(row: Mapping) -> str:
    stages = row.get("degenerate_stages") or []
    return "degenerate stage" + ("s " if len(stages) > 1 else " ") + ", ".join(map(str, stages)) if stages else "degenerate"


__all__ = ["OK", "DEGENERATE", "UNJUDGED", "MLM_MARGIN", "QA_MARGIN", "entropy", "conditional_entropy", "StageMonitor",
           "plateau_loss", "mlm_verdict", "qa_verdict", "degenerate_stages", "degenerate_encoder_stages", "is_degenerate", "degenerate_reason",
           "live", "dead"]
