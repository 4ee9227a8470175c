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
    p.add_argument("--max-length", type=int, default=384, help="tokens per window (default 384)")
    p.add_argument("--doc-stride", type=int, default=128, help="overlap between windows (default 128)")
    p.add_argument("--batch-size", type=int, default=32, help="windows per forward pass (default 32)")
    p.add_argument("--n-best", type=int, default=20, help="start/end candidates per window (default 20)")
    p.add_argument("--max-answer-length", type=int, default=30, help="longest answer in tokens (default 30)")
    p.add_argument("--device", default="auto", help="torch device, e.g. cpu or cuda (default: cuda if available)")
    p.set_defaults(handler=run)


def _load(model_dir: Path, device: str):
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from xlviz.errors import XlvizError

    if not model_dir.is_dir():
        raise XlvizError("model folder not found", path=model_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as e:
        raise XlvizError(f"cannot load a tokenizer from this folder: {e}", path=model_dir) from None
    if not getattr(tokenizer, "is_fast", False):
        raise XlvizError("the tokenizer is not a fast (tokenizers) one; QA offsets need tokenizer.json", path=model_dir)
    try:
        model = AutoModelForQuestionAnswering.from_pretrained(
            model_dir, use_safetensors=True, local_files_only=True, trust_remote_code=False
        )
    except (OSError, ValueError, KeyError) as e:
        raise XlvizError(f"cannot load a question-answering model (safetensors) from this folder: {e}", path=model_dir) from None
    n_embeddings = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > n_embeddings:
        raise XlvizError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {n_embeddings} embeddings", path=model_dir
        )
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model.to(device)
    except (RuntimeError, AssertionError) as e:
        raise XlvizError(f"cannot move the model to device {device!r}: {e}") from None
    return model, tokenizer


def run(args: argparse.Namespace) -> int:
    from xlviz.data.squad import load_squad
    from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text
    from xlviz.io import atomic_write_json

    examples = load_squad(args.data)
    model, tokenizer = _load(Path(args.model), args.device)
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
        max_length=args.max_length,
        doc_stride=args.doc_stride,
        batch_size=args.batch_size,
        n_best=args.n_best,
        max_answer_length=args.max_answer_length,
        progress=progress,
    )
    atomic_write_json(args.out, predictions_to_text(predictions))
    print(f"predict-qa: wrote {len(predictions)} predictions to {args.out}", file=sys.stderr)
    return 0
