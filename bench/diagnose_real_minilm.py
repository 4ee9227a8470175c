"""Why MONOTRANS from all-MiniLM-L6-v2 needs more than a head: the measurements of docs/real-models.md.

Prints, for the extracted MiniLM folder and (optionally) run folders of ``transfer-corpus``:

1. Token identity per layer: for the non-special tokens of 200 Multi30k task-1 val sentences,
   how often the nearest input embedding (cosine) of a layer's output is the input token.
2. The [MASK] row's norm against the words' and the never-used ``[unusedN]`` rows'.
3. The unigram cross-entropy of 15%-masked targets on Multi30k task-1 val (English), the loss a
   head that only knows word frequencies reaches, and each run's step-1b head on the same targets.
4. Each run's German step-2 rows against MiniLM's English rows on a 40-word hand dictionary
   of caption words: cosine nearest-neighbour rank of the translation among 30,522 rows.

    python bench/diagnose_real_minilm.py --model models/minilm --runs checkpoints/minilm-en-de-*
"""

from __future__ import annotations

import argparse
import collections
import gzip
import math
from pathlib import Path

import torch
import torch.nn.functional as F

# German caption word -> its English translation (one WordPiece token on both sides in the run's vocabularies)
DICTIONARY = dict(
    mann="man", frau="woman", hund="dog", und="and", auf="on", mit="with", rot="red", roten="red", blau="blue",
    spielt="playing", kinder="children", kind="child", junge="boy", wasser="water", straße="street", zwei="two",
    drei="three", strand="beach", hemd="shirt", ball="ball", fahrrad="bike", gebäude="building", schwarz="black",
    weißen="white", steht="standing", sitzt="sitting", menschen="people", leute="people", mädchen="girl", männer="men",
    frauen="women", hut="hat", auto="car", vor="front", einem="a", im="in", der="the", gras="grass", schnee="snow",
    gitarre="guitar",
)


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def token_identity(model, tok, sentences: list[str]) -> list[float]:
    enc = tok(sentences, padding=True, truncation=True, max_length=40, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc, output_hidden_states=True).hidden_states
    ids = enc["input_ids"]
    keep = enc["attention_mask"].bool() & ~torch.isin(ids, torch.tensor(tok.all_special_ids))
    E = F.normalize(model.get_input_embeddings().weight.detach(), dim=-1)
    return [float(((F.normalize(h[keep], dim=-1) @ E.T).argmax(-1) == ids[keep]).float().mean()) for h in hidden]


def masked_targets(tok, sentences: list[str], seed: int = 123):
    enc = tok(sentences, padding=True, truncation=True, max_length=40, return_tensors="pt")
    ids = enc["input_ids"]
    g = torch.Generator().manual_seed(seed)
    chosen = (torch.rand(ids.shape, generator=g) < 0.15) & enc["attention_mask"].bool() & ~torch.isin(ids, torch.tensor(tok.all_special_ids))
    inputs = ids.clone()
    inputs[chosen] = tok.mask_token_id
    return enc, inputs, chosen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/minilm")
    p.add_argument("--runs", nargs="*", default=[], help="transfer-corpus run folders (s1_pretrain, s2_transfer-de)")
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = p.parse_args()
    torch.set_num_threads(1)
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertForMaskedLM, BertModel

    from xlviz.runs import world_path

    data = Path(args.data)
    tok = AutoTokenizer.from_pretrained(args.model)
    body = BertModel.from_pretrained(args.model).eval()
    val_en = lines(data / "multi30k" / "task1" / "val.en.gz")
    ident = token_identity(body, tok, val_en[:200])
    print("token identity (nearest input embedding = input token), layer 0-6: " + " ".join(f"{100 * x:.1f}" for x in ident))
    E = body.get_input_embeddings().weight.detach()
    norms = E.norm(dim=-1)
    unused = [i for t, i in tok.get_vocab().items() if t.startswith("[unused")]
    words = [i for t, i in tok.get_vocab().items() if t.isalpha() and i not in tok.all_special_ids]
    print(f"[MASK] row norm {norms[tok.mask_token_id]:.3f}; words {norms[words].mean():.3f}; [unusedN] {norms[unused].mean():.3f}")

    # unigram cross-entropy of masked targets (frequencies from the English task-2 captions, file 1)
    counts = collections.Counter(t for ids in tok(lines(data / "multi30k" / "task2" / "train.1.en.gz"), add_special_tokens=False)["input_ids"]
                                 for t in ids)
    total = sum(counts.values())
    enc, inputs, chosen = masked_targets(tok, val_en)
    targets = enc["input_ids"][chosen]
    uni = -sum(math.log((counts.get(int(t), 0) + 0.5) / (total + 0.5 * len(tok))) for t in targets) / len(targets)
    print(f"unigram cross-entropy of {len(targets)} masked targets (15%, all [MASK]) on Multi30k val: {uni:.3f}")
    for run in map(Path, args.runs):
        mlm = BertForMaskedLM.from_pretrained(run / "s1_pretrain").eval()
        with torch.no_grad():
            logits = mlm(input_ids=inputs, attention_mask=enc["attention_mask"]).logits[chosen]
        acc = float((logits.argmax(-1) == targets).float().mean())
        print(f"{run.name}: step-1b head on the same targets: loss {F.cross_entropy(logits, targets):.3f}, top-1 {100 * acc:.1f}%;"
              f" [MASK] row norm {mlm.bert.embeddings.word_embeddings.weight[tok.mask_token_id].norm():.3f}")
        s2 = run / "s2_transfer-de"
        if not s2.is_dir():
            continue
        de = AutoTokenizer.from_pretrained(world_path(run, "tokenizer", language="de"))
        Ede = F.normalize(load_file(s2 / "model.safetensors")["bert.embeddings.word_embeddings.weight"], dim=-1)
        Een = F.normalize(E, dim=-1)
        pairs = [(de.convert_tokens_to_ids(g), tok.convert_tokens_to_ids(e)) for g, e in DICTIONARY.items()]
        pairs = [(g, e) for g, e in pairs if g != de.unk_token_id and e != tok.unk_token_id]
        sims = Ede[[g for g, _ in pairs]] @ Een.T
        ranks = sorted(int((sims[i] > sims[i, e]).sum()) + 1 for i, (_, e) in enumerate(pairs))
        print(f"{run.name}: German rows vs English rows, {len(pairs)} dictionary pairs: top-1 {sum(r == 1 for r in ranks)}, "
              f"top-10 {sum(r <= 10 for r in ranks)}, top-100 {sum(r <= 100 for r in ranks)}, median rank {ranks[len(ranks) // 2]} of {len(E)}")


if __name__ == "__main__":
    main()
