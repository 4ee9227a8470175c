"""Load any Hugging Face encoder (BERT, mBERT, RoBERTa, XLM-R, DistilBERT, ELECTRA) safely and clearly.

Why: the app and the CLI accept a model from a run's stage folder, a plain ``save_pretrained``
folder or a hub id, and every way that can go wrong (missing folder, pickle-only weights, a
corrupt file, an ELECTRA discriminator asked to fill in masks, a tokenizer from another model,
no network) must end in one :class:`~xlviz.errors.XlvizError` that names the file, not in a
transformers traceback or, worse, in a model with silently random weights.

Rules kept here: safetensors only (``use_safetensors=True``, pickle checkpoints are refused),
``trust_remote_code=False`` always, eager attention by default so attention maps come out,
models returned in eval mode.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from xlviz.errors import XlvizError
from xlviz.io import read_json

TASKS = ("base", "mlm", "qa")
# model_type -> family name shown in messages. All are encoders with eager attention,
# MaskedLM and QuestionAnswering heads in transformers.
SUPPORTED_MODEL_TYPES = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "xlm-roberta": "XLM-R",
    "camembert": "CamemBERT",
    "distilbert": "DistilBERT",
    "electra": "ELECTRA",
    "xlviz_veco": "VECO (BERT with a cross-attention module, xlviz.models.veco)",
    "xlviz_bert": "BERT with adapters (MONOTRANS's +adapters systems, xlviz.models.adapters)",
}
SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model",
)
# Heads a base encoder may lack without harm (BertModel's pooler is not in MLM checkpoints).
_BASE_OPTIONAL = ("pooler.",)
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_hub_cache: dict[str, tuple[float, bool]] = {}


# --------------------------------------------------------------------------- where from
def _run_artefact(folder: Path):
    """``(run, manifest entry)`` when ``folder`` is a trained stage folder or a QA export of a
    run (its manifest says so, :func:`xlviz.runs.owner_of`), else None."""
    from xlviz.runs import owner_of

    found = owner_of(folder)
    return found if found is not None and found[1].kind in ("stage", "export") else None


def _run_root(folder: Path) -> Path | None:
    """The run folder holding ``folder`` if it is a stage folder or an export of that run."""
    found = _run_artefact(folder)
    return found[0].path if found is not None else None


def describe_source(name_or_path: str | os.PathLike) -> str:
    """``"run stage folder"``, ``"hf folder"`` or ``"hub id"``: what the app shows beside a model.

    An existing folder inside a run (``s1_pretrain``, ``s2_transfer-de``, ``export/monotrans-de``)
    is a run stage folder; any other local folder, or a path that cannot be a hub id, is an HF
    folder (it may not exist: load_model then says so); ``org/name`` or ``name`` that is not a
    local folder is a hub id.
    """
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_dir():
        return "run stage folder" if _run_root(path.resolve()) is not None else "hf folder"
    if path.exists() or not _HUB_ID.match(text) or text.startswith((".", "~")):
        return "hf folder"
    return "hub id"


def _hub_offline_env() -> bool:
    return any(
        os.environ.get(v, "").strip().upper() in {"1", "ON", "YES", "TRUE"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_reachable(timeout: float = 1.5) -> bool:
    """Whether the Hugging Face hub answers a TCP connect within ``timeout`` s (cached 5 minutes).

    A quick probe so an offline machine fails in about a second instead of waiting on retries.
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    now = time.monotonic()
    cached = _hub_cache.get(endpoint)
    if cached and now - cached[0] < 300:
        return cached[1]
    url = urlparse(endpoint)
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            ok = True
    except OSError:
        ok = False
    _hub_cache[endpoint] = (now, ok)
    return ok


# --------------------------------------------------------------------------- checks
def _check_folder(folder: Path) -> dict:
    """Folder-level checks before transformers sees it; returns the parsed config.json."""
    if not folder.exists():
        raise XlvizError("model folder not found", path=folder)
    if not folder.is_dir():
        raise XlvizError("expected a model folder (the output of save_pretrained), got a file", path=folder)
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise XlvizError("no config.json here: not a Hugging Face model folder (save_pretrained output)", path=folder)
    config = read_json(cfg_path, what="model config")
    if not isinstance(config, dict):
        raise XlvizError("expected a JSON object", path=cfg_path)
    _check_model_type(config.get("model_type"), cfg_path)
    _check_config_fields(config, cfg_path)
    return config


