"""Multi30k task 1 validation: image captions translated line by line (en, de, fr, cs)."""

from __future__ import annotations

from xlviz.data.parallel import ParallelData, ParallelSource, Request, shared_folder
from xlviz.errors import XlvizError

LANGUAGES = ("en", "de", "fr", "cs")


def languages(data_dir: str | None) -> list[str]:
    folder = shared_folder(data_dir, "multi30k")
    if folder is None:
        return []
    task1 = folder / "task1" if (folder / "task1").is_dir() else folder
    return [l for l in LANGUAGES if (task1 / f"val.{l}.gz").is_file()]


def read(r: Request) -> ParallelData:
    from xlviz.data import real

    if not r.lang_b:
        raise XlvizError("Multi30k needs a second language (de, fr or cs)", field="lang_b")
    fa = real.multi30k_files(r.data_dir, task=1, split="val", lang=r.lang_a)[0]
    fb = real.multi30k_files(r.data_dir, task=1, split="val", lang=r.lang_b)[0]
    rows = real.read_parallel_lines(fa, fb, max_lines=r.limit)
    return ParallelData(r.lang_a, r.lang_b, [a for a, _ in rows], [b for _, b in rows],
                        [f"multi30k-val-{i:04d}" for i in range(len(rows))], f"Multi30k task 1 val ({r.lang_a}-{r.lang_b})")


SOURCE = ParallelSource("multi30k", "Multi30k", "Multi30k task 1 validation captions, translated line by line", read,
                        languages=languages, partners=lambda a, d: [l for l in languages(d) if l != a], folder="multi30k",
                        order=40)
