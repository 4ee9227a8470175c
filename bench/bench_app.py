"""App benchmark: time to render each page with a cached default model, and attention for a
2 × 64-token pair.

    python bench/bench_app.py [--repeat 3]

Pages are rendered with Streamlit's AppTest (the script run the server does, without the
browser's drawing) on a fake run folder (tests/app_fixtures.py: tiny models) after one warm-up
render, so models and predictions are cached as they are for a user clicking around.
Attention is timed on random BERTs of the transfer pipeline's model sizes (tiny, small,
medium) and of BERT-base size (12 layers, 12 heads, 768), the realistic worst case. Targets: page ≤ 2 s, attention
≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAGES = ["home", "runs", "xquad", "attention"]
PAGE_TARGET_S = 2.0
ATTENTION_TARGET_S = 0.5


def bench_pages(root: Path, repeat: int) -> list[tuple[str, float, float]]:
    from streamlit.testing.v1 import AppTest

    os.environ["XLVIZ_CHECKPOINTS"] = str(root)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.run()
    rows = []
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()  # warm-up: loads models, computes predictions
        assert not at.exception, at.exception
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            at.switch_page(f"pages/{page}.py").run()
            times.append(time.perf_counter() - t)
            assert not at.exception, at.exception
        rows.append((page, statistics.median(times), max(times)))
    return rows


def _pair(tokenizer, n: int = 64) -> tuple[list[str], list[str]]:
    words = [w for w in tokenizer.get_vocab() if w.isalpha() and not w.startswith("[")][:50] or ["a"]
    a = [words[i % len(words)] for i in range(n)]
    b = [words[(i * 7) % len(words)] for i in range(n)]
    return a, b


def bench_attention(model_dir: Path, label: str, repeat: int) -> tuple[str, float, int]:
    from xlviz.analysis.attention import attention_maps, attention_slice, cross_attention_share
    from xlviz.models.loading import load_model

    model, tok = load_model(str(model_dir), task="base", attn_implementation="eager")
    a, b = _pair(tok)
    # trim each side to 64 tokens
    while len(tok(a, is_split_into_words=True, add_special_tokens=False)["input_ids"]) > 64:
        a = a[:-1]
    while len(tok(b, is_split_into_words=True, add_special_tokens=False)["input_ids"]) > 64:
        b = b[:-1]
    attention_maps(model, tok, a, b, max_length=160)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        res = attention_maps(model, tok, a, b, max_length=160)
        cross_attention_share(res)
        attention_slice(res, layers=[res.n_layers - 1], heads=[0], hide_special=True)
        times.append(time.perf_counter() - t)
    return label, statistics.median(times), len(res.tokens)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from tests.app_fixtures import make_run
    from tests.tiny_models import make_tiny

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkpoints"
        run = make_run(root, "bench-run")
        pages = bench_pages(root, args.repeat)
        att = []
        for label, size in (("run 'tiny' (2 × 2, 64)", (2, 2, 64)), ("run 'small' (4 × 4, 128)", (4, 4, 128)),
                            ("run 'medium' (6 × 4, 256)", (6, 4, 256))):
            layers, heads, hidden = size
            folder = make_tiny("bert", Path(tmp) / label.split("'")[1], task="base", hidden_size=hidden,
                               num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden,
                               max_position_embeddings=512)
            att.append(bench_attention(folder, label, args.repeat))
        base = make_tiny("bert", Path(tmp) / "bert-base-sized", task="base", hidden_size=768, num_hidden_layers=12,
                         num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512)
        att.append(bench_attention(base, "BERT-base size (12 × 12, 768)", args.repeat))

    print(f"\n{'page render (AppTest, warm caches)':<40} {'median s':>9} {'max s':>7}  target ≤ {PAGE_TARGET_S:.1f} s")
    print("-" * 72)
    for page, med, mx in pages:
        flag = "ok" if med <= PAGE_TARGET_S else "SLOW"
        print(f"{page:<40} {med:>9.3f} {mx:>7.3f}  {flag}")
    print(f"\n{'attention, 2 × 64-token pair':<40} {'median s':>9} {'tokens':>7}  target ≤ {ATTENTION_TARGET_S:.1f} s")
    print("-" * 72)
    for label, med, n in att:
        flag = "ok" if med <= ATTENTION_TARGET_S else "SLOW"
        print(f"{label:<40} {med:>9.3f} {n:>7d}  {flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
