"""What the app can load: models and data sets found in run folders, plus typed-in paths.

No Streamlit here, so the discovery logic is testable on its own. A transferred model is one
choice per language (its embeddings differ per language: "run X · en", "run X · sov"); a run's
zero-shot QA system (its exports, from the run's manifest) is one choice covering all its languages, because
that is how the paper compares systems (a row of Table 3).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from xlviz.models.reference import ModelSpec  # the one model reference of the app and the analyses
from xlviz.runs import Run, checkpoints_root, list_runs, owner_of, world_files, world_path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model")
MODEL_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class ModelChoice:
    """An entry of the sidebar's model picker.

    ``per_language`` maps a language to the model that reads it; ``any_language`` is a model
    that reads every language (a multilingual hub model, a typed path). ``qa`` says whether it
    has a trained QA head (exports, fine-tuned folders).
    """

    key: str
    label: str
    per_language: tuple[tuple[str, ModelSpec], ...] = ()
    any_language: ModelSpec | None = None
    qa: bool = False
    run: str | None = None
    group: str = ""
    short: str = ""  # a compact name for tables and legends
    system: str | None = None  # a run's exported QA system (its results rows' "system")

    @property
    def name(self) -> str:
        return self.short or self.label

    def languages(self) -> list[str] | None:
        """Languages it covers, or None for every language."""
        if self.any_language is not None:
            return None
        return [lang for lang, _ in self.per_language]

    def covers(self, lang: str) -> bool:
        return self.any_language is not None or any(l == lang for l, _ in self.per_language)

    def ref_for(self, lang: str | None) -> ModelSpec | None:
        if self.any_language is not None:
            return self.any_language
        for l, ref in self.per_language:
            if l == lang:
                return ref
        if lang is None and self.per_language:
            return self.per_language[0][1]
        return None


def has_tokenizer(folder: Path) -> bool:
    return any((folder / f).exists() for f in TOKENIZER_FILES)


def is_hf_model_folder(folder: Path) -> bool:
    """A ``save_pretrained`` folder: a config.json with ``model_type`` and weights."""
    cfg = folder / "config.json"
    if not cfg.is_file() or not any((folder / f).exists() for f in MODEL_FILES):
        return False
    from xlviz import confined, limits
    from xlviz.errors import XlvizError

    try:
        config = confined.read_json(cfg, root=None, max_bytes=limits.RUN_JSON_MAX_BYTES, what="model config")
    except XlvizError:
        return False
    return isinstance(config, dict) and "model_type" in config


def is_qa_folder(folder: Path) -> bool:
    archs = _architectures(folder)
    if archs is None:
        return False
    return any("QuestionAnswering" in a for a in archs)


def _architectures(folder: Path) -> list[str] | None:
    """The ``architectures`` of a model folder's ``config.json`` (a regular file, bounded: a
    FIFO or ``/dev/zero`` there must not hang the sidebar), or None when it cannot be read."""
    from xlviz import confined, limits
    from xlviz.errors import XlvizError

    try:
        cfg = confined.read_json(folder / "config.json", root=None, max_bytes=limits.RUN_JSON_MAX_BYTES, what="model config")
    except XlvizError:
        return None
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def run_languages(run: Run) -> list[str]:
    """The run's languages, L1 first: from its config, else from its world's tokenizers."""
    langs: list[str] = []
    try:
        cfg = run.config()
    except Exception:  # noqa: BLE001 - a half-written run must not break discovery
        cfg = {}
    l1 = config_value(cfg, "l1", "source_language", "lang1") or None
    l2s = config_value(cfg, "languages", "target_languages", "l2")
    if isinstance(l1, str):
        langs.append(l1)
    if isinstance(l2s, str):
        l2s = [s.strip() for s in l2s.split(",") if s.strip()]
    if isinstance(l2s, list):  # ["sov"] or the world's [{"code": "sov", "order": ..., "script": ...}]
        langs += [l if isinstance(l, str) else l.get("code") for l in l2s if isinstance(l, str) or (isinstance(l, dict) and l.get("code"))]
    langs += list(world_files(run, "tokenizer"))
    langs += [lang for lang in world_files(run, "qa") if QA_LANGUAGE.fullmatch(lang)]
    if l1 is None:  # the generated world's L1 is always English
        langs.insert(0, "en")
    return list(dict.fromkeys(langs))


def config_value(cfg: dict, *names: str):
    """First value for one of ``names`` at the top level or one level down."""
    if not isinstance(cfg, dict):
        return None
    for n in names:
        if n in cfg:
            return cfg[n]
    for v in cfg.values():
        if isinstance(v, dict):
            for n in names:
                if n in v:
                    return v[n]
    return None


def run_model_choices(run: Run) -> list[ModelChoice]:
    """One choice per language model of a run, plus one QA choice per exported system. What
    each folder is comes from the run's manifest (:mod:`xlviz.runs`), never from its name."""
    from xlviz.errors import XlvizError
    from xlviz.runs import artefacts

    langs = run_languages(run)
    l1 = langs[0] if langs else "en"
    out: list[ModelChoice] = []
    try:
        found = artefacts(run)
    except XlvizError:  # a malformed manifest: the run's table says why; no models offered from it
        return out

    def ref(folder: Path, lang: str) -> ModelSpec:
        tok = None if has_tokenizer(folder) else str(world_path(run, "tokenizer", language=lang))
        return ModelSpec(str(folder), tok)

    stages = [a for a in found if a.kind == "stage" and is_hf_model_folder(a.folder)]
    for a in stages:
        if a.role == "pretrained" and a.language == l1 and a.variant is None:
            out.append(ModelChoice(f"run:{run.name}:{a.path}", f"{l1} · encoder (pre-trained) · {run.name}", ((l1, ref(a.folder, l1)),),
                                   run=run.name, group="run", short=f"{l1} encoder"))
    for a in stages:
        if a.role == "transferred" and a.language:
            lang, variant = a.language, a.variant
            kind = "encoder (transferred" + (f", {variant})" if variant else ")")
            out.append(ModelChoice(f"run:{run.name}:{a.path}", f"{lang} · {kind} · {run.name}", ((lang, ref(a.folder, lang)),),
                                   run=run.name, group="run", short=f"{lang} encoder" + (f" {variant}" if variant else "")))
    for a in stages:
        if a.role == "finetuned":
            variant = a.variant or ""
            label = f"{l1} · QA fine-tuned" + (f" ({variant})" if variant else "") + f" · {run.name}"
            out.append(ModelChoice(f"run:{run.name}:{a.path}", label, ((l1, ref(a.folder, l1)),), qa=True, run=run.name, group="run",
                                   short=f"{l1} QA" + (f" {variant}" if variant else "")))
    try:  # the run's own order of systems (its config's methods: MONOTRANS first), then by name
        trained = config_value(run.config(), "methods")
    except Exception:  # noqa: BLE001 - a half-written run must not break discovery
        trained = None
    rank = {s: i for i, s in enumerate(trained)} if isinstance(trained, list) else {}
    order = {l: i for i, l in enumerate(langs)}
    # exports: each system's QA models; encoders: the masked LM reading each language in that
    # system (what Alignment and Probing compare; for a model with a cross-attention module of
    # its own, what Attention shows it with)
    for kind_, sub, kind, qa in (("export", "export", "QA", True), ("encoder", "encoders", "encoder", False)):
        systems: dict[str, list[tuple[str, ModelSpec]]] = {}
        for a in found:
            if a.kind == kind_ and a.language and is_hf_model_folder(a.folder):
                systems.setdefault(a.name, []).append((a.language, ref(a.folder, a.language)))
        systems = dict(sorted(systems.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
        for system, refs in systems.items():
            refs.sort(key=lambda lr: (order.get(lr[0], len(order)), lr[0]))
            label = f"{system} · {kind} (" + ", ".join(l for l, _ in refs) + f") · {run.name}"
            out.append(ModelChoice(f"run:{run.name}:{sub}:{system}", label, tuple(refs), qa=qa, run=run.name, group=sub,
                                   short=system if qa else f"{system} encoder", system=system if qa else None))
    return out


def with_aliases(models: list[ModelChoice]) -> list[ModelChoice]:
    """The picked models with short, unique names for tables and legends: the method or
    language and kind alone when the picks come from one run, with the run's name otherwise."""
    import dataclasses

    runs = {m.run for m in models if m.run}
    out = []
    for m in models:
        base = m.short or m.label
        name = base if (len(runs) <= 1 or not m.run) else f"{base} · {m.run}"
        out.append(dataclasses.replace(m, short=name))
    names = [m.short for m in out]
    return [dataclasses.replace(m, short=f"{m.short} ({i + 1})") if names.count(m.short) > 1 else m for i, m in enumerate(out)]


@dataclass(frozen=True)
class FolderCheck:
    """What a typed model folder or hub id can do, checked once when it is added."""

    ok: bool
    message: str
    qa: bool = False
    mlm: bool = False


def _heads(archs: object) -> tuple[bool, bool]:
    """(QA head, masked-LM head) from a config's ``architectures``."""
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    return (any("QuestionAnswering" in a for a in archs),
            any("MaskedLM" in a or "ForPreTraining" in a for a in archs))


def has_mlm_head(path: str | os.PathLike) -> bool | None:
    """Whether the model at ``path`` (a folder, or a cached hub id) has a masked-LM head, from
    its config's ``architectures``: True, False, or None when it cannot tell (no architectures
    recorded). An ELECTRA ``ForPreTraining`` is a discriminator: no masked-LM head."""
    folder = Path(os.path.expanduser(str(path)))
    if folder.is_dir():
        archs = _architectures(folder)
        if archs is None:
            return False
    else:
        config, _ = cached_hub_config(str(path))
        if config is None:
            return False
        archs = config.get("architectures")
    if not isinstance(archs, list) or not archs:
        return None
    return any(isinstance(a, str) and ("MaskedLM" in a or ("ForPreTraining" in a and "Electra" not in a)) for a in archs)


@dataclass(frozen=True)
class Capabilities:
    """What a model can do, read from its config and folder (no weights loaded): the one check
    that decides what each view offers it. ``mlm``: a masked-LM head (None: the config does not
    say); ``qa``: a QA head; ``positions``: how many tokens it reads (None: not recorded);
    ``tokenizer``: tokenizer files of its own (a run stage folder reads its run's instead)."""

    mlm: bool | None
    qa: bool
    positions: int | None
    tokenizer: bool


# what each view needs of a model (its loader's task): probing and the floor score or rebuild
# with the masked-LM head (the CLI's ``xlviz analyse agreement|wic`` loads the same), XQuAD answers
# with a QA head (a typed folder without one still answers, badly, and says so)
AGREEMENT_VIEW, WIC_VIEW, FLOOR_VIEW, QA_VIEW = "agreement", "word in context", "floor", "qa"
NEEDS = {AGREEMENT_VIEW: "mlm", WIC_VIEW: "mlm", FLOOR_VIEW: "mlm", QA_VIEW: "qa"}


def capabilities(path: str | os.PathLike) -> Capabilities:
    """:class:`Capabilities` of a model folder or cached hub id."""
    folder = Path(os.path.expanduser(str(path)))
    if folder.is_dir():
        from xlviz import confined, limits
        from xlviz.errors import XlvizError

        try:
            cfg = confined.read_json(folder / "config.json", root=None, max_bytes=limits.RUN_JSON_MAX_BYTES, what="model config")
        except XlvizError:
            cfg = None
    else:
        cfg, _ = cached_hub_config(str(path))
    cfg = cfg if isinstance(cfg, dict) else {}
    qa, _ = _heads(cfg.get("architectures"))
    n = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    return Capabilities(mlm=has_mlm_head(path), qa=qa, positions=int(n) if isinstance(n, int) and not isinstance(n, bool) else None,
                        tokenizer=folder.is_dir() and has_tokenizer(folder))


def offers(view: str, path: str | os.PathLike) -> bool:
    """Whether ``view`` can use the model at ``path``: it has what the view needs (a head the
    config does not name is taken as absent only when the config names other architectures)."""
    need = NEEDS.get(view)
    if need is None:
        return True
    caps = capabilities(path)
    return caps.mlm is not False if need == "mlm" else caps.qa


def split_probeable(models: list, view: str = AGREEMENT_VIEW) -> tuple[list, list]:
    """(models ``view`` can probe, the others) from objects with ``.spec``, by :func:`offers`:
    Agreement and Word in context both load the masked LM (scoring minimal pairs, and the
    hidden states as ``xlviz analyse wic`` reads them), and a floor in any probe is rebuilt
    from the L1 masked LM. A model whose config names no such head (an encoder such as MiniLM
    before its MLM head is trained, a QA export) is not offered, rather than failing with an
    error box."""
    ok, refused = [], []
    for m in models:
        v = FLOOR_VIEW if getattr(m.spec, "floor_seed", None) is not None else view
        (ok if offers(v, m.spec.path) else refused).append(m)
    return ok, refused


def default_rows(items: list, limit: int = 6, always=None, group=None, least: int = 2) -> list:
    """The rows a view shows before the user picks: all of a small run; of a large one (an
    every-system run has 26 systems) the references, floors and models picked in the sidebar
    plus the run's first other systems, at least ``least`` of them and ``limit`` systems in all
    where the fixed ones leave room, in the run's order. A bar chart of 26 groups cannot be read;
    the others stay one click away in the picker. ``group``: the system of a row (a system
    probed in two languages is two rows, one choice; default: each row its own); ``always``:
    which rows are kept whatever the limit (default: by their ``role``)."""
    group = group or id
    always = always or (lambda m: getattr(m, "role", None) in ("reference", "floor", "model"))
    groups = list(dict.fromkeys(group(m) for m in items))
    if len(groups) <= limit + 2:
        return list(items)
    fixed = list(dict.fromkeys(group(m) for m in items if always(m)))
    others = [g for g in groups if g not in fixed]
    chosen = set(fixed) | set(others[:max(least, limit - len(fixed))])
    return [m for m in items if group(m) in chosen]


def cached_hub_config(repo_id: str) -> tuple[dict | None, str]:
    """(config, "") of a hub model whose config and safetensors weights are in the local
    Hugging Face cache, else (None, why not). The app runs offline: a hub id it cannot load
    from the cache would fail on every page, so it is refused once, here."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return None, "not a model folder, and not a valid Hugging Face id"
    try:
        config = try_to_load_from_cache(repo_id, "config.json")
        weights = [try_to_load_from_cache(repo_id, f) for f in ("model.safetensors", "model.safetensors.index.json")]
    except (OSError, ValueError) as e:
        return None, f"the Hugging Face cache cannot be read ({e})"
    if not isinstance(config, str):
        return None, ("not in the local Hugging Face cache, and the app does not download models: download it "
                      "on a machine with network access (huggingface-cli download) or type a model folder")
    if not any(isinstance(w, str) for w in weights):
        return None, "in the Hugging Face cache without safetensors weights (xlviz loads safetensors only)"
    from xlviz import confined, limits
    from xlviz.errors import XlvizError

    try:  # bounded, a regular file: the cache is outside the app's roots, but only read
        data = confined.read_json(config, root=None, max_bytes=limits.RUN_JSON_MAX_BYTES, what="cached model config")
    except XlvizError as e:
        return None, f"its cached config.json cannot be read ({e})"
    if not isinstance(data, dict) or "model_type" not in data:
        return None, "its cached config.json has no model_type"
    return data, ""


def check_typed(text: str) -> FolderCheck:
    """Read a typed folder's config once: does it exist, is it a model, does it have a QA or a
    masked-LM head? A hub id must be in the local Hugging Face cache (:func:`cached_hub_config`). A local path must
    lie inside the app's roots (:mod:`xlviz.views.paths`); a refusal does not tell whether it exists."""
    from xlviz.errors import XlvizError
    from xlviz.views.paths import typed_model

    try:
        kind, local = typed_model(text)
    except XlvizError as e:
        return FolderCheck(False, str(e))
    if kind == "hub":
        config, why = cached_hub_config(text.strip())
        if config is None:
            return FolderCheck(False, f"{text}: {why}")
        qa, mlm = _heads(config.get("architectures"))
        heads = [h for h, yes in (("question answering", qa), ("masked LM", mlm)) if yes]
        return FolderCheck(True, f"{text}: a hub id in the local cache, " + (" and ".join(heads) + " head" if heads
                                                                                 else "encoder only (no QA or masked-LM head)"),
                           qa=qa, mlm=mlm)
    folder = local
    if not folder.is_dir():
        return FolderCheck(False, f"{text}: model folder not found")
    if not is_hf_model_folder(folder):
        return FolderCheck(False, f"{text}: not a model folder (needs config.json with model_type and model.safetensors)")
    archs = _architectures(folder) or []
    qa = any("QuestionAnswering" in a for a in archs)
    mlm = any("MaskedLM" in a or "ForPreTraining" in a for a in archs)
    heads = [h for h, yes in (("question answering", qa), ("masked LM", mlm)) if yes]
    tok = "" if has_tokenizer(folder) else " — no tokenizer files in it"
    return FolderCheck(True, f"{folder.name}: " + (" and ".join(heads) + " head" if heads else "encoder only (no QA or masked-LM head)") + tok,
                       qa=qa, mlm=mlm)


def folder_choice(path: str | os.PathLike) -> ModelChoice:
    """A choice for a typed-in local folder or hub id (one model for every language)."""
    text = str(path).strip()
    folder = Path(os.path.expanduser(text))
    qa = folder.is_dir() and is_qa_folder(folder)
    if not folder.is_dir():  # a hub id: its heads from the cached config (none when it is not cached)
        config, _ = cached_hub_config(text)
        qa = config is not None and _heads(config.get("architectures"))[0]
    name = folder.name if folder.is_dir() else text
    owner = owner_of(folder) if folder.is_dir() else None  # a folder inside a run: that run's data is what it reads
    return ModelChoice(f"path:{text}", f"{name}" + (" (QA)" if qa else ""), any_language=ModelSpec(text), qa=qa, group="typed",
                       run=owner[0].name if owner is not None else None)


def trained_with(models) -> list[str]:
    """The runs the picked models were trained with (the manifest's owner of a typed folder
    included), in pick order without repeats: the data a page should show them first."""
    return list(dict.fromkeys(m.run for m in models if getattr(m, "run", None)))


def default_data_run(names: list[str], models) -> str | None:
    """The run whose data a page opens on: the first of the picked models' own runs that has
    the data (``names``), else the first of ``names`` (the newest) when no picked model comes
    from a run. Never another run's data beside a run's models: when the models' runs have no
    such data, still the first of ``names``, and the page's readability line says so."""
    return next((r for r in trained_with(models) if r in names), names[0] if names else None)


def discover_models(root: str | os.PathLike | None = None) -> list[ModelChoice]:
    """All model choices under the checkpoints root: run stages, exports, plain HF folders."""
    root = checkpoints_root(root)
    out: list[ModelChoice] = []
    for run in list_runs(root):
        out += run_model_choices(run)
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and not (folder / "status.json").exists() and is_hf_model_folder(folder):
                out.append(folder_choice(folder))
    return out


# --- QA data sets ------------------------------------------------------------------------------

# what a QA file's name may end with as its language (``xquad.de.json``, a run's ``test.sov.json``)
QA_LANGUAGE = re.compile(r"[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{2,8})?")


def qa_files(folder: str | os.PathLike, prefix: str = "") -> dict[str, Path]:
    """``{language: file}`` for SQuAD-format files named ``<prefix><anything>.<lang>.json``.

    ``prefix`` picks one split of a folder holding several (a generated world has
    ``train.en.json`` beside ``test.en.json``): filtering after mapping would lose a language.
    """
    folder = Path(folder)
    out: dict[str, Path] = {}
    if not folder.is_dir():
        return out
    for p in sorted(folder.glob(f"{glob.escape(prefix)}*.json")):
        stem = p.name[: -len(".json")]
        lang = stem.rsplit(".", 1)[-1] if "." in stem else None
        if lang and QA_LANGUAGE.fullmatch(lang):
            out[lang] = p
    return out


@dataclass(frozen=True)
class QADataset:
    key: str
    label: str
    folder: str
    files: tuple[tuple[str, str], ...] = field(default=())
    run: str | None = None  # the run whose generated test set this is

    def languages(self) -> list[str]:
        return [l for l, _ in self.files]

    def file(self, lang: str) -> str | None:
        return dict(self.files).get(lang)


def _order_langs(langs: list[str], first: list[str]) -> list[str]:
    order = {l: i for i, l in enumerate(first)}
    return sorted(langs, key=lambda l: (order.get(l, len(order)), l))


def discover_qa_datasets(root: str | os.PathLike | None = None, shared: Path | None = None) -> list[QADataset]:
    """Every run's generated QA test set, then ``../shared/data/xquad`` when it exists."""
    out: list[QADataset] = []
    for run in list_runs(root):
        files = {lang: f for lang, f in world_files(run, "qa", split="test").items() if QA_LANGUAGE.fullmatch(lang)}
        if files:
            langs = _order_langs(list(files), run_languages(run))
            folder = next(iter(files.values())).parent  # the run's QA folder (its parent holds the world)
            out.append(QADataset(f"run:{run.name}", f"{run.name} · generated test set", str(folder), tuple((l, str(files[l])) for l in langs), run=run.name))
    if shared is not None and (shared / "xquad").is_dir():
        out.append(dataset_from_folder(shared / "xquad", label="XQuAD (../shared/data/xquad)"))
    return out


def dataset_from_folder(folder: str | os.PathLike, label: str | None = None) -> QADataset:
    folder = Path(folder)
    files = qa_files(folder)
    langs = _order_langs(list(files), ["en"])
    return QADataset(f"folder:{folder}", label or str(folder), str(folder), tuple((l, str(files[l])) for l in langs))
