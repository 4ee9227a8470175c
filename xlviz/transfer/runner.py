"""Shared machinery for staged runs that are not on the generated world (real corpora, QA
fine-tuning of any encoder): config plumbing, process-count-invariant batches, results merging.

Why: :class:`xlviz.transfer.pipeline.Pipeline` already runs stages into a run folder with
status, resume from ``stages_done``, per-stage seeding and logging; :class:`StagedPipeline`
reuses all of that and only swaps the configuration and the stages.

Scale-out contract (``accelerate launch --multi_gpu --num_processes N -m xlviz ...``, on GPUs or
on CPU processes with gloo): ``batch_size`` in a config is the *global* batch per optimizer
step. Every process reads the same shuffled stream, takes its own slice of each global batch
(``batch_size / (processes x grad_accum)`` rows per forward pass), masks with a generator
seeded by the step (not by the process), and scales its loss by the global number of targets,
so N processes compute the same updates as one process up to floating-point rounding. Only
the main process writes files; losses and evaluation predictions are gathered.
"""

from __future__ import annotations

import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Iterator, Sequence

import torch
from accelerate.utils import DataLoaderConfiguration

from xlviz.errors import XlvizError
from xlviz.names import check_config
from xlviz.runs import Run
from xlviz.training.loop import make_accelerator
from xlviz.transfer.pipeline import Pipeline


class ConfigMixin:
    """``from_dict`` (unknown keys named), ``from_file``, ``to_dict`` for run configs (dataclasses)."""

    @classmethod
    def from_dict(cls, d: dict, *, path: str | None = None):
        if not isinstance(d, dict):
            raise XlvizError("a run config must be a JSON object", path=path)
        d = {k: v for k, v in d.items() if k not in ("versions", "_comment", "_doc") and not k.startswith("//")}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise XlvizError(f"unknown setting(s) {unknown}; known: {sorted(known)}", path=path, field=unknown[0])
        try:
            cfg = cls(**d)
        except TypeError as e:
            raise XlvizError(f"bad config: {e}", path=path) from None
        cfg.validate(path=path)
        check_config(cfg, path=path)
        return cfg

    @classmethod
    def from_file(cls, path: str | Path):
        from xlviz.io import read_json

        return cls.from_dict(read_json(path, what="run config"), path=str(path))

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self, *, path: str | None = None) -> None:  # overridden
        return None


def check_positive(cfg, names: Sequence[str], path: str | None, *, number: bool = False) -> None:
    for name in names:
        v = getattr(cfg, name)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 if number else isinstance(v, int) and not isinstance(v, bool) and v > 0
        if not ok:
            raise XlvizError(f"must be a positive {'number' if number else 'integer'}, got {v!r}", path=path, field=name)


def make_global_batch_accelerator(mixed_precision: str = "no", grad_accum: int = 1):
    """An Accelerator whose LR scheduler steps once per optimizer step whatever the number of
    processes. (accelerate's default, ``split_batches=False``, assumes the batch grows with the
    processes and steps a prepared scheduler ``num_processes`` times per step, so with N
    processes a linear schedule would reach zero after steps / N. Here batches are global.)
    No dataloader is prepared, so ``split_batches`` changes nothing else."""
    return make_accelerator(mixed_precision, grad_accum, dataloader_config=DataLoaderConfiguration(split_batches=True))


class StagedPipeline(Pipeline):
    """A :class:`Pipeline` with its own config class and stages (``stages()``/``_run_stage``)."""

    config_class: type = ConfigMixin
    stop_after: str | None = None  # run the plan up to and including this stage (then state "cancelled": resume continues)

    def plan(self) -> list[str]:  # overridden: every stage of the run
        raise NotImplementedError

    def stages(self) -> list[str]:
        plan = self.plan()
        if self.stop_after is None:
            return plan
        if self.stop_after not in plan:
            raise XlvizError(f"unknown stage {self.stop_after!r}; the stages are {plan}", field="stop_after")
        return plan[: plan.index(self.stop_after) + 1]

    def __init__(self, config, run_dir: str | Path):
        # Pipeline.__init__ builds the generated world; this pipeline has none.
        self.cfg = config
        self.run = Run(Path(run_dir))
        self.acc = make_global_batch_accelerator(config.mixed_precision, config.grad_accum)
        self.main = self.acc.is_main_process
        self.t0 = time.time()
        self.micro_batch(config.batch_size)

    @classmethod
    def resume(cls, run_dir: str | Path):
        run = Run(Path(run_dir))
        if not run.exists():
            raise XlvizError("not a run folder (no config.json)", path=run_dir)
        return cls(cls.config_class.from_dict(run.config(), path=str(run.config_path)), run_dir)

    def micro_batch(self, global_batch: int) -> int:
        """Rows per process per forward pass for a global batch of ``global_batch``."""
        parts = self.acc.num_processes * self.cfg.grad_accum
        if global_batch % parts:
            raise XlvizError(
                f"the global batch size {global_batch} must be divisible by processes x grad_accum = "
                f"{self.acc.num_processes} x {self.cfg.grad_accum}",
                field="batch_size",
            )
        return global_batch // parts

    def run_all(self) -> list[dict]:
        if self.main:
            self.run.path.mkdir(parents=True, exist_ok=True)
            self.run.update_status(num_processes=self.acc.num_processes, device=str(self.acc.device),
                                   mixed_precision=str(self.acc.mixed_precision), note=None)
        rows = super().run_all()
        if self.main and self.stop_after is not None and self.stages() != self.plan():
            self.run.update_status(state="cancelled", stages=self.plan(),
                                   note=f"stopped after {self.stop_after} as asked; resume to run the remaining stages")
        return rows

    def add_result_fields(self, rows: list[dict]) -> None:
        """Merge rows into results.json by (system, language), updating fields of an existing row
        (so retrieval and QA scores of one system and language share a row)."""
        if not self.main:
            return
        merged = {(r["system"], r["language"]): dict(r) for r in self.run.results()}
        for r in rows:
            merged.setdefault((r["system"], r["language"]), {}).update(r)
        self.run.write_results(list(merged.values()))


