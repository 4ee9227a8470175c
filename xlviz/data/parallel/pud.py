"""PUD: the Parallel Universal Dependencies treebanks, sentences aligned by ``# sent_id``."""

from __future__ import annotations

from xlviz.data.parallel import ParallelData, ParallelSource, Request, shared_folder
from xlviz.errors import XlvizError


def languages(data_dir: str | None) -> list[str]:
    from xlviz.data.real import available_pud_languages

    folder = shared_folder(data_dir, "pud")
    return available_pud_languages(folder) if folder is not None and folder.is_dir() else []


def read(r: Request) -> ParallelData:
    from xlviz.data import real

    if not r.lang_b:
        raise XlvizError("PUD needs a second language", field="lang_b")
    rows = real.read_pud_pairs(r.data_dir, r.lang_a, r.lang_b, limit=r.limit)
    return ParallelData(r.lang_a, r.lang_b, [a.text for _, a, _ in rows], [b.text for _, _, b in rows],
                        [i for i, _, _ in rows], f"PUD ({r.lang_a}-{r.lang_b})")


SOURCE = ParallelSource("pud", "PUD", "Parallel Universal Dependencies test sentences, aligned by sentence id", read,
                        languages=languages, partners=lambda a, d: [l for l in languages(d) if l != a], folder="pud",
                        order=20)
