"""The configuration of one transfer run: everything needed to reproduce it.

Validated on load so a bad value stops the run at once with a message naming the field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from pathlib import Path

from xlviz.data.world import WorldConfig
from xlviz.errors import XlvizError, shown_keys
from xlviz.names import check_config
from xlviz.transfer.settings import RunSettings, methods_help, sources_help, tasks_help  # noqa: F401 (importable here)

MIXED_PRECISION = ("auto", "no", "bf16", "fp16")
DEMO_METHODS = ["monotrans", "floor", "dictionary-oracle", "jointpair-disjoint"]


def parse_variants(text: str | list[str]) -> list[str]:
    """The former ``--variants`` ("base,floor" or "all") -> MONOTRANS system names."""
    from xlviz.methods.monotrans import LEGACY_VARIANTS

    items = text if isinstance(text, list) else [t.strip() for t in str(text).split(",") if t.strip()]
    if items == ["all"]:
        return list(LEGACY_VARIANTS.values())
    unknown = [v for v in items if v not in LEGACY_VARIANTS]
    if unknown or not items:
        raise XlvizError(f"unknown variant(s) {unknown}; choose from {list(LEGACY_VARIANTS)} or 'all'", field="variants")
    return [LEGACY_VARIANTS[v] for v in items]


POOLINGS = ("mean", "mean_no_special", "cls")

# The former transfer-corpus config (one flat object): its settings -> this config's.
LEGACY_CORPUS_RENAMED = {"batch_size": "mlm_batch_size", "mask_prob": "mlm_probability", "qa_batch_size": "batch_size"}
LEGACY_CORPUS_DATA = ("l1", "l2", "l1_corpus", "l2_corpus", "parallel", "parallel_max", "tokenizer_lines", "max_lines", "lowercase",
                      "shuffle_buffer", "l2_vocab_size", "qa_train", "qa_train_paragraphs", "qa_train_articles", "qa_eval")
LEGACY_CORPUS_KEYS = frozenset({"l1_corpus", "l2_corpus", "parallel", "qa_eval", "l1", "l2", "mask_prob", "qa_batch_size"})


def legacy_corpus_dict(d: dict) -> dict:
    """A ``transfer-corpus`` config (or a run folder it wrote) as a run on the ``files`` source
    with MONOTRANS and its floor: the same settings under their names here, so the same run."""
    out: dict = {"source": "files", "methods": ["monotrans", "floor"], "data": {}}
    for key, value in d.items():
        if key.startswith("_"):
            continue
        if key in LEGACY_CORPUS_DATA:
            out["data"][key] = value
        else:
            out[LEGACY_CORPUS_RENAMED.get(key, key)] = value
    return out


def _all_methods():
    from xlviz.methods import methods

    return list(methods().values())


@dataclass
class TransferSettings(RunSettings):
    """The settings every run has (declared in :class:`xlviz.transfer.settings.RunSettings`),
    read and checked; :data:`TransferConfig` adds each method's options (below)."""

    @property
    def systems(self) -> list[str]:
        return list(self.methods)

    @classmethod
    def from_dict(cls, d: dict, *, path: str | None = None) -> "TransferSettings":
        if not isinstance(d, dict):
            raise XlvizError("a transfer config must be a JSON object", path=path)
        if "versions" in d:  # a run recorded before these settings: its pre-trainings warmed up as they ran
            d = {**d, "pretrain_warmup_ratio": d.get("pretrain_warmup_ratio", d.get("warmup_ratio", 0.06))}
            d.setdefault("joint_warmup_ratio", d["pretrain_warmup_ratio"])
            d.setdefault("l2_body_warmup_ratio", d["pretrain_warmup_ratio"])  # L2 bodies warmed up as step 1 did
        d = {k: v for k, v in d.items() if k not in ("versions", "_comment", "_doc")}
        if "source" not in d and LEGACY_CORPUS_KEYS & set(d):  # a transfer-corpus config or run folder
            d = legacy_corpus_dict(d)
        from xlviz.data.sources import source_of

        source = source_of(d.get("source", "world")) if isinstance(d.get("source", "world"), str) else None
        for key, value in (source.defaults.items() if source is not None else ()):
            d.setdefault(key, json.loads(json.dumps(value)))
        if "variants" in d:  # a config or run folder from before the method registry
            legacy = parse_variants(d.pop("variants"))
            d.setdefault("methods", legacy)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise XlvizError(f"unknown setting(s) {shown_keys(unknown)}; known: {sorted(known)}", path=path, field=unknown[0])
        world = d.pop("world", None)
        cfg = cls(**d)
        if isinstance(world, WorldConfig):
            cfg.world = world
        elif world is not None:
            if not isinstance(world, dict):
                raise XlvizError("must be an object", path=path, field="world")
            cfg.world = WorldConfig.from_dict(world, path=path)
        cfg.validate(path=path)
        return cfg

    @classmethod
    def from_file(cls, path: str | Path) -> "TransferSettings":
        from xlviz.io import read_json

        return cls.from_dict(read_json(path, what="transfer config"), path=str(path))

    def to_dict(self) -> dict:
        """Every setting; the world's as ``WorldConfig.to_dict`` writes them (runs recorded
        before its shared-material settings existed keep their config.json)."""
        d = asdict(self)
        d["world"] = self.world.to_dict()
        return d

    def validate(self, *, path: str | None = None) -> None:
        for name in ("vocab_size", "block_size", "qa_max_length", "doc_stride", "batch_size", "mlm_batch_size", "pretrain_steps",
                     "transfer_steps", "finetune_steps", "grad_accum", "log_every", "max_answer_length"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise XlvizError(f"must be a positive integer, got {v!r}", path=path, field=name)
        for name in ("pretrain_lr", "transfer_lr", "finetune_lr", "l2_init_std"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0:
                raise XlvizError(f"must be a positive number, got {v!r}", path=path, field=name)
        if isinstance(self.mlm_probability, bool) or not isinstance(self.mlm_probability, (int, float)) or not 0 < self.mlm_probability < 1:
            raise XlvizError(f"must be a number in (0, 1), got {self.mlm_probability!r}", path=path, field="mlm_probability")
        if isinstance(self.mlm_random_share, bool) or not isinstance(self.mlm_random_share, (int, float)) \
                or not 0 <= self.mlm_random_share <= 0.9:
            raise XlvizError(f"must be a number in [0, 0.9] (the unchanged share is 0.1), got {self.mlm_random_share!r}",
                             path=path, field="mlm_random_share")
        if isinstance(self.long_block_share, bool) or not isinstance(self.long_block_share, (int, float)) or not 0 <= self.long_block_share <= 1:
            raise XlvizError(f"must be a number in [0, 1], got {self.long_block_share!r}", path=path, field="long_block_share")
        for name in ("warmup_ratio", "pretrain_warmup_ratio", "joint_warmup_ratio", "l2_body_warmup_ratio", "adam_beta2"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
                raise XlvizError(f"must be a number in [0, 1), got {v!r}", path=path, field=name)
        from xlviz.models.monotrans import MODEL_SIZES  # torch: only to validate (the app's forms read the settings)

        if self.model_size not in MODEL_SIZES:
            raise XlvizError(f"unknown model size {self.model_size!r}; choose from {list(MODEL_SIZES)}", path=path, field="model_size")
        if self.mixed_precision not in MIXED_PRECISION:
            raise XlvizError(f"choose from {list(MIXED_PRECISION)}", path=path, field="mixed_precision")
        if isinstance(self.eval_every, bool) or not isinstance(self.eval_every, int) or self.eval_every < 0:
            raise XlvizError(f"must be 0 (no dev scores) or a positive integer, got {self.eval_every!r}", path=path, field="eval_every")
        from xlviz.training.tracking import parse_log_with

        parse_log_with(self.log_with, path=path)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 0 <= self.workers <= 64:
            raise XlvizError(f"must be an integer from 0 (one per core) to 64, got {self.workers!r}", path=path, field="workers")
        for name in ("verdict_mlm_margin", "verdict_qa_margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not -100 <= v <= 100:
                raise XlvizError(f"must be a number from -100 to 100, got {v!r}", path=path, field=name)
        if not isinstance(self.strict, bool):
            raise XlvizError(f"must be true or false, got {self.strict!r}", path=path, field="strict")
        if self.doc_stride >= self.qa_max_length:
            raise XlvizError("must be smaller than qa_max_length", path=path, field="doc_stride")
        if self.vocab_size < 50:
            raise XlvizError("must be at least 50", path=path, field="vocab_size")
        self.validate_corpus_options(path=path)
        from xlviz.methods import method_of, methods, resolve

        for m in methods().values():  # each method's options (xlviz.methods.options), for every run
            if m.options is not None:
                m.options.of(self, path=path)

        self.methods = resolve(self.methods, layers=MODEL_SIZES[self.model_size][0])
        self.validate_source(path=path)
        for system in self.methods:
            method_of(system).validate(system, self)
        if not isinstance(self.seed, int):
            raise XlvizError(f"must be an integer, got {self.seed!r}", path=path, field="seed")
        self.world.validate(path=path)
        check_config(self, path=path)

    def source_options(self, *, path: str | None = None):
        """The source's validated options object for ``data`` (None for a source without options)."""
        from xlviz.data.sources import source_of

        try:
            return source_of(self.source).options(self.data, path=path)
        except TypeError as e:
            raise XlvizError(f"bad data options: {e}", path=path, field="data") from None

    def check_files(self) -> None:
        """The files the source's options name exist and read as text (a corpus source's
        ``check_files``): called before a run folder is made, so a missing or wrong file leaves
        no empty failed run behind. Not part of :meth:`validate`: a finished run's config stays
        readable after its input files move."""
        check = getattr(self.source_options(), "check_files", None)
        if check is not None:
            check()

    def offers(self) -> frozenset[str]:
        """What the run's source offers with its options and ``init_model``."""
        from xlviz.data.sources import source_of

        return source_of(self.source).offers(self.source_options(), self.init_model)

    def validate_source(self, *, path: str | None = None) -> None:
        """The source and its options, and every system's premise against what the source offers
        (:meth:`xlviz.methods.base.Method.needs`): one line naming ``methods`` before anything trains."""
        from xlviz.data.sources import source_of
        from xlviz.limits import check_limits
        from xlviz.methods import method_of
        from xlviz.names import check_code

        if not isinstance(self.source, str):
            raise XlvizError(f"must be a source name, got {self.source!r}", path=path, field="source")
        src = source_of(self.source)
        if not isinstance(self.data, dict):
            raise XlvizError("must be an object (the source's options)", path=path, field="data")
        opts = self.source_options(path=path)
        if opts is not None:
            check_limits(opts, path=path, prefix="data.")
            self.data = asdict(opts)  # every option recorded, defaults included: the run reproduces
            langs = src.languages(opts)
            for key, code in zip(("data.l1", "data.l2"), langs or ()):
                check_code(code, field=key, path=path)
        if self.init_model is not None and (not isinstance(self.init_model, str) or not self.init_model.strip()):
            raise XlvizError("must be a model folder or hub id", path=path, field="init_model")
        if self.init_model and not src.pretrained:
            raise XlvizError(f"the {src.name} source has no stages that start from a pre-trained model; use a corpus source "
                             "(multi30k, files) with init_model", path=path, field="init_model")
        offers = src.offers(opts, self.init_model)
        from xlviz.transfer.tasks import run_tasks

        scored = run_tasks(self.tasks, src.kind, offers, path=path)
        for system in self.methods:
            method = method_of(system)
            missing = sorted(method.needs(system, self) - offers)
            if missing:
                raise XlvizError(f"system {system!r} needs {', '.join(missing)}, which the {src.name} source does not offer "
                                 f"(it offers {', '.join(sorted(offers)) or 'nothing'})", path=path, field="methods")
            if src.kind not in method.runs_on(system):
                runnable = [s for m in _all_methods() for s in m.systems if src.kind in m.runs_on(s)]
                raise XlvizError(f"system {system!r} has no stages for {src.kind} sources such as {src.name} yet; "
                                 f"there choose from {runnable}", path=path, field="methods")
            if self.init_model and not method.starts_from_l1_model(system):
                starting = [s for m in _all_methods() for s in m.systems if src.kind in m.runs_on(s) and m.starts_from_l1_model(s)]
                raise XlvizError(f"system {system!r} pre-trains its own model from scratch and would not start from init_model "
                                 f"{self.init_model!r}; with init_model choose from {starting}, and run {system!r} in a config "
                                 "without it", path=path, field="methods")
            if src.kind == "corpus" and "qa" in scored and not method.corpus_qa(system):
                qa_systems = [s for m in _all_methods() for s in m.systems if m.corpus_qa(s)]
                raise XlvizError(f"system {system!r} is not fine-tuned for QA on {src.kind} sources yet (there only {qa_systems} "
                                 "are); score it without QA data (no qa_train) or with --tasks retrieval", path=path, field="methods")

    def validate_corpus_options(self, *, path: str | None = None) -> None:
        """The settings of the retrieval stage on a corpus source."""
        if isinstance(self.eval_max_length, bool) or not isinstance(self.eval_max_length, int) or self.eval_max_length <= 0:
            raise XlvizError(f"must be a positive integer, got {self.eval_max_length!r}", path=path, field="eval_max_length")
        if self.eval_pooling not in POOLINGS:
            raise XlvizError(f"choose from {list(POOLINGS)}", path=path, field="eval_pooling")

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def with_method_options(base: type, name: str = "TransferConfig") -> type:
    """``base`` with one flat setting per field of every registered method's options dataclass
    (:mod:`xlviz.methods.options`): the options are declared once, in their method's module,
    and a run's ``config.json`` keeps listing every setting under its own name as before
    (``"ppa_steps": 1000``), so runs written earlier load and resume unchanged."""
    from xlviz.methods.options import all_option_fields

    taken = {f.name for f in fields(base)}
    extra = []
    for opt in all_option_fields():
        if opt.name in taken:
            raise RuntimeError(f"method {opt.method}'s option {opt.name!r} is also a setting of every run")
        extra.append((opt.name, opt.type, field(default=opt.default)))
    cls = make_dataclass(name, extra, bases=(base,))
    cls.__module__ = base.__module__  # pickled by name, as a class of this module
    cls.__doc__ = f"{base.__doc__.splitlines()[0]} Each method's options are settings too (flat: ``ppa_steps``, ``veco_init`` ...)."
    return cls


# The configuration of one transfer run: the settings above and every method's options.
TransferConfig = with_method_options(TransferSettings)
