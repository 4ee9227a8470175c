"""The method interface: what a cross-lingual transfer method declares so that one generic
run can train it beside the others on the same data.

A *method* (one module of :mod:`xlviz.methods`) yields one or more *systems* (the rows of the
paper's tables: ``monotrans``, ``monotrans+pos``, ``floor``, ``jointpair-disjoint`` ...). For
each system it declares

- its stages (:class:`Stage`): a folder name in the run, the phase it belongs to, the function
  that runs it, and what it trains and freezes (parameter-name patterns checked by the tests);
  stages of the same name are the same computation and run once per run, whichever systems
  ask for them (the world, the tokenizers, MONOTRANS's step 1);
- a QA model per language (``qa_model``), scored zero-shot by the run;
- an encoder per language (``encoder``), exported for the analysis pages.

Stage functions receive the run as their context (:class:`Context`): its config, its data,
its accelerator and the helpers that write the run folder. Methods never import
:mod:`xlviz.transfer`; the run imports them through the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Protocol

if TYPE_CHECKING:  # annotations only: the pages read the registry and must not import torch (1 s cold)
    from torch import nn

PHASES = {"data": 0, "pretrain": 1, "transfer": 2, "finetune": 3}

# What a result row may be compared with: never a row of another setting.
ZERO_SHOT = "zero-shot"  # QA labels in L1 only; the test reads the L2 alone
TRANSLATE_TRAIN = "translate-train"  # QA labels in an L2 (translated training set); the test reads the L2 alone
TRANSLATE_TEST = "translate-test"  # the test reads each L2 test context with its gold L1 translation
SETTINGS = (ZERO_SHOT, TRANSLATE_TRAIN, TRANSLATE_TEST)


def setting_of(uses: dict) -> str:
    """The setting of a system from what it declares it reads (:meth:`Method.uses`): reading a
    translation at test time outranks reading L2 labels in training."""
    if uses.get("translate_test"):
        return TRANSLATE_TEST
    if uses.get("l2_labels"):
        return TRANSLATE_TRAIN
    return ZERO_SHOT


def resources_of(uses: dict, dictionary: dict | None = None) -> dict:
    """What a system read beyond L1 QA labels, as result rows record it (``resources``):
    ``parallel_pairs`` (translation pairs it trained on), ``dictionary`` (None, or ``{"size":
    pairs or None when induced during training, "source": "gold" | "induced", "split": "train" |
    "all"}``: "train" when the held-out part the word-translation task scores was never read),
    ``l2_labels`` (QA labels in an L2) and ``test_time_translation`` (each test context's L1
    translation read at test time)."""
    return {"parallel_pairs": int(uses.get("parallel_pairs") or 0), "dictionary": dictionary,
            "l2_labels": bool(uses.get("l2_labels")), "test_time_translation": bool(uses.get("translate_test"))}


def on_corpus_config(cfg: Any) -> bool:
    """Whether a run config reads a corpus source (streamed text files) rather than the world."""
    name = getattr(cfg, "source", None)
    if not isinstance(name, str) or name == "world":
        return False
    from xlviz.data.sources import sources

    source = sources().get(name)
    return source is not None and source.kind == "corpus"


class Context(Protocol):
    """What a stage function may use of the run that executes it."""

    cfg: Any  # xlviz.transfer.config.TransferConfig
    data: Any  # xlviz.data.sources.RunData: the run's data, read the same way on every source
    world: Any  # xlviz.data.world.World (None on a corpus source): for the world's own stage and resources
    acc: Any  # accelerate.Accelerator
    main: bool

    def path(self, *parts: str) -> Path: ...
    def world_file(self, kind: str, **fields: str) -> Path: ...  # one of the world stage's files (xlviz.runs.world_path)
    def record_artefact(self, kind: str, path: Path, **fields: str | None) -> None: ...
    def tokenizer(self, lang: str) -> Any: ...
    def log(self, msg: str) -> None: ...
    def save(self, model, stage_dir: Path, tokenizer=None, *, language: str | None = None, role: str | None = None,
             variant: str | None = None) -> None: ...
    def loop(self, stage: str, steps: int, lr: float, *, pretraining: bool | str = False) -> tuple[Any, Callable]: ...
    def parallel_train(self, system: str, l2: str) -> list[dict]: ...
    def translate_train(self, system: str, l2: str) -> dict: ...
    def test_translation(self, system: str, l2: str) -> dict: ...
    # optional: judge a QA model fine-tuned on the L1 training set on the world's dev split
    # def judge_qa(self, stage: str, model, tokenizer) -> None: ...
    # optional: on_eval for a QA fine-tuning on the L1 set (dev EM/F1 every eval_every steps)
    # def dev_scorer(self, tokenizer, stage: str) -> Callable[[int, nn.Module], dict]: ...


def world_target(ctx: Context, kind: str, **fields: str) -> Path:
    """Where the world stage writes one of the files readers open (``kind`` and its fields as
    :func:`xlviz.runs.artefact_relpath` names them); readers ask ``ctx.world_file``."""
    from xlviz.runs import artefact_relpath

    return ctx.path(*artefact_relpath(kind, **fields).split("/"))


def record_world_file(ctx: Context, kind: str, **fields: str) -> None:
    """Record one of the world stage's files in the run's manifest, where readers find it."""
    ctx.record_artefact(kind, world_target(ctx, kind, **fields), **fields)


@dataclass(frozen=True)
class Stage:
    """One resumable stage of a run.

    ``build(ctx)`` returns the model exactly as the stage trains it (frozen parts set, hooks
    attached) and ``train(ctx, model)`` trains and saves it; stages that train nothing (data,
    exports) give ``run`` instead. ``trains`` are regular expressions over parameter names:
    the parameters that receive gradient, and only those (``tests/test_methods.py`` checks it
    with a backward pass). ``rows`` says which rows of the token embeddings train when only
    some do ("special": the shared special-token rows only). A stage may read the data
    stages' folders and those of the stages of earlier phases listed before it by a system that
    runs it; ``needs`` names any other stage it reads (the run starts it only after them, and a
    stage reading a stage it does not wait for fails: independent stages can run at the same
    time, ``workers``)."""

    name: str
    phase: str
    run: Callable[[Context], None] | None = None
    build: Callable[[Context], nn.Module] | None = None
    train: Callable[[Context, nn.Module], None] | None = None
    trains: tuple[str, ...] = ()
    rows: str = "all"
    note: str = ""
    needs: tuple[str, ...] = ()

    def execute(self, ctx: Context) -> None:
        if self.run is not None:
            return self.run(ctx)
        return self.train(ctx, self.build(ctx))


def unit_stages(stages: list[Stage], unit: str) -> list[str]:
    """The data stages and the stages of one per-L2 model (names ending in ``-<unit>``): what a
    row scored by that model depends on (:meth:`Method.row_stages`)."""
    return [s.name for s in stages if s.phase == "data" or s.name.endswith(f"-{unit}")]


@dataclass
class Method:
    """A family of systems declared by one module. Subclasses override the methods below."""

    name: str
    # The method's systems: a tuple, or the keys of its variant table (``VARIANTS.keys()``), so
    # that one more row of the table is one more system everywhere.
    systems: Collection[str]
    description: str = ""
    order: int = 50  # position in listings (the paper's tables: MONOTRANS first)
    # The method's own settings: a dataclass of xlviz.methods.options.MethodOptions (None: none).
    # The run's config stores its fields flat; the CLI's flags and the Runs form's fields come from it.
    options: type | None = None

    def owns(self, system: str) -> bool:
        """Whether ``system`` is one of this method's (parametrised families override this)."""
        return system in self.systems

    def default_systems(self, every: bool = False, layers: int = 4) -> tuple[str, ...]:
        """The systems ``all`` (``every``) or the method's own name trains, for a model of
        ``layers`` encoder layers."""
        return self.systems

    def sweeps(self, layers: int = 4) -> dict[str, list[str]]:
        """Named groups of systems (``wu-sweep``: K = all ... 0 for ``layers`` layers)."""
        return {}

    def describe(self, system: str) -> str:
        """One line for the Runs form and ``xlviz demo --help``."""
        return self.description

    def stages(self, ctx: Context, system: str) -> list[Stage]:
        raise NotImplementedError

    def qa_model(self, ctx: Context, system: str, lang: str) -> tuple[nn.Module, Any] | None:
        """The zero-shot (or translate-train) QA model of ``system`` for ``lang`` and its
        tokenizer; None when the system has no QA model for that language."""
        return None

    def encoder(self, ctx: Context, system: str, lang: str) -> tuple[nn.Module, Any] | None:
        """The masked LM that reads ``lang`` in ``system`` (for alignment, attention and
        probing) and its tokenizer; None when the system has none for that language."""
        return None

    def validate(self, system: str, cfg: Any) -> None:
        """Raise an XlvizError (field ``methods``) when ``system`` cannot run with ``cfg``."""
        return None

    def pair_l1_encoder(self, ctx: Context, system: str, l2: str) -> tuple[nn.Module, Any] | None:
        """For systems with one model per L2 (pair models): the L1 encoder of the model that
        reads ``l2``, so an L1-``l2`` analysis compares one model's two languages (``encoder``'s
        L1 is the first pair's); None otherwise."""
        return None

    def row_stages(self, ctx: Context, system: str, lang: str) -> list[str]:
        """The stages ``system``'s result row for ``lang`` depends on (a degenerate one makes the
        row no result): by default every stage of the system; one-model-per-L2 systems narrow
        it to the model that scores ``lang``."""
        return [s.name for s in self.stages(ctx, system)]

    def encoder_stages(self, ctx: Context, system: str, lang: str, pair: str | None = None) -> list[str]:
        """The stages the weights of ``system``'s encoder for ``lang`` come from (``pair``: a pair
        model's L1 encoder of that L2), recorded with the encoder so the probes refuse one built
        on a degenerate stage: by default the stages of the row the encoder's language (its
        pair's) is scored in. A reader judges only its pre-training and transfer stages (a QA
        fine-tuning stage does not touch the encoder)."""
        return self.row_stages(ctx, system, pair or lang)

    def starts_from_l1_model(self, system: str) -> bool:
        """Whether ``system`` starts from the run's L1 model (step 1, or the run's ``init_model``
        in its place). Systems that pre-train their own model from scratch (the joint models,
        CLWE's body, VECO, PPA's base) would ignore a pre-trained starting model, so a run with
        ``init_model`` refuses them rather than label a model trained here as one built on it."""
        return False

    def own_l1_model(self, ctx: Context, system: str, lang: str) -> tuple[nn.Module, Any] | None:
        """For systems with one model per L2 (pair models): the L1 QA model of the model that
        scores ``lang``, so its L2/L1 ratio compares one model with itself; None otherwise."""
        return None

    def uses(self, system: str, cfg: Any = None) -> dict:
        """What the system learns from, written into its result rows: ``parallel_pairs`` (how
        many translation pairs it trained on; ``cfg`` is the run's config) and ``l2_labels``
        (whether it saw QA labels in an L2: translate-train) and ``translate_test`` (whether it
        reads the gold L1 translation of each test context at test time). The run hands the
        parallel training corpus, the translate-train data and the test translations only to
        systems that declare them here (a missing ``translate_test`` is false)."""
        return {"parallel_pairs": 0, "l2_labels": False}

    def dictionary(self, system: str, cfg: Any = None, ctx: Context | None = None, lang: str | None = None) -> dict | None:
        """The bilingual dictionary ``system`` reads (see :func:`resources_of`; ``ctx``, the run,
        gives its size for ``lang``, an L2, when the method can count it); None: none."""
        return None

    def resources(self, system: str, cfg: Any = None, ctx: Context | None = None, lang: str | None = None) -> dict:
        """What ``system`` read beyond L1 QA labels (:func:`resources_of`), from what it declares
        (:meth:`uses`, :meth:`dictionary`): the ``resources`` of its result rows, so a table can
        say which rows read the same data."""
        return resources_of(self.uses(system, cfg), self.dictionary(system, cfg, ctx, lang))

    def setting(self, system: str, cfg: Any = None) -> str:
        """zero-shot, translate-train or translate-test (:func:`setting_of` of ``uses``)."""
        return setting_of(self.uses(system, cfg))

    def needs(self, system: str, cfg: Any = None) -> frozenset[str]:
        """What ``system``'s premise requires of the data source (names of
        :data:`xlviz.data.sources.OFFERS`): by default two monolingual corpora and QA data (it is
        fine-tuned on L1 QA and scored on QA test sets), plus what :meth:`uses` declares
        (parallel pairs, translated training data, test translations). A run on a source that
        does not offer all of them is refused before anything trains. On a corpus source a
        system with stages there (:meth:`runs_on`) needs the two corpora only: it is trained on
        them and scored by the run's tasks (sentence retrieval; QA only where :meth:`corpus_qa`)."""
        u = self.uses(system, cfg)
        corpus = on_corpus_config(cfg) and "corpus" in self.runs_on(system)
        out = {"l1_corpus", "l2_corpus"} if corpus else {"l1_corpus", "l2_corpus", "qa_train", "qa_test"}
        if u.get("parallel_pairs"):
            out.add("parallel_train")
        if u.get("l2_labels"):
            out.add("qa_train_l2")
        if u.get("translate_test"):
            out.add("qa_test_translation")
        return frozenset(out)

    def runs_on(self, system: str) -> tuple[str, ...]:
        """The kinds of source (:data:`xlviz.data.sources.KINDS`) ``system``'s stages are
        written for: the generated world's in-memory data, or streamed corpora."""
        return ("world",)

    def corpus_qa(self, system: str) -> bool:
        """Whether ``system`` has a QA fine-tuning stage on corpus sources (with QA files); a
        corpus run scoring QA refuses the systems without one."""
        return False

    def seeds_by_place(self, system: str) -> bool:
        """Whether ``system``'s stages on a corpus source are seeded by their place in the plan
        (the seeding of the corpus runs written before every method ran there, kept so that those
        runs keep their numbers); other stages are seeded by their name, whichever systems share the run."""
        return False

    def probe_role(self, system: str) -> str:
        """What the system's L2 encoder is on the Probing page: "transferred" (an L1 model
        carried into the L2), "floor" or "reference" (trained on the L2 directly)."""
        return "transferred"

    def probe_side(self, system: str) -> str:
        """Which side of the system the Probing page probes: "l2" (its L2 encoder on L2 data,
        the default) or "l1" (a model transferred *into* L1, probed on L1 data beside the L1
        model: Artetxe et al.'s xx→en design)."""
        return "l2"
