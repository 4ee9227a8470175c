"""Two line-aligned text files (line i of one translates line i of the other)."""

from __future__ import annotations

from pathlib import Path

from xlviz.data.parallel import ParallelData, ParallelSource, Request
from xlviz.errors import XlvizError


def read(r: Request) -> ParallelData:
    from xlviz.data import real

    if not r.files or len(r.files) != 2:
        raise XlvizError("give two line-aligned files", field="files")
    rows = real.read_parallel_lines(r.files[0], r.files[1], max_lines=r.limit)
    if not rows:
        raise XlvizError("no non-empty line pairs", path=r.files[0])
    return ParallelData(r.lang_a, r.lang_b or "b", [a for a, _ in rows], [b for _, b in rows],
                        [f"line-{i:05d}" for i in range(len(rows))], f"files ({Path(r.files[0]).name}, {Path(r.files[1]).name})")


SOURCE = ParallelSource("files", "Files", "two line-aligned text files", read, takes="files", order=90)