# --------------------------------------------------------------------------- batches
def masked_lm_batches(
    blocks: Iterator[list[int]],
    *,
    batch_size: int,
    rank: int,
    world_size: int,
    grad_accum: int,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    seed: int,
    prob: float = 0.15,
) -> Iterator[dict]:
    """This process's micro-batches of a stream of global MLM batches.

    ``blocks`` is the same stream in every process (``iter_blocks(..., rank=0, world_size=1)``).
    Each global batch of ``batch_size`` blocks is masked with a generator seeded by
    ``(seed, step)``; micro-batch ``k`` of process ``r`` is rows ``(k * world_size + r) * m``
    onwards (``m = batch_size / (world_size * grad_accum)``), and ``denominator`` makes the
    per-process loss sums average to the global per-token mean (see the module docstring).
    """
    m = batch_size // (world_size * grad_accum)
    if m < 1 or m * world_size * grad_accum != batch_size:
        raise XlvizError(f"batch size {batch_size} is not divisible by {world_size} processes x {grad_accum} accumulation steps", field="batch_size")
    special = torch.tensor(sorted(set(special_ids)), dtype=torch.long)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)], dtype=torch.long)
    step = 0
    while True:
        rows = []
        for _ in range(batch_size):
            try:
                rows.append(next(blocks))
            except StopIteration:
                return
        ids = torch.tensor(rows, dtype=torch.long)
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        inputs, labels = mask_for_mlm(ids, mask_id=mask_id, special=special, allowed=allowed, prob=prob, generator=g)
        denominator = (labels != -100).sum().clamp(min=1).float() / (world_size * grad_accum)
        for k in range(grad_accum):
            lo = (k * world_size + rank) * m
            yield {"input_ids": inputs[lo: lo + m], "labels": labels[lo: lo + m], "denominator": denominator}
        step += 1


def mask_for_mlm(
    ids: torch.Tensor, *, mask_id: int, special: torch.Tensor, allowed: torch.Tensor, prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking for any vocabulary layout: ``prob`` of the non-special tokens become
    targets; 80% -> mask, 10% -> a random non-special token, 10% unchanged."""
    inputs, labels = ids.clone(), ids.clone()
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & ~torch.isin(ids, special)
    labels[~chosen] = -100
    roll = torch.rand(ids.shape, generator=generator)
    inputs[chosen & (roll < 0.8)] = mask_id
    rand_pos = chosen & (roll >= 0.8) & (roll < 0.9)
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs[rand_pos] = random_ids[rand_pos]
    return inputs, labels


def trim_right_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut a right-padded batch (features padded to max_length) to its longest row."""
    if "attention_mask" not in batch:
        return batch
    width = max(1, int(batch["attention_mask"].sum(1).max()))
    if batch["attention_mask"][:, width:].any():  # left padding: leave as is
        return batch
    return {k: (v[:, :width] if v.ndim == 2 else v) for k, v in batch.items()}


def feature_batches(
    features: dict[str, torch.Tensor], *, batch_size: int, rank: int, world_size: int, grad_accum: int, seed: int
) -> Iterator[dict]:
    """This process's micro-batches of shuffled global batches of fixed-size features (QA
    windows), epoch after epoch; the permutation depends on the seed and epoch only."""
    n = len(next(iter(features.values())))
    m = batch_size // (world_size * grad_accum)
    if n < batch_size:
        raise XlvizError(f"only {n} training features for a global batch of {batch_size}; lower batch_size", field="batch_size")
    epoch = 0
    while True:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 7_919 + epoch))
        for lo in range(0, n - batch_size + 1, batch_size):
            batch = order[lo: lo + batch_size]
            for k in range(grad_accum):
                idx = batch[(k * world_size + rank) * m: (k * world_size + rank + 1) * m]
                yield trim_right_padding({key: v[idx].long() for key, v in features.items()})
        epoch += 1


__all__ = ["ConfigMixin", "StagedPipeline", "check_positive", "masked_lm_batches", "mask_for_mlm", "feature_batches"]
