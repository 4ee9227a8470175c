"""Wu, Conneau et al. (2020): transfer without a shared vocabulary needs shared *top* layers.

``wu-shared-top-K`` is ``jointpair-disjoint`` (one model per L2 on L1 + that L2, each language
its own vocabulary) whose bottom L-K encoder layers are language-specific (one copy per
language) and only the top K are shared (:class:`xlviz.models.shared_layers.SharedTopLayers`).
Pre-training alternates batches of one language (a batch runs through that language's own
bottom layers); fine-tuning trains the L1 model (its bottom layers + the shared top) on L1
QA; zero-shot the L2 reads with its own embeddings and bottom layers under the fine-tuned top.
K = L shares the whole encoder (``jointpair-disjoint`` itself); K = 0 shares none of it.

On a corpus source (text files) the same stages read the corpora through the source (as the
joint models do there: :mod:`xlviz.methods.joint`), without QA fine-tuning; the run's tasks
(sentence retrieval per layer) score each language's model.

``xlviz demo --methods wu-sweep`` trains K = L, ..., 1, 0 (``bench/wu_sweep.py`` plots
zero-shot F1 and per-layer retrieval against K).
"""

from __future__ import annotations

import re

import torch
from transformers import BertForMaskedLM, BertForQuestionAnswering

from xlviz.errors import XlvizError
from xlviz.io import atomic_dir
from xlviz.methods.base import Context, Stage
from xlviz.methods.common import data_stage, new_body_config, on_corpus, run_l1, run_l2s
from xlviz.methods.joint import Joint, Reader, finetune_stage, joint_blocks, language_groups
from xlviz.models.monotrans import MODEL_SIZES, zero_shot_model
from xlviz.models.shared_layers import SharedTopLayers, with_bottom_layers
from xlviz.models.vocab_slice import slice_to_language
from xlviz.training.loop import train
from xlviz.training.masking import masking
from xlviz.training.mlm import mask_tokens
from xlviz.training.multilingual import PerLanguageMLM

PATTERN = re.compile(r"wu-shared-top-(\d+)")


def shared_top(system: str) -> int:
    return int(PATTERN.fullmatch(system).group(1))


def pretrain_stage(system: str, l2: str) -> Stage:
    name = f"s1_{system}-{l2}"
    k = shared_top(system)

    def build(ctx: Context) -> SharedTopLayers:
        reader = Reader(ctx, "jointpair-disjoint", l2)
        config = new_body_config(ctx, reader.size)
        return SharedTopLayers(BertForMaskedLM(config), reader.langs, k)

    def run_train(ctx: Context, model: SharedTopLayers) -> None:
        cfg = ctx.cfg
        reader = Reader(ctx, "jointpair-disjoint", l2)
        gen = torch.Generator().manual_seed(cfg.seed * 31 + ctx.acc.process_index)
        index = {lang: i for i, lang in enumerate(reader.langs)}

        def batches():
            for lang, ids in joint_blocks(ctx, reader, mode="alternate"):
                inputs, labels = mask_tokens(ids, mask_id=reader.toks[lang].mask_token_id, vocab_size=reader.size,
                                             generator=gen, **masking(cfg))
                yield {"input_ids": inputs, "labels": labels, "language": torch.tensor(index[lang])}

        loop, on_log = ctx.loop(name, cfg.pretrain_steps, cfg.pretrain_lr, pretraining="joint")
        if loop.monitor is not None:
            loop.monitor.id_groups = language_groups(reader)
        model = train(PerLanguageMLM(model), batches(), loop, ctx.acc, on_log=on_log, desc=name).model
        ctx.acc.free_memory()
        if not ctx.main:
            return
        with atomic_dir(ctx.path(name)) as tmp:
            for lang in reader.langs:
                slice_to_language(model.to_plain(lang), reader.vocab, lang).save_pretrained(tmp / lang)
                reader.toks[lang].save_pretrained(tmp / lang)

    return Stage(name, "pretrain", build=build, train=run_train, trains=(r".*",),
                 note=f"masked LM on L1 + {l2}, bottom layers per language, top {k} shared")


class Wu(Joint):
    def owns(self, system: str) -> bool:
        return PATTERN.fullmatch(system) is not None

    def units(self, ctx: Context, system: str) -> list[str | None]:
        return run_l2s(ctx)

    def validate(self, system: str, cfg) -> None:
        layers = MODEL_SIZES[cfg.model_size][0]
        if shared_top(system) > layers:
            raise XlvizError(f"{system}: the {cfg.model_size} model has only {layers} layers", field="methods")

    def stages(self, ctx: Context, system: str) -> list[Stage]:
        self.validate(system, ctx.cfg)
        out = [data_stage(ctx)]
        for l2 in run_l2s(ctx):
            out.append(pretrain_stage(system, l2))
            if not on_corpus(ctx):  # a corpus source: scored by its tasks (retrieval), no QA fine-tuning
                out.append(finetune_stage(system, l2))
        return out

    def runs_on(self, system: str) -> tuple[str, ...]:
        return ("world", "corpus")

    def describe(self, system: str) -> str:
        return "jointpair-disjoint with language-specific bottom layers, only the top K shared (Wu et al. 2020)"

    def default_systems(self, every: bool = False, layers: int = 4) -> tuple[str, ...]:
        return (f"wu-shared-top-{max(1, layers // 2)}",)

    def sweeps(self, layers: int = 4) -> dict[str, list[str]]:
        return {"wu-sweep": [f"wu-shared-top-{k}" for k in range(layers, -1, -1)]}

    def qa_model(self, ctx: Context, system: str, lang: str):
        u = f"-{self.unit_for(ctx, system, lang)}"
        qa = BertForQuestionAnswering.from_pretrained(ctx.path(f"s3_{system}{u}"), use_safetensors=True)
        l2, tok = self.encoder(ctx, system, lang)
        if lang == run_l1(ctx):
            return qa, tok
        bottom = l2.config.num_hidden_layers - shared_top(system)
        return with_bottom_layers(zero_shot_model(qa, l2), list(l2.bert.encoder.layer)[:bottom]), tok


METHOD = Wu("wu", ("wu-shared-top-K",), description="shared top layers only (Wu et al. 2020)", order=20)
