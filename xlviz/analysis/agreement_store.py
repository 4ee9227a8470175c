"""The agreement probe's results stored in a run: one masked LM's result on one language's
minimal pairs of the run's generated world, ``analyses/agreement-<key>.json`` and ``.csv``
(:mod:`xlviz.analysis.stored`), read by the Probing page instead of loading the model and
scoring the pairs.

Why: the Probing page's first view of a run loads every row's masked LM and scores a few
hundred pairs with each (most of its cold time). ``xlviz analyse agreement RUN`` (and the end
of ``xlviz demo``) computes them once, as the run's writer.

The request names everything a result comes from: the model (:func:`~xlviz.analysis.encodings.
spec_fingerprint`: its folder's files, its tokenizer folder's and the floor's settings), the
data (its name, the digest of the run's ``world.json`` and of the very pairs scored), the pairs
per category, the scored unit and the chunking. A reader asks for exactly that: a retrained
model or other pairs read as "not stored", never as stale.

Same numbers as the page: both score :data:`CHUNK` pairs at a time with :func:`score_chunk`
(one call on a whole set batches the pairs differently, and its log-probabilities differ in
the last bits) and join the chunks with :func:`result_of`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from xlviz.analysis.encodings import CHUNK
from xlviz.errors import XlvizError

FORMAT = "xlviz-agreement/1"
NAME = "agreement"
# the Probing page's first view: what a run stores (the page starts its widgets from these)
PAIRS_PER_CATEGORY = 100
UNIT = "word"
COLUMNS = ("data", "language", "category", "accuracy", "n_scored", "n_total", "coverage")
_RESULT_KEYS = ("accuracy", "n_scored", "n_total", "coverage", "by_category", "unit", "items")


def world_language(data: str) -> str:
    """The language of world data (``world:<lang>``); an XlvizError for any other data (Marvin
    & Linzen results are computed, not stored)."""
    if not isinstance(data, str) or not data.startswith("world:") or not data[len("world:"):]:
        raise XlvizError(f"stored agreement results are of the generated world's pairs (world:LANG), not {data!r}",
                         field="data")
    return data[len("world:"):]


def pairs_digest(pairs: Sequence[dict]) -> str:
    """A digest of the minimal pairs scored (their words, positions, forms, categories, ids)."""
    return hashlib.sha1(json.dumps(list(pairs), sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def data_inputs(run_dir: str | os.PathLike, data: str, max_per_category: int | None,
                pairs: Sequence[dict] | None = None) -> dict[str, str]:
    """``{"world": digest of world.json, "pairs": digest of the pairs}`` of ``data`` in the run
    (``pairs``: the pairs already read, as :func:`~xlviz.analysis.reports.agreement_data` gives them)."""
    from xlviz.analysis.stored import file_digest
    from xlviz.runs import world_path

    world_language(data)
    run = Path(run_dir)
    world = world_path(run, "world")
    if not world.is_file():
        raise XlvizError("the agreement pairs come from the run's generated world; this run has none", path=world)
    if pairs is None:
        from xlviz.analysis.reports import agreement_data

        pairs = agreement_data(data, run_dir=run, max_per_category=max_per_category)[1]
    return {"world": file_digest(world, run), "pairs": pairs_digest(pairs)}


def request(model: str, data: str, inputs: dict[str, str], max_per_category: int | None, unit: str) -> dict:
    """What one stored result is computed from (``model``: :func:`~xlviz.analysis.encodings.
    spec_fingerprint`; ``inputs``: :func:`data_inputs`)."""
    return {"format": FORMAT, "model": model, "data": data, "inputs": dict(inputs),
            "max_per_category": None if max_per_category is None else int(max_per_category), "unit": unit, "chunk": CHUNK}


def spec_request(run_dir: str | os.PathLike, spec, data: str, max_per_category: int | None, unit: str,
                 digest: Callable[[str], str | None] | None = None, pairs: Sequence[dict] | None = None) -> dict | None:
    """:func:`request` of a :class:`~xlviz.models.reference.ModelSpec` on the run's ``data``;
    None for a model that is not a readable local folder (nothing is stored for those)."""
    from xlviz.analysis.encodings import spec_fingerprint

    model = spec_fingerprint(spec, digest)
    if model is None:
        return None
    return request(model, data, data_inputs(run_dir, data, max_per_category, pairs), max_per_category, unit)


# --------------------------------------------------------------------------- computing
def score_chunk(model, tokenizer, pairs: Sequence[dict], unit: str) -> list[dict]:
    """The scored items of one chunk of pairs (at most :data:`CHUNK`), on one thread for a small model."""
    from xlviz.analysis.probing import agreement_accuracy
    from xlviz.models.threads import few_threads

    with few_threads(model):
        return agreement_accuracy(model, tokenizer, list(pairs), unit=unit)["items"]


def result_of(items: list[dict], unit: str) -> dict:
    """The result the page shows (``agreement_accuracy``'s fields) of the joined chunks' items."""
    from xlviz.analysis.probing import agreement_summary

    return {**agreement_summary(items), "unit": unit, "items": items}


def score(model, tokenizer, pairs: Sequence[dict], unit: str) -> dict:
    """:func:`result_of` all ``pairs``, scored :data:`CHUNK` at a time as the page scores them."""
    items: list[dict] = []
    for lo in range(0, len(pairs), CHUNK):
        items += score_chunk(model, tokenizer, pairs[lo : lo + CHUNK], unit)
    return result_of(items, unit)


# --------------------------------------------------------------------------- files
def _is_result(obj: object) -> bool:
    return (isinstance(obj, dict) and all(k in obj for k in _RESULT_KEYS) and isinstance(obj["items"], list)
            and isinstance(obj["by_category"], list) and all(isinstance(x, dict) for x in obj["items"] + obj["by_category"]))


def find(run_dir: str | os.PathLike, req: dict) -> tuple[dict, Path] | None:
    """``(the stored result, its file)`` computed from exactly ``req``, or None (none, another
    request, or a file that does not hold a result)."""
    from xlviz.analysis.stored import find as find_stored

    got = find_stored(run_dir, NAME, FORMAT, req)
    if got is None or not _is_result(got[0].get("result")):
        return None
    return got[0]["result"], got[1]


def csv_text(req: dict, result: dict) -> str:
    """The result's table: its ``all`` row and one row per category."""
    lang = world_language(req["data"])
    base = {"data": req["data"], "language": lang}
    rows = [{**base, "category": "all", **{k: result[k] for k in ("accuracy", "n_scored", "n_total", "coverage")}}]
    rows += [{**base, **{k: c.get(k) for k in COLUMNS if k in c}} for c in result["by_category"]]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write(run_dir: str | os.PathLike, req: dict, result: dict, record: Callable[[list[dict]], None],
          seconds: float | None = None) -> Path:
    """Store ``result`` under ``req`` (the run's writer only: the caller holds its lock) and
    list both files in the manifest through ``record``."""
    from xlviz.analysis.stored import write as write_stored

    if req.get("format") != FORMAT or not _is_result(result):
        raise XlvizError("not an agreement result and its request", field="result")
    obj = {"format": FORMAT, "request": req, "result": result, **({"seconds": round(seconds, 2)} if seconds is not None else {})}
    return write_stored(run_dir, NAME, obj, csv_text(req, result), world_language(req["data"]), record)


__all__ = ["FORMAT", "NAME", "PAIRS_PER_CATEGORY", "UNIT", "CHUNK", "world_language", "pairs_digest", "data_inputs",
           "request", "spec_request", "score_chunk", "result_of", "score", "find", "csv_text", "write"]