# Sizes a model config.json gives, each a whole number in this range: checked before transformers
# builds the model ("hidden_size": 1e308 ended in a traceback; a huge integer would exhaust memory).
CONFIG_SIZES: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 65_536), "num_hidden_layers": (1, 256), "num_attention_heads": (1, 1024),
    "intermediate_size": (1, 262_144), "vocab_size": (1, 4_000_000), "max_position_embeddings": (1, 1_000_000),
    "type_vocab_size": (0, 1024), "embedding_size": (1, 65_536),
    "dim": (1, 65_536), "n_layers": (1, 256), "n_heads": (1, 1024), "hidden_dim": (1, 262_144),  # DistilBERT's names
}
ACTIVATION_FIELDS = ("hidden_act", "activation")  # DistilBERT: "activation"


def _check_config_fields(config: dict, cfg_path: Path) -> None:
    """The sizes and activation of a model's config.json, each refused in one line naming the
    field and the file: a size that is not a whole number in :data:`CONFIG_SIZES`'s range, an
    activation transformers does not know (it failed as a bare ``'nope'``)."""
    from transformers.activations import ACT2FN

    from xlviz.errors import shown

    for key, (low, high) in CONFIG_SIZES.items():
        if key not in config:
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise XlvizError(f"must be a whole number from {low} to {high:,}, got {shown(value, 40)}", path=cfg_path, field=key)
    for key in ACTIVATION_FIELDS:
        if key in config and (not isinstance(config[key], str) or config[key] not in ACT2FN):
            raise XlvizError(f"unknown activation {shown(config[key], 40)}; transformers knows {', '.join(sorted(ACT2FN))}",
                             path=cfg_path, field=key)


