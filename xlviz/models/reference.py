"""The model reference: where one model and its tokenizer come from, and the one loader of it.

Why: the pages, ``xlviz analyse`` and the analyses name models by a :class:`ModelSpec`
(hashable and cheap: no torch import, so the pages can list and cache models before loading
any) and load them only through :func:`load_spec`, so every view reads the same model, the
floor included (rebuilt by :func:`xlviz.models.floor.floor_model`, as the run built it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.models.loading import TOKENIZER_FILES, has_tokenizer

__all__ = ["ModelSpec", "TOKENIZER_FILES", "has_tokenizer", "load_tokenizer", "load_spec"]


@dataclass(frozen=True)
class ModelSpec:
    """Where one model and its tokenizer come from.

    ``path``: a ``save_pretrained`` folder or hub id; ``tokenizer``: another tokenizer folder
    (None: the model's own, or the run's ``world/tokenizers/<lang>``). With ``floor_seed`` set,
    the model is the floor: ``path`` is an L1 masked LM (``s1_pretrain``) whose token embeddings
    are replaced by fresh random ones for ``tokenizer``'s vocabulary, seeded with ``floor_seed``,
    drawn as ``floor_init`` says with std ``floor_init_std`` (None: the model's
    ``initializer_range``, what corpus sources and runs made before ``l2_init_std`` existed use).
    """

    path: str
    tokenizer: str | None = None
    floor_seed: int | None = None
    floor_init: str = "random"
    floor_init_std: float | None = None

    @property
    def tokenizer_path(self) -> str:
        """Where the tokenizer is read from: ``tokenizer``, else the model's own folder."""
        return self.tokenizer or self.path

    def stamp(self) -> str:
        """A string that changes when the files change (for cache keys)."""
        parts = [self.path, str(self.tokenizer), str(self.floor_seed), self.floor_init, str(self.floor_init_std)]
        for p in (self.path, self.tokenizer):
            if p:
                try:
                    parts.append(str((Path(p) / "config.json").stat().st_mtime_ns if (Path(p) / "config.json").exists()
                                     else Path(p).stat().st_mtime_ns))
                except OSError:
                    parts.append("-")
        return "|".join(parts)


def load_tokenizer(folder: str | os.PathLike):
    """A local tokenizer folder (never remote code), or an XlvizError naming it."""
    from transformers import AutoTokenizer

    folder = Path(folder)
    if not folder.is_dir() or not has_tokenizer(folder):
        raise XlvizError("no tokenizer files here", path=folder)
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - tokenizers raise assorted types on broken files
        raise XlvizError(f"could not load the tokenizer: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                         path=folder) from None


def load_spec(spec: ModelSpec, task: str = "base", **options):
    """``(model, tokenizer)`` for a spec, in eval mode. The floor is always a masked LM, built
    by :func:`xlviz.models.floor.floor_model` (special rows matched by role, the L2 padding id,
    the spec's seed, init and std), so that the floor analysed is the floor scored in
    ``results.json``. ``options`` go to :func:`xlviz.models.loading.load_model` (e.g.
    ``attn_implementation``)."""
    from xlviz.models.loading import load_model

    if spec.floor_seed is None:
        model, tok = load_model(spec.path, task=task, tokenizer=spec.tokenizer, **options)
        model.eval()
        return model, tok
    if not spec.tokenizer:
        raise XlvizError("the floor needs the L2 tokenizer folder", field="tokenizer")
    from xlviz.models.floor import floor_model

    l1, l1_tok = load_model(spec.path, task="mlm")
    tok = load_tokenizer(spec.tokenizer)
    model = floor_model(l1, l1_tok, tok, seed=int(spec.floor_seed), init=spec.floor_init, init_std=spec.floor_init_std)
    model.eval()
    return model, tok
