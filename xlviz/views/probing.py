"""The Probing page's first view without Streamlit: which rows it probes on a run's generated
world, and their agreement results stored in the run (:mod:`xlviz.analysis.agreement_store`),
so the page reads them instead of loading every masked LM.

Why here: the page draws its rows and starts its widgets from these functions and constants, and
``xlviz analyse agreement RUN`` and ``xlviz demo`` store exactly the rows the page opens on
(every L2 of the run, the floor on, :data:`~xlviz.analysis.agreement_store.PAIRS_PER_CATEGORY`
pairs per category, unit :data:`~xlviz.analysis.agreement_store.UNIT`, the rows
:func:`~xlviz.views.choices.default_rows` picks), computed as the page computes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xlviz.analysis.agreement_store import PAIRS_PER_CATEGORY, UNIT
from xlviz.analysis.reports import ProbeModel
from xlviz.errors import XlvizError

FLOOR = True  # the page's floor toggle starts on
L1_MODEL = "L1 model"  # the reference row of a run with a step 1 (always stored with --systems)

__all__ = ["FLOOR", "L1_MODEL", "PAIRS_PER_CATEGORY", "UNIT", "reads_world_pairs", "system_of", "world_rows",
           "first_view_rows", "AgreementRow", "agreement_results", "store_agreement"]


def reads_world_pairs(m: ProbeModel) -> bool:
    """Whether the page probes row ``m`` on the generated world's minimal pairs: every row of a
    run (L1 models on L1, encoders on their L2), and English models picked in the sidebar."""
    return m.role != "model" or m.language == "en"


def system_of(m: ProbeModel) -> str:
    """The system a run's row belongs to: ``<run> · monotrans`` -> ``monotrans``, ``<run> · X
    (sov body)`` -> ``X``, the reference ``<run> · L1 model`` -> :data:`L1_MODEL`."""
    name = m.name.split(" · ", 1)[-1]
    return name.rsplit(" (", 1)[0] if name.endswith(" body)") else name


def world_rows(run_dir: str | os.PathLike, floor: bool = FLOOR) -> list[ProbeModel]:
    """Every row the page can probe on the run's world pairs (its picker's rows): the run's
    masked LMs of every L2 (:func:`~xlviz.analysis.reports.run_probe_models`) with a masked-LM
    head, none built on a degenerate stage."""
    from xlviz.analysis.reports import probed_and_refused, run_info, run_probe_models
    from xlviz.views.choices import AGREEMENT_VIEW, split_probeable

    info = run_info(run_dir)
    models, _ = split_probeable(run_probe_models(info.path, info.l2s, floor=floor), AGREEMENT_VIEW)
    models, _ = probed_and_refused(models)
    return [m for m in models if reads_world_pairs(m)]


def first_view_rows(run_dir: str | os.PathLike) -> list[ProbeModel]:
    """The rows the page opens on for the run (:func:`~xlviz.views.choices.default_rows` of
    :func:`world_rows`, the floor on)."""
    from xlviz.views.choices import default_rows

    return default_rows(world_rows(run_dir, FLOOR), group=lambda m: m.name)


@dataclass
class AgreementRow:
    """One row's result and how it was had: ``stored`` (read from the run), ``computed`` (in
    ``seconds``) or ``same as a row above`` (byte-identical model and pairs: one file)."""

    model: ProbeModel
    data: str
    request: dict
    result: dict
    how: str
    seconds: float = 0.0


def _chosen(run_dir, systems: Sequence[str] | None) -> list[ProbeModel]:
    if systems is None:
        return first_view_rows(run_dir)
    every = world_rows(run_dir, FLOOR)
    known = list(dict.fromkeys(system_of(m) for m in every))
    unknown = [s for s in systems if s not in known]
    if unknown:
        raise XlvizError(f"no row of {', '.join(unknown)} to probe in this run; its systems: {', '.join(known) or 'none'}",
                         path=run_dir, field="--systems")
    return [m for m in every if system_of(m) in systems or system_of(m) == L1_MODEL]


def agreement_results(run_dir: str | os.PathLike, *, max_per_category: int | None = PAIRS_PER_CATEGORY, unit: str = UNIT,
                      systems: Sequence[str] | None = None, log: Callable[[str], None] | None = None) -> list[AgreementRow]:
    """The agreement results of the rows the page opens on (``systems``: those systems' rows and
    the L1 model's instead) on the run's world pairs: read where the run stores them, computed
    (each model loaded once, nothing written) otherwise."""
    from xlviz.analysis import agreement_store as ag
    from xlviz.analysis.probing import UNITS
    from xlviz.analysis.reports import agreement_data
    from xlviz.analysis.stored import key_of
    from xlviz.models.reference import load_spec

    if unit not in UNITS:
        raise XlvizError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}", field="--unit")
    if max_per_category is not None and (isinstance(max_per_category, bool) or int(max_per_category) < 1):
        raise XlvizError("must be at least 1", field="--max-per-category")
    run = Path(run_dir)
    rows = _chosen(run, systems)
    if not rows:
        raise XlvizError("no model of the run to probe (one built on a degenerate stage is never probed)", path=run)
    pairs: dict[str, list[dict]] = {}
    done: dict[str, dict] = {}  # request key -> result: byte-identical models are scored once
    out = []
    for m in rows:
        data = f"world:{m.language}"
        if data not in pairs:
            pairs[data] = agreement_data(data, run_dir=run, max_per_category=max_per_category)[1]
        req = ag.spec_request(run, m.spec, data, max_per_category, unit, pairs=pairs[data])
        if req is None:  # not a readable local folder: the page computes it, nothing is stored
            if log:
                log(f"  {m.name} ({m.language}): not a readable model folder, skipped")
            continue
        key = key_of(req)
        if key in done:  # the same model and pairs as a row above (one file holds both)
            out.append(AgreementRow(m, data, req, done[key], how="same as a row above"))
            continue
        got = ag.find(run, req)
        if got is not None:
            out.append(AgreementRow(m, data, req, got[0], how="stored"))
        else:
            t0 = time.perf_counter()
            model, tok = load_spec(m.spec, "mlm")
            result = ag.score(model, tok, pairs[data], unit)
            del model
            out.append(AgreementRow(m, data, req, result, how="computed", seconds=time.perf_counter() - t0))
            if log:
                log(f"  {m.name} ({m.language}): {result['n_total']} pairs scored in {out[-1].seconds:.1f} s")
        done[key] = out[-1].result
    return out


def store_agreement(run_dir: str | os.PathLike, rows: Sequence[AgreementRow], record: Callable[[list[dict]], None]) -> list[Path]:
    """Write the computed ``rows`` into the run (the run's writer only: the caller holds its
    lock); ``record(entries)`` lists the files in its manifest. Returns the JSON files written."""
    from xlviz.analysis import agreement_store as ag

    return [ag.write(run_dir, r.request, r.result, record, seconds=r.seconds) for r in rows if r.how == "computed"]
