"""One training loop for every stage, readable top to bottom (after nanoGPT).

It goes through ``accelerate``: the same code runs in one process, or under
``accelerate launch`` on several processes/GPUs (each process feeds its own shard; gradients
are averaged by the prepared model; only the main process reports). Mixed precision and
gradient accumulation are options.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from accelerate import Accelerator
from torch import nn
from tqdm.auto import tqdm


@dataclass
class LoopConfig:
    steps: int
    lr: float
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    grad_accum: int = 1
    log_every: int = 10


def make_accelerator(mixed_precision: str = "no", grad_accum: int = 1, cpu: bool | None = None) -> Accelerator:
    """An Accelerator; bf16 autocast works on CPUs (and is fast on those with AMX)."""
    if cpu is None:
        cpu = not torch.cuda.is_available()
    return Accelerator(mixed_precision=mixed_precision, gradient_accumulation_steps=grad_accum, cpu=cpu)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay for biases, LayerNorms and embeddings: decay would move frozen
    embedding rows, whose gradient is masked to zero."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or "LayerNorm" in name or "embeddings" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def linear_schedule(optimizer: torch.optim.Optimizer, steps: int, warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = max(1, int(steps * warmup_ratio))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train(
    module: nn.Module,
    batches: Iterator[dict],
    config: LoopConfig,
    accelerator: Accelerator,
    *,
    on_log: Callable[[int, float, float], None] | None = None,
    desc: str = "training",
) -> nn.Module:
    """Run ``config.steps`` optimizer steps. ``module(**batch)`` must return the loss;
    ``batches`` yields this process's shard. ``on_log(step, loss, elapsed)`` is called on the
    main process with the loss averaged over processes and the last ``log_every`` steps."""
    optimizer = torch.optim.AdamW(param_groups(module, config.weight_decay), lr=config.lr)
    scheduler = linear_schedule(optimizer, config.steps, config.warmup_ratio)
    # The scheduler is stepped here once per optimizer step: a prepared scheduler would be
    # stepped once per process, ending the schedule after steps / num_processes.
    module, optimizer = accelerator.prepare(module, optimizer)
    module.train()
    bar = tqdm(total=config.steps, desc=desc, disable=not accelerator.is_local_main_process, dynamic_ncols=True)
    t0 = time.time()
    running, count = 0.0, 0
    for step in range(1, config.steps + 1):
        for _ in range(config.grad_accum):
            batch = {k: v.to(accelerator.device) for k, v in next(batches).items()}
            with accelerator.accumulate(module):
                with accelerator.autocast():
                    loss = module(**batch)
                accelerator.backward(loss)
                if accelerator.sync_gradients and config.max_grad_norm:
                    accelerator.clip_grad_norm_(module.parameters(), config.max_grad_norm)
                optimizer.step()
                if accelerator.sync_gradients:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            running += loss.detach().float().item() / config.grad_accum
        count += 1
        bar.update(1)
        if step % config.log_every == 0 or step == config.steps:
            mean = accelerator.reduce(torch.tensor(running / count, device=accelerator.device), reduction="mean").item()
            bar.set_postfix(loss=f"{mean:.3f}")
            if on_log and accelerator.is_main_process and math.isfinite(mean):
                on_log(step, mean, time.time() - t0)
            running, count = 0.0, 0
    bar.close()
    accelerator.wait_for_everyone()
    return accelerator.unwrap_model(module)
