"""One training loop for every stage, readable top to bottom (after nanoGPT).

It goes through ``accelerate``: the same code runs in one process, or under
``accelerate launch`` on several processes/GPUs (each process feeds its own shard; gradients
are averaged by the prepared model; only the main process reports). Mixed precision and
gradient accumulation are options.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from accelerate import Accelerator
from accelerate.utils import AutocastKwargs
from torch import nn
from tqdm.auto import tqdm
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from xlviz.errors import XlvizError


@dataclass
class LoopConfig:
    steps: int
    lr: float
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    adam_beta2: float = 0.999  # torch's default; RoBERTa's 0.98 is a plateau-fix candidate (docs/methods.md)
    max_grad_norm: float = 1.0
    grad_accum: int = 1
    log_every: int = 10
    eval_every: int = 0  # steps between ``on_eval`` calls (0: never; the last step always when > 0)
    # xlviz.training.verdicts.StageMonitor: sees every batch and step loss, for the stage's verdict
    monitor: Any = None


class NonFiniteLoss(XlvizError):
    """The loss became NaN or infinite: the stage stops at once (nothing of it is saved; the
    stages before it are kept), instead of training on and scoring a broken model."""


CPU_BF16_PROBES = {"AMX": "_is_amx_tile_supported", "AVX512-BF16": "_is_avx512_bf16_supported"}


def cpu_native_bf16() -> list[str]:
    """The instruction sets with which this CPU multiplies bf16 natively: AMX tiles (Intel
    Sapphire Rapids on) and AVX512-BF16 dot products (Intel Cooper Lake, AMD Zen 4 on). With
    either, bf16 weights train this project's models 2-3.5x faster than float32
    (bench/bench_mlm.py); with neither, bf16 is emulated and slower. A torch without the
    probes reports none."""
    return [isa for isa, probe in CPU_BF16_PROBES.items() if getattr(torch.cpu, probe, lambda: False)()]


def resolve_mixed_precision(name: str) -> str:
    """``auto`` -> ``bf16`` where the hardware multiplies in bf16 natively (a CUDA GPU with
    bf16, a CPU with AMX or AVX512-BF16), else ``no``; ``fp16`` without a GPU -> ``no``."""
    cuda = torch.cuda.is_available()
    if name == "auto":
        if cuda:
            return "bf16" if torch.cuda.is_bf16_supported() else "no"
        return "bf16" if cpu_native_bf16() else "no"
    if name == "fp16" and not cuda:
        return "no"
    return name


FORCE_PRECISION_ENV = "XLVIZ_MIXED_PRECISION"


def run_precision(setting: str) -> str:
    """The precision a whole run trains in: its ``mixed_precision`` setting, unless the
    environment forces one (``XLVIZ_MIXED_PRECISION=no`` or ``bf16``). Why: ``auto`` resolves
    differently on CPUs with and without native bf16, so the test suite is run under both
    precisions on one machine (scripts/test.sh) to catch tests that depend on rounding."""
    forced = os.environ.get(FORCE_PRECISION_ENV, "").strip()
    if not forced:
        return setting
    if forced not in ("no", "bf16"):
        from xlviz.errors import XlvizError

        raise XlvizError(f"must be 'no' or 'bf16', got {forced!r}", path="environment", field=FORCE_PRECISION_ENV)
    return forced


def make_accelerator(mixed_precision: str = "no", grad_accum: int = 1, cpu: bool | None = None, **kwargs) -> Accelerator:
    """An Accelerator. bf16 means autocast on GPUs and bf16 weights with float32 master
    copies on CPUs (fast on those with native bf16; see :class:`Bf16Weights`)."""
    if cpu is None:
        cpu = not torch.cuda.is_available()
    mixed_precision = resolve_mixed_precision(mixed_precision)
    # accelerate keeps one precision per process and refuses a second; one process may run
    # pipelines of different precisions (a notebook, the tests), so forget the old one.
    # The distributed part (PartialState) is kept.
    from accelerate.state import AcceleratorState

    if AcceleratorState._shared_state and AcceleratorState._shared_state.get("_mixed_precision") != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)
    # bf16 on a CPU: accelerate's autocast off, train() runs the model itself in bf16 (Bf16Weights)
    handlers = [AutocastKwargs(enabled=False)] if cpu and mixed_precision == "bf16" else []
    return Accelerator(mixed_precision=mixed_precision, gradient_accumulation_steps=grad_accum, cpu=cpu,
                       kwargs_handlers=handlers, **kwargs)


def uses_bf16_weights(accelerator: Accelerator) -> bool:
    return accelerator.mixed_precision == "bf16" and accelerator.device.type == "cpu"


BF16_ATTENTION = "xlviz_bf16_eager"


def bf16_eager_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """BERT's eager attention with the softmax taken in float32: PyTorch's bf16 softmax on
    CPUs is ~3x slower than its float32 one at these shapes (1.4 ms against 0.46 ms per
    layer) and less exact. Registered with transformers' ``AttentionInterface`` as
    :data:`BF16_ATTENTION`; :class:`Bf16Weights` switches models to it."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    probs = nn.functional.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


