"""Tatoeba: English sentences with their translations (XTREME's retrieval pairs)."""

from __future__ import annotations

from xlviz.data.parallel import ParallelData, ParallelSource, Request, shared_folder
from xlviz.errors import XlvizError


def partners(lang_a: str, data_dir: str | None) -> list[str]:
    from xlviz.data.real import available_tatoeba_languages

    folder = shared_folder(data_dir, "tatoeba")
    return available_tatoeba_languages(folder) if folder is not None and folder.is_dir() else []


def read(r: Request) -> ParallelData:
    from xlviz.data import real

    other = r.lang_b if r.lang_a in ("en", "eng") else r.lang_a
    if not other or (r.lang_a not in ("en", "eng") and r.lang_b not in ("en", "eng", None)):
        raise XlvizError("Tatoeba pairs are English with one other language", field="lang_b")
    rows = real.read_tatoeba(r.data_dir, other)[: r.limit or None]
    lb = real.normalize_lang(other)
    return ParallelData("en", lb, [en for _, en in rows], [xx for xx, _ in rows],
                        [f"tatoeba-{i:05d}" for i in range(len(rows))], f"Tatoeba (en-{lb})")


SOURCE = ParallelSource("tatoeba", "Tatoeba", "English sentences with their translations into one other language", read,
                        languages=lambda d: ["en"] if partners("en", d) else [], partners=partners, default_b="deu",
                        folder="tatoeba", order=30)
