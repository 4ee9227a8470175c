"""Experiment trackers through accelerate: every metric a run writes to ``metrics.jsonl`` also
goes to TensorBoard (event files under ``<run>/tensorboard``, so ``tensorboard --logdir
checkpoints`` shows every run's stages) and to W&B, MLflow, Aim ... when a run asks for them.

Why accelerate's trackers: one ``Accelerator(log_with=...)`` call covers every tracker a user
already has, with accelerate's own main-process rule. Only the process that writes
``metrics.jsonl`` logs (the run's lock holder; stage workers send it their metrics), so each
tracker sees exactly the file's values. A tracker that is not installed is skipped with one
line in the run's log, never a failed run.
"""

from __future__ import annotations

from xlviz.errors import XlvizError, bounded

# what ``log_with`` accepts: accelerate's tracker names, "all" (every installed one) and "none"
TRACKERS = ("tensorboard", "wandb", "mlflow", "aim", "comet_ml", "dvclive", "trackio", "swanlab")
DEFAULT = "tensorboard"
PROJECT = "tensorboard"  # the folder under the run (accelerate's project name) that holds the event files


def parse_log_with(value: object, *, path: str | None = None) -> list[str]:
    """``"tensorboard"``, ``"wandb,tensorboard"``, ``"all"`` or ``"none"`` as a list of names."""
    if not isinstance(value, str):
        raise XlvizError(f"must be a tracker name or a comma list of them, got {value!r}", path=path, field="log_with")
    names = [n.strip().lower() for n in value.split(",")]
    if not all(names):  # "," or "tensorboard,": a typo, not a wish to turn every tracker off ("none" says that)
        raise XlvizError(f"an empty tracker name in {bounded(repr(value), 40)}; give tracker names, 'all' or 'none'", path=path,
                         field="log_with")
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in TRACKERS + ("all",)]
    if bad:
        raise XlvizError(f"unknown tracker {bad[0]!r}; choose from {list(TRACKERS) + ['all', 'none']}", path=path,
                         field="log_with")
    return list(dict.fromkeys(names))


def available(names: list[str]) -> tuple[list[str], list[str]]:
    """(the trackers that can be imported here, those that cannot); ``all``: every installed one."""
    from accelerate.tracking import get_available_trackers

    have = [str(t.value if hasattr(t, "value") else t) for t in get_available_trackers()]
    if "all" in names:
        return [n for n in TRACKERS if n in have], []
    return [n for n in names if n in have], [n for n in names if n not in have]


def flat_config(cfg: dict, prefix: str = "") -> dict[str, bool | int | float | str]:
    """A run config as trackers store hyperparameters: flat keys, scalar values (lists as text)."""
    out: dict[str, bool | int | float | str] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, key + "."))
        elif isinstance(v, (bool, int, float, str)):
            out[key] = v
        else:
            out[key] = str(v)
    return out


def scalars(metric: dict) -> dict[str, float]:
    """A ``metrics.jsonl`` row as tracker values: ``<stage>/<name>`` for each number, so each
    stage has its own curves on its own step axis."""
    stage = metric.get("stage", "run")
    return {f"{stage}/{k}": float(v) for k, v in metric.items()
            if k not in ("stage", "step") and isinstance(v, (int, float)) and not isinstance(v, bool)}