AttentionInterface.register(BF16_ATTENTION, bf16_eager_attention)
AttentionMaskInterface.register(BF16_ATTENTION, eager_mask)  # the additive padding mask eager uses


class Bf16Weights:
    """bf16 compute with float32 master weights, the CPU form of bf16 mixed precision.

    CPU autocast casts weights and activations around every op, and PyTorch's bf16 SDPA
    backward on CPU is ~15x slower than its float32 one, so autocast made a small BERT train
    slower (0.7x). Holding the model itself in bf16, with eager attention, lets AMX or
    AVX512-BF16 run every matmul in bf16 (bench/bench_mlm.py), while the optimizer updates
    float32 copies so that small updates are not rounded away. :meth:`restore` puts the
    float32 weights back (the frozen ones exactly as they were) and the attention
    implementation the model had."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.params = dict(module.named_parameters())
        self.master = {name: p.detach().float().clone().requires_grad_(p.requires_grad) for name, p in self.params.items()}
        self.models = [m for m in module.modules() if hasattr(m, "set_attn_implementation")][:1]
        self.attn = [m.config._attn_implementation for m in self.models]
        for m in self.models:
            m.set_attn_implementation(BF16_ATTENTION)
        module.to(torch.bfloat16)
        self.trainable = [(name, p) for name, p in self.params.items() if p.requires_grad]

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The float32 copies of the trainable parameters, named as in the module."""
        return [(name, self.master[name]) for name, _ in self.trainable]

    def grads_to_master(self) -> None:
        for name, p in self.trainable:
            self.master[name].grad = None if p.grad is None else p.grad.float()
            p.grad = None

    @torch.no_grad()
    def master_to_model(self) -> None:
        torch._foreach_copy_([p for _, p in self.trainable], [self.master[name] for name, _ in self.trainable])

    @torch.no_grad()
    def restore(self) -> None:
        self.module.to(torch.float32)
        for name, p in self.params.items():
            p.copy_(self.master[name])
        for m, attn in zip(self.models, self.attn):
            m.set_attn_implementation(attn)


def param_groups(model: nn.Module | Bf16Weights, weight_decay: float) -> list[dict]:
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