def _check_model_type(model_type: Any, where: Path | str) -> None:
    from transformers import CONFIG_MAPPING

    if not model_type:
        raise XlvizError("no model_type: cannot tell which architecture this is", path=where, field="model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        known = model_type in CONFIG_MAPPING
        supported = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
        what = "unsupported" if known else "unknown"
        raise XlvizError(
            f"{what} model_type '{model_type}': xlviz works with encoder models ({supported})",
            path=where,
            field="model_type",
        )


def _index_files(folder: Path, index: Path) -> list[Path]:
    """The shard files a ``model.safetensors.index.json`` names, each a plain file name inside
    ``folder``: an index naming ``../x`` or ``/etc/...`` must not make the loader open (and
    report on) a file outside the model folder."""
    data = read_json(index, what="safetensors index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise XlvizError("must be an object {tensor name: shard file name}", path=index, field="weight_map")
    root = folder.resolve()
    files = []
    for name in sorted(set(weight_map.values())):
        target = (folder / name).resolve()
        if Path(name).name != name or name in ("", ".", "..") or target.parent != root:
            raise XlvizError(f"names {name[:80]!r}, not a file of this model folder; refusing to open it", path=index,
                             field="weight_map")
        files.append(folder / name)
    return files


def _check_weights(folder: Path) -> None:
    """Safetensors must be present and readable; pickle-only checkpoints are refused."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if (folder / "model.safetensors").is_file():
        files = [folder / "model.safetensors"]
    elif index.is_file():
        files = _index_files(folder, index)
        if not files:
            raise XlvizError("safetensors index lists no weight files", path=index, field="weight_map")
    else:
        pickles = [name for name in PICKLE_WEIGHTS if (folder / name).exists()]
        if pickles:
            raise XlvizError(
                f"only {', '.join(pickles)} here: xlviz loads safetensors only (pickle checkpoints can run "
                "arbitrary code when loaded). Convert once in a trusted environment with "
                "model.save_pretrained(folder, safe_serialization=True)",
                path=folder / pickles[0],
            )
        raise XlvizError("no model.safetensors here: the folder has a config but no weights", path=folder)
    for f in files:
        if not f.is_file():
            raise XlvizError("weight file listed in the safetensors index is missing", path=f)
        try:
            with safe_open(str(f), framework="pt") as st:
                keys = list(st.keys())
        except Exception as e:  # SafetensorError, OSError: header or length is wrong
            raise XlvizError(f"corrupt safetensors file (truncated or not safetensors): {e}", path=f) from None
        if not keys:
            raise XlvizError("safetensors file holds no tensors", path=f)


def has_tokenizer(folder: Path) -> bool:
    """Whether ``folder`` holds a tokenizer's files (any of :data:`TOKENIZER_FILES`)."""
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _stage_tokenizer_dir(stage: Path, run: Path) -> Path | None:
    """The run's tokenizer for a stage folder saved without one: ``world/tokenizers/<lang>``.

    A transferred stage (step 2) uses its language (from the run's manifest); other stages use
    the run's first language (``l1`` in the run config, at top level or under ``world``).
    """
    from xlviz.runs import world_path

    found = _run_artefact(stage)
    entry = found[1] if found is not None else None
    langs = [entry.language] if entry is not None and entry.role == "transferred" and entry.language else []
    if not langs:
        try:
            cfg = read_json(run / "config.json", what="run config")
        except XlvizError:
            cfg = {}
        world = cfg.get("world") if isinstance(cfg.get("world"), dict) else {}
        for key in ("l1", "source_language", "source_lang"):
            for where in (cfg, world):
                if isinstance(where.get(key), str):
                    langs.append(where[key])
    for lang in langs:
        try:
            tok = world_path(run, "tokenizer", language=lang)
        except XlvizError:  # a config's language that cannot name a folder: no tokenizer there
            continue
        if has_tokenizer(tok):
            return tok
    return None


def _tokenizer_source(folder: Path | str, source: str) -> Path | str:
    if source == "hub id" or has_tokenizer(Path(folder)):
        return folder
    folder = Path(folder)
    run = _run_root(folder.resolve()) if source == "run stage folder" else None
    found = _stage_tokenizer_dir(folder.resolve(), run) if run is not None else None
    if found is None:
        raise XlvizError(
            "no tokenizer files here (tokenizer.json, vocab.txt, ...); pass tokenizer=<folder> to load_model",
            path=folder,
        )
    return found


def check_tokenizer_fits(model, tokenizer, path: str | os.PathLike | None, task: str | None = None,
                         tokenizer_path: str | os.PathLike | None = None) -> None:
    """Refuse a tokenizer that does not belong to the model, naming both.

    Ids at or past the embedding matrix's rows would crash (or, on some devices, read garbage)
    at the first batch; an MLM without a mask token cannot be queried. Also clamps a tokenizer's
    unset ``model_max_length`` to the model's position limit.
    """
    rows = model.get_input_embeddings().num_embeddings
    vocab = tokenizer.get_vocab()
    max_id = max(vocab.values()) if vocab else -1
    tok_name = f"the tokenizer from {tokenizer_path}" if tokenizer_path and str(tokenizer_path) != str(path) else "the tokenizer"
    if max_id >= rows or len(tokenizer) > rows:
        raise XlvizError(
            f"{tok_name} has {len(tokenizer)} tokens (largest id {max_id}) but the model's embedding matrix "
            f"has {rows} rows: the tokenizer does not fit this model",
            path=path,
        )
    if task == "mlm" and (tokenizer.mask_token is None or tokenizer.mask_token_id is None):
        raise XlvizError(f"{tok_name} has no mask token, so the masked LM at this path cannot be queried", path=path)
    config = model.config
    max_pos = getattr(config, "max_position_embeddings", None)
    if max_pos:
        if config.model_type in ("roberta", "xlm-roberta", "camembert"):
            max_pos -= (config.pad_token_id or 0) + 1  # positions start after padding_idx
        if not tokenizer.model_max_length or tokenizer.model_max_length > max_pos:
            tokenizer.model_max_length = max_pos
    pad_model = getattr(config, "pad_token_id", None)
    if config.model_type in ("roberta", "xlm-roberta", "camembert") and tokenizer.pad_token_id not in (None, pad_model):
        warnings.warn(
            f"{path}: the tokenizer pads with id {tokenizer.pad_token_id} but the model's pad_token_id is "
            f"{pad_model}; RoBERTa-style position ids will be off for padded positions",
            stacklevel=2,
        )


def _run_tokenizer_digests(folder: Path) -> dict[str, str]:
    """``{language: vocabulary digest}`` of the tokenizers of the run holding ``folder`` (its
    ``world/tokenizers/<lang>``): to name the language of a tokenizer that is the wrong one."""
    from xlviz.models.export_record import vocab_digest
    from xlviz.runs import world_files

    run = _run_root(folder.resolve())
    out = {}
    for lang, sub in list(world_files(run, "tokenizer").items())[:64] if run is not None else []:
        if sub.is_dir() and not sub.is_symlink() and has_tokenizer(sub):
            try:
                out[lang] = vocab_digest(_load_tokenizer(sub, True))
            except XlvizError:
                continue
    return out


def check_provenance(folder: Path, model, tokenizer, tokenizer_path, language: str | None = None) -> None:
    """The loaded tokenizer is the one ``folder`` was saved with, and the model reads
    ``language`` (when given), by the folder's ``xlviz.json``; without one, ``language`` is
    compared with the run's manifest entry for the folder, if it is a run's artefact."""
    from xlviz.models.export_record import check_record

    folder = Path(folder)
    if check_record(folder, model, tokenizer, tokenizer_path=tokenizer_path, language=language,
                    run_tokenizers=lambda: _run_tokenizer_digests(folder)) is not None or language is None:
        return
    found = _run_artefact(folder.resolve())
    recorded = found[1].language if found is not None else None
    if recorded is not None and recorded != language:
        raise XlvizError(f"this model reads {recorded!r} (the run's manifest, {found[1].path}), but {language!r} was asked for",
                         path=found[0].path / "manifest.json", field="language")


# --------------------------------------------------------------------------- loading
@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' load report and progress bars: xlviz reports loading problems itself."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _auto_class(task: str):
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForQuestionAnswering

    from xlviz.models import register_model_types

    register_model_types()  # exported adapter and VECO models are xlviz's own model types
    return {"base": AutoModel, "mlm": AutoModelForMaskedLM, "qa": AutoModelForQuestionAnswering}[task]


def _is_electra_discriminator(config: dict) -> bool:
    archs = config.get("architectures") or []
    return config.get("model_type") == "electra" and any(a in ("ElectraForPreTraining", "ElectraForTokenClassification") for a in archs)


def _keys(info: dict, name: str) -> list[str]:
    return sorted(info.get(name) or [])


def _short(keys: list[str], n: int = 4) -> str:
    return ", ".join(keys[:n]) + (f" (+{len(keys) - n} more)" if len(keys) > n else "")


def _resolve_device(device: str):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise XlvizError(f"not a torch device: {e}", field="device") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise XlvizError(f"device '{device}' requested but no CUDA GPU is available", field="device")
    return dev


def load_model(
    name_or_path: str | os.PathLike,
    task: str = "base",
    attn_implementation: str = "eager",
    device: str = "cpu",
    *,
    tokenizer: Any = None,
    new_head: str | None = None,
    language: str | None = None,
):
    """Load ``(model, tokenizer)`` for ``task`` ("base", "mlm" or "qa") in eval mode.

    ``name_or_path`` is a local ``save_pretrained`` folder (a run stage folder or any HF
    folder) or a hub id; hub ids load from the local cache only when the hub is unreachable or
    ``HF_HUB_OFFLINE=1``. ``tokenizer`` overrides where the tokenizer comes from (a folder or a
    tokenizer object); a run stage folder without one uses the run's ``world/tokenizers/<lang>``.

    ``new_head`` says what to do when the checkpoint lacks the task head, so it would be newly
    (randomly) initialised: "error", "warn" or "ok". The default refuses for "mlm" (predictions
    would be noise) and warns for "qa" (normal before fine-tuning). The keys that were newly
    initialised are kept in ``model.xlviz_new_weights``.

    A folder xlviz saved carries ``xlviz.json`` (:mod:`xlviz.models.export_record`): the
    tokenizer must be the one it was saved with (size, special ids, vocabulary) and, when
    ``language`` is given, the model must read that language; a folder without the record is
    checked only as far as it can be (the tokenizer fits the embeddings; ``language`` against
    the run's manifest entry).
    """
    if task not in TASKS:
        raise XlvizError(f"task must be one of {', '.join(TASKS)}, not '{task}'", field="task")
    new_head = new_head or ("error" if task == "mlm" else "warn")
    if new_head not in ("error", "warn", "ok"):
        raise XlvizError(f"new_head must be 'error', 'warn' or 'ok', not '{new_head}'", field="new_head")
    if attn_implementation not in ("eager", "sdpa"):
        raise XlvizError(f"attn_implementation must be 'eager' or 'sdpa', not '{attn_implementation}'", field="attn_implementation")
    dev = _resolve_device(device)

    source = describe_source(name_or_path)
    local_only = True
    if source == "hub id":
        where: str | Path = str(name_or_path)
        local_only = _hub_offline_env() or not hub_reachable()
        config = _hub_config(where, local_only)
    else:
        where = Path(name_or_path).expanduser()
        config = _check_folder(where)
        _check_weights(where)

    if task == "mlm" and _is_electra_discriminator(config):
        raise XlvizError(
            "this is an ELECTRA discriminator (ElectraForPreTraining): it has no masked-LM head. "
            "Use the ELECTRA generator checkpoint for task='mlm', or task='base' for its encoder",
            path=where,
        )

    model, info = _load_weights(where, task, attn_implementation, local_only, source)
    _check_loading_info(model, info, where, task, new_head, config)

    tok_where: Any = tokenizer
    if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
        tok_where = _tokenizer_source(where, source) if tokenizer is None else Path(tokenizer)
        tok = _load_tokenizer(tok_where, local_only)
    else:
        tok, tok_where = tokenizer, getattr(tokenizer, "name_or_path", "the given tokenizer")
    check_tokenizer_fits(model, tok, where, task=task, tokenizer_path=tok_where)
    if source != "hub id":
        check_provenance(where, model, tok, tok_where, language)

    model.to(dev)
    model.eval()
    return model, tok


def _hub_config(name: str, local_only: bool) -> dict:
    from transformers import AutoConfig

    from xlviz.models import register_model_types

    register_model_types()
    try:
        with _quiet_transformers():
            cfg = AutoConfig.from_pretrained(name, local_files_only=local_only, trust_remote_code=False)
    except (OSError, ValueError) as e:
        if local_only:
            raise XlvizError(
                f"model '{name}' was not found locally (no folder {Path(name).resolve()} and not in the Hugging Face "
                "cache) and the hub is unreachable (offline, or HF_HUB_OFFLINE=1); download it on a machine with "
                "network access and pass the folder",
                path=name,
            ) from None
        raise XlvizError(f"could not get model '{name}' from the Hugging Face hub: {e}", path=name) from None
    d = cfg.to_dict()
    _check_model_type(d.get("model_type"), name)
    return d


def _load_weights(where, task: str, attn_implementation: str, local_only: bool, source: str):
    cls = _auto_class(task)
    try:
        with _quiet_transformers():
            model, info = cls.from_pretrained(
                str(where),
                use_safetensors=True,
                trust_remote_code=False,
                attn_implementation=attn_implementation,
                local_files_only=local_only,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported below, with the shapes, as an XlvizError
            )
    except OSError as e:
        msg = str(e)
        if source == "hub id" and "safetensors" in msg:
            raise XlvizError(
                "this hub model has no safetensors weights (only a pickle checkpoint); xlviz loads safetensors only",
                path=where,
            ) from None
        raise XlvizError(f"could not load the model: {msg}", path=where) from None
    except (RuntimeError, ValueError, KeyError) as e:
        raise XlvizError(f"could not load the model weights: {str(e).splitlines()[0] if str(e) else type(e).__name__}", path=where) from None
    except Exception as e:  # safetensors raises its own error type on a damaged file
        if type(e).__name__ == "SafetensorError":
            raise XlvizError(f"corrupt safetensors file: {e}", path=where) from None
        if type(e).__name__.startswith("StrictDataclass"):  # a config value of the wrong type (huggingface_hub's check)
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            raise XlvizError(f"bad model config: {' '.join(lines[:2]) or type(e).__name__}", path=Path(str(where)) / "config.json") from None
        raise
    return model, info


# Buffers some checkpoints carry and newer code recomputes: never a sign of a mismatch.
_BUFFERS = ("position_ids", "token_type_ids")


def _unexpected_body_keys(model, unexpected: list[str]) -> list[str]:
    """The unexpected checkpoint keys that belong to the encoder body (its embeddings or
    layers), not to a head the task does not use (``cls.*`` of an MLM read as QA, ``qa_outputs.*``
    of a QA model read as a base encoder, a pooler): weights the config has no place for, which
    transformers would drop without a word (a ``num_hidden_layers`` lowered by hand)."""
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, "base_model", model)
    body = {name for name, _ in base.named_children()} - {p.rstrip(".") for p in _BASE_OPTIONAL}
    out = []
    for key in unexpected:
        rest = key.removeprefix(f"{prefix}.") if prefix else key
        if rest.split(".")[0] in body and rest.split(".")[-1] not in _BUFFERS:
            out.append(key)
    return out


def _check_loading_info(model, info: dict, where, task: str, new_head: str, config: dict) -> None:
    mismatched = sorted(info.get("mismatched_keys") or [])
    if mismatched:
        shown = "; ".join(f"{k} checkpoint {tuple(a)} vs config {tuple(b)}" for k, a, b in mismatched[:3])
        raise XlvizError(f"weights do not match config.json (edited config?): {shown}", path=where)
    body_extra = _unexpected_body_keys(model, _keys(info, "unexpected_keys"))
    if body_extra:
        raise XlvizError(
            f"the weights hold encoder tensors this config.json has no place for (edited config, e.g. fewer layers?); "
            f"loading would drop them: {_short(body_extra)}",
            path=where,
        )
    missing = _keys(info, "missing_keys")
    model.xlviz_new_weights = missing
    if not missing:
        return
    base_prefix = getattr(model, "base_model_prefix", "")
    body = [k for k in missing if k.startswith(f"{base_prefix}.") or task == "base"]
    body = [k for k in body if not k.removeprefix(f"{base_prefix}.").startswith(_BASE_OPTIONAL)]
    if body:
        raise XlvizError(
            f"the checkpoint lacks encoder weights that would be randomly initialised: {_short(body)}",
            path=where,
        )
    head = [k for k in missing if k not in body and not k.removeprefix(f"{base_prefix}.").startswith(_BASE_OPTIONAL)]
    if not head:
        return
    arch = ", ".join(config.get("architectures") or [config.get("model_type", "?")])
    if task == "mlm":
        msg = (
            f"the checkpoint ({arch}) has no masked-LM head: loading would newly initialise {_short(head)}. "
            "Use a checkpoint trained with an MLM head, or task='base'"
        )
    else:
        msg = f"the checkpoint ({arch}) has no {task} head; newly initialised: {_short(head)} (fine-tune before evaluating)"
    if new_head == "error":
        raise XlvizError(msg, path=where)
    if new_head == "warn":
        warnings.warn(f"{where}: {msg}", stacklevel=3)


def _load_tokenizer(where, local_only: bool):
    from transformers import AutoTokenizer

    if isinstance(where, Path) and not where.exists():
        raise XlvizError("tokenizer folder not found", path=where)
    try:
        with _quiet_transformers():
            return AutoTokenizer.from_pretrained(str(where), local_files_only=local_only, trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise XlvizError(f"could not load the tokenizer: {first}", path=where) from None
    except Exception as e:  # tokenizers raises its own Exception subclass on a malformed tokenizer.json
        raise XlvizError(f"could not load the tokenizer ({type(e).__name__}): {str(e)[:200]}", path=where) from None


# --------------------------------------------------------------------------- summary
def model_summary(model) -> dict[str, Any]:
    """Architecture, size and attention settings for the app's sidebar."""
    cfg = model.config
    return {
        "architecture": type(model).__name__,
        "model_type": cfg.model_type,
        "layers": getattr(cfg, "num_hidden_layers", None),
        "heads": getattr(cfg, "num_attention_heads", None),
        "hidden": getattr(cfg, "hidden_size", None),
        "embedding": getattr(cfg, "embedding_size", None) or getattr(cfg, "hidden_size", None),
        "intermediate": getattr(cfg, "intermediate_size", None) or getattr(cfg, "hidden_dim", None),
        "vocab": model.get_input_embeddings().num_embeddings,
        "max_positions": getattr(cfg, "max_position_embeddings", None),
        "params": sum(p.numel() for p in model.parameters()),
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "source": getattr(cfg, "name_or_path", None) or getattr(cfg, "_name_or_path", None),
    }
