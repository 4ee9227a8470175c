"""``xlviz predict-qa --model DIR --data FILE.json --out PRED.json``: answers from a local QA model.

Writes the official predictions shape ``{id: text}`` (atomically), ready for ``evaluate-qa``.
The model folder is a plain Hugging Face QA export (config, safetensors weights, fast
tokenizer); only safetensors are loaded and no remote code is run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict-qa",
        help="predict SQuAD-style answers with a local QA model folder and write {id: text}",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--model", required=True, metavar="DIR", help="local Hugging Face QA model folder")
    p.add_argument("--data", required=True, metavar="FILE.json", help="SQuAD/XQuAD data file")
    p.add_argument("--out", required=True, metavar="PRED.json", help="where to write {id: text}")
    p.add_argument("--max-length", type=int, default=None, help="tokens per window (default: 384, or the model's position limit if smaller)")
    p.add_argument("--doc-stride", type=int, default=None, help="overlap between windows (default: a third of the window, at most 128)")
    p.add_argument("--batch-size", type=int, default=32, help="windows per forward pass (default 32)")
    p.add_argument("--n-best", type=int, default=20, help="start/end candidates per window (default 20)")
    p.add_argument("--max-answer-length", type=int, default=30, help="longest answer in tokens (default 30)")
    p.add_argument("--language", default=None, metavar="CODE",
                   help="the language of --data: refused when the model folder's xlviz.json (or its run's manifest) says it reads another")
    p.add_argument("--device", default="auto", help="torch device, e.g. cpu or cuda (default: cuda if available)")
    p.set_defaults(handler=run)


def _load(model_dir: Path, device: str, language: str | None = None):
    """The model and its tokenizer through :func:`xlviz.models.loading.load_model`, the one
    loading path of every command (safetensors checked, config and weights matched, tokenizer
    required and fitting the embeddings, the one the export was saved with by its ``xlviz.json``);
    a folder without a fast tokenizer is refused rather than predicting with the wrong vocabulary."""
    import torch

    from xlviz.errors import XlvizError
    from xlviz.models.loading import load_model

    if not model_dir.is_dir():
        raise XlvizError("model folder not found", path=model_dir)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = load_model(model_dir, task="qa", device=device, new_head="error", language=language)
    if not getattr(tokenizer, "is_fast", False):
        raise XlvizError("the tokenizer is not a fast (tokenizers) one; QA offsets need tokenizer.json", path=model_dir)
    return model, tokenizer


def window_length(model, requested: int | None) -> int:
    """Tokens per window: ``requested`` if given, else 384; never more than the model's
    position embeddings (xlviz's own exports have 96)."""
    from xlviz.errors import XlvizError

    limit = getattr(model.config, "max_position_embeddings", None)
    if isinstance(limit, int) and getattr(model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2  # positions start after the padding id
    if requested is None:
        return min(384, limit) if isinstance(limit, int) and limit > 0 else 384
    if isinstance(limit, int) and limit > 0 and requested > limit:
        raise XlvizError(f"{requested} tokens per window, but the model has only {limit} positions", field="--max-length")
    return requested


def run(args: argparse.Namespace) -> int:
    from xlviz.data.squad import load_squad
    from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text
    from xlviz.io import atomic_write_json

    from xlviz.errors import XlvizError

    out = Path(args.out)
    if out.is_dir():
        raise XlvizError("is a folder; give the predictions file to write", path=out, field="--out")
    for flag, value, hi in (("--batch-size", args.batch_size, 8192), ("--n-best", args.n_best, 1000), ("--max-answer-length", args.max_answer_length, 512)):
        if not 1 <= value <= hi:
            raise XlvizError(f"must be between 1 and {hi}, got {value}", field=flag)
    examples = load_squad(args.data)
    model, tokenizer = _load(Path(args.model), args.device, getattr(args, "language", None))
    max_length = window_length(model, args.max_length)
    doc_stride = args.doc_stride if args.doc_stride is not None else min(128, max_length // 3)
    if not 1 <= doc_stride < max_length:
        raise XlvizError(f"must be between 1 and the window length {max_length} - 1, got {doc_stride}", field="--doc-stride")
    last = [-1]

    def progress(done: int, total: int) -> None:
        pct = 100 * done // max(total, 1)
        if pct >= last[0] + 10 or done == total:
            last[0] = pct
            print(f"predict-qa: {done}/{total} windows", file=sys.stderr, flush=True)

    predictions = predict_qa(
        model,
        tokenizer,
        examples,
        max_length=max_length,
        doc_stride=doc_stride,
        batch_size=args.batch_size,
        n_best=args.n_best,
        max_answer_length=args.max_answer_length,
        progress=progress,
    )
    atomic_write_json(args.out, predictions_to_text(predictions))
    print(f"predict-qa: wrote {len(predictions)} predictions to {args.out}", file=sys.stderr)
    return 0