def make_optimizer(model: nn.Module | Bf16Weights, lr: float, weight_decay: float, beta2: float = 0.999) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`, fused into one kernel: PyTorch's default on CPUs
    loops over the parameters in Python (7.5 ms a step for the small model here, against
    1.1 ms fused; bench/bench_mlm.py)."""
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, beta2), fused=True)


def linear_schedule(optimizer: torch.optim.Optimizer, steps: int, warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = max(1, int(steps * warmup_ratio))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def check_finite(loss: torch.Tensor, step: int, config: LoopConfig, accelerator: Accelerator, desc: str) -> None:
    """Raise :class:`NonFiniteLoss` naming the stage, the step and the learning rate when this
    step's loss is NaN or infinite on any process, before it reaches the weights. Several
    processes agree first (one process stopping alone would leave the others waiting)."""
    bad = not bool(torch.isfinite(loss.detach()).all())
    if accelerator.num_processes > 1:
        bad = accelerator.reduce(torch.tensor(float(bad), device=accelerator.device), reduction="sum").item() > 0
    if bad:
        raise NonFiniteLoss(f"stage {desc}: the loss became {float(loss.detach().float()):.4g} at step {step} of {config.steps} "
                            f"(learning rate {config.lr:g}); the stage stopped, earlier stages are kept: lower that "
                            "learning rate in the run's config.json and resume the run (--resume)")


def train(
    module: nn.Module,
    batches: Iterator[dict],
    config: LoopConfig,
    accelerator: Accelerator,
    *,
    on_log: Callable[..., None] | None = None,
    on_eval: Callable[[int, nn.Module], dict] | None = None,
    desc: str = "training",
    after_step: Callable[[int, torch.optim.Optimizer, dict[str, torch.Tensor]], None] | None = None,
) -> nn.Module:
    """Run ``config.steps`` optimizer steps. ``module(**batch)`` must return the loss;
    ``batches`` yields this process's shard. ``on_log(step, loss, elapsed)`` is called on the
    main process with the loss averaged over processes and the last ``log_every`` steps.
    ``after_step(step, optimizer, params)`` runs in every process after each optimizer step,
    with the tensors the optimizer updates by name (the float32 masters under bf16 weights),
    so a stage can rewrite parameters and their optimizer state (active forgetting's resets).
    ``on_eval(step, model)`` (every ``eval_every`` steps and at the last, main process, eval mode,
    no gradient) returns dev metrics; they are logged in that step's row, ``on_log(step, loss,
    elapsed, **metrics)``. Evaluating draws no random numbers, so training is unchanged by it."""
    bf16 = Bf16Weights(module) if uses_bf16_weights(accelerator) else None
    optimizer = make_optimizer(bf16 or module, config.lr, config.weight_decay, config.adam_beta2)
    stepped = dict((bf16 or module).named_parameters())  # names as in ``module``, before any wrapping
    masters = [p for _, p in bf16.named_parameters()] if bf16 else None  # what bf16 clips and steps
    scheduler = linear_schedule(optimizer, config.steps, config.warmup_ratio)
    # The scheduler is stepped here once per optimizer step: a prepared scheduler would be
    # stepped once per process, ending the schedule after steps / num_processes.
    # a module whose loss sums several objectives (VECO's) reports the masked-LM part the stage
    # is judged on as ``monitor_loss`` after each forward (the verdict compares it with the
    # unigram entropy of its targets)
    reporter = module
    module, optimizer = accelerator.prepare(module, optimizer)
    module.train()
    bar = tqdm(total=config.steps, desc=desc, disable=not accelerator.is_local_main_process, dynamic_ncols=True,
               position=int(os.environ.get("XLVIZ_BAR_POSITION", 0)))  # stages at once: one line each
    t0 = time.time()
    running, count = 0.0, 0
    try:  # a stage that stops (NaN loss, Ctrl-C) ends its progress bar's line first
        for step in range(1, config.steps + 1):
            step_loss, judged = 0.0, None
            for _ in range(config.grad_accum):
                batch = next(batches)
                if config.monitor is not None:  # counts on the CPU: before the batch moves to the device
                    config.monitor.batch(batch)
                batch = {k: v.to(accelerator.device) for k, v in batch.items()}
                with accelerator.accumulate(module):
                    with accelerator.autocast():
                        loss = module(**batch)
                    check_finite(loss, step, config, accelerator, desc)
                    accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        if bf16:
                            bf16.grads_to_master()
                        if config.max_grad_norm:
                            accelerator.clip_grad_norm_(masters or module.parameters(), config.max_grad_norm)
                    optimizer.step()
                    if accelerator.sync_gradients:
                        scheduler.step()
                        if bf16:
                            bf16.master_to_model()
                    optimizer.zero_grad(set_to_none=True)
                step_loss += loss.detach().float().item() / config.grad_accum
                part = getattr(reporter, "monitor_loss", None) if config.monitor is not None else None
                if part is not None:
                    judged = (judged or 0.0) + float(part) / config.grad_accum
            running += step_loss
            count += 1
            if config.monitor is not None:
                config.monitor.losses.append(step_loss if judged is None else judged)
            if after_step is not None:
                after_step(step, getattr(optimizer, "optimizer", optimizer), stepped)
                if bf16:
                    bf16.master_to_model()
            bar.update(1)
            # the same on every process: the loss reduce below is collective
            due = on_eval is not None and config.eval_every > 0 and (step % config.eval_every == 0 or step == config.steps)
            if step % config.log_every == 0 or step == config.steps or due:
                extra: dict = {}
                if due and accelerator.is_main_process:
                    module.eval()
                    with torch.no_grad():
                        extra = dict(on_eval(step, accelerator.unwrap_model(module)) or {})
                    module.train()
                mean = accelerator.reduce(torch.tensor(running / count, device=accelerator.device), reduction="mean").item()
                bar.set_postfix(loss=f"{mean:.3f}")
                if on_log and accelerator.is_main_process and math.isfinite(mean):
                    on_log(step, mean, time.time() - t0, **extra)
                running, count = 0.0, 0
    except BaseException:
        bar.close()
        raise
    bar.close()
    accelerator.wait_for_everyone()
    if bf16:
        bf16.restore()
    return accelerator.unwrap_model(module)
