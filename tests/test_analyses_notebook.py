"""examples/analyses.ipynb executed on a tiny run (the app fixture's, with saved L2 predictions of
two systems): slices, words versus order and patching draw, and no cell fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_analyses_notebook_runs(tmp_path):
    import nbclient
    import nbformat

    from tests.app_fixtures import make_run
    from xlviz.io import atomic_write_json

    run = make_run(tmp_path, "run")
    data = json.loads((run / "world" / "qa" / "test.sov.json").read_text())
    qas = [q for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    for system, every in (("monotrans", 2), ("floor", 3)):
        atomic_write_json(run / "predictions" / f"{system}-sov.json",
                          {q["id"]: q["answers"][0]["text"] if i % every == 0 else "" for i, q in enumerate(qas)})
    nb = nbformat.read(ROOT / "examples" / "analyses.ipynb", as_version=4)
    old = {k: os.environ.get(k) for k in ("XLVIZ_EXAMPLE_RUN", "XLVIZ_EXAMPLE_LIMIT", "PYTHONPATH")}
    os.environ.update(XLVIZ_EXAMPLE_RUN=str(run), XLVIZ_EXAMPLE_LIMIT="6", PYTHONPATH=str(ROOT))
    try:
        nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert len([o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]) >= 4
    html = "\n".join(o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {}))
    assert "answer role: object" in html and "paired F1 difference" in html  # the slice table
    assert "order not read" in html and "L2 words, English order" in html  # words versus order
    assert "xlviz-answers" in html  # a slice's question on its card
