"""The embedded default data: a small world described in English and in invented L2s.

Everything is generated deterministically from a seed: two independent monolingual corpora
per language pair, an extractive QA set in SQuAD v1.1 format (train/dev in L1, a test set
rendered in every language with shared question ids, like XQuAD), parallel pairs with gold
word alignment, a gold dictionary, agreement minimal pairs and same-word-different-sense
pairs. It is the offline stand-in for Wikipedia + SQuAD + XQuAD in Artetxe et al. (2020).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from xlviz.data.grammar import NP, PP, Clause, Language, Question, Word, constituent_span, join_words, word_alignment
from xlviz.data.lexicon import (
    ADJECTIVES, ANIMALS, DATE_PREPOSITION, FOOD, HYPERNYMS, HOMONYMS, NAMES, PEOPLE, PLACES, PREPOSITIONS, SCRIPTS, TEXT, THINGS, TOOLS, VERBS,
    L2Lexicon, english_3sg, english_plural, surface_lemma,
)
from xlviz.data.typology import grammar_of, normal_form, parse_languages
from xlviz.errors import XlvizError, shown_keys
from xlviz.fields import setting
from xlviz.io import atomic_write_json, atomic_write_text, read_json
from xlviz.names import check_code, language_entries
from xlviz.runs import world_relpath

L1 = "en"
SUBJECT_NOUNS = ANIMALS + PEOPLE + [HOMONYMS[h][0] for h in HOMONYMS]
OBJECT_NOUNS = THINGS + ANIMALS + PEOPLE + [s for pair in HOMONYMS.values() for s in pair]
SELECTS = {"eat": sorted(FOOD), "read": sorted(TEXT), "feed": ANIMALS + [HOMONYMS[h][0] for h in HOMONYMS], "swing": sorted(TOOLS)}


# Shares are probabilities; past about 100, ``1 / rank**preference`` overflows a float (and
# from about 20 on every word already takes its first preference).
WORLD_RANGES: dict[str, tuple[float, float]] = {
    "question_share": (0.0, 1.0),
    "habit_share": (0.0, 1.0),
    "l1_variety": (0.0, 1.0),
    "preference": (0.0, 20.0),
    "numeral_share": (0.0, 1.0),
    "date_share": (0.0, 1.0),
    "loanword_share": (0.0, 1.0),
    "qa_paraphrase": (0.0, 1.0),
}
# Settings added after worlds were saved and runs recorded: left out of ``WorldConfig.to_dict``
# at these defaults, so a world or run without them keeps every byte.
LATER_DEFAULTS = {"numeral_share": 0.0, "date_share": 0.0, "loanword_share": 0.0, "qa_paraphrase": 0.0}


@dataclass(frozen=True)
class LanguageSpec:
    """An invented L2: a code, a grammar and a script. The grammar (still called ``order``, so
    configs written before the typology features read and write the same) is a preset name of
    :mod:`xlviz.data.typology` ("svo" = English's grammar, "sov" = verb-final with postpositions,
    adjectives after nouns and wh in situ, "tr", "cy", "step1".."step3") or a mapping of its
    typological features."""

    code: str
    order: "str | dict" = "svo"
    script: str = "latin"


@dataclass
class WorldConfig:
    seed: int = 0
    # The settings declared with setting() have a flag of their own (xlviz.fields): the world's
    # sizes a run changes most; the others are set in a config file or a sweep's grid.
    languages: list[LanguageSpec] = setting(
        default_factory=lambda: [LanguageSpec("svo"), LanguageSpec("sov", "sov", "cyrillic")], parse=parse_languages,
        help="L2s of the generated world: code[:grammar[:script]], comma-separated, e.g. 'svo,sov', 'tr,cy', "
             "'x:tr+determiner=before:greek'; a code that names a grammar preset takes it (presets: "
             "svo step1 step2 step3 sov tr cy; docs/typology.md); or a JSON list of entries with 'features'")
    corpus_documents: int = setting(4000, "documents per language corpus")
    question_share: float = 0.6
    habit_share: float = 0.5
    # Skew of the corpora's word choices: each word gets its own fixed preferences (a verb
    # for its objects, a noun for its adjectives, a place for its prepositions...), weights
    # 1 / rank**preference over a seeded ranking. 0 draws uniformly. Without it, words of one
    # class are interchangeable in context, so nothing ties an L2 word to its L1 counterpart.
    preference: float = 2.0
    # People's names spelled as in English in every L2 (in its script), as real languages share
    # names: anchors for a joint vocabulary and a seed for CLWE's identical-strings mode. Off by
    # default: the invented L2s then share no word with English (docs/methods.md).
    shared_names: bool = False
    # Share of English statements in a marked order real English has (an object cleft, a
    # topicalised object, a fronted location: grammar.L1_VARIANTS), so that English shows
    # objects and locations before the verb as a verb-final L2 does. The L2s are unchanged;
    # English questions keep their order. 0 (default): every statement subject-verb-object.
    l1_variety: float = 0.0
    # Shared surface material besides names (docs/world.md, "Which ingredient lifts verb-final
    # transfer?"): the share of plural noun phrases counted with a numeral ("3 apples") and of
    # clauses dated ("on 1999-05-12"), digits written the same in every language; and the share
    # of the L2s' content lemmas borrowed from English (the English word lightly respelt in the
    # L2's alphabet, with the L2's own plural and agreement suffixes: lexicon.respell). All 0
    # by default, which leaves the world as it was, byte for byte.
    numeral_share: float = 0.0
    date_share: float = 0.0
    loanword_share: float = 0.0
    # Share of questions (of the QA sets, and of the corpora's question-answer exchanges) worded
    # unlike their statement: the noun phrases they do not ask about named by their class
    # ("who sees the red thing?" of "anna sees the red ball."; grammar.paraphrased). Real
    # SQuAD questions mostly paraphrase the answer's sentence; the world's repeat it (docs/world.md).
    qa_paraphrase: float = 0.0
    # Facts (sentences) per QA paragraph, inclusive range. Small models learn to match a
    # question to its sentence among two or three quickly; with more they stall on type
    # heuristics for thousands of steps (docs/world.md has the measurements).
    qa_facts: tuple[int, int] = (2, 3)
    qa_train_paragraphs: int = setting(1200, "QA training paragraphs (L1)")
    qa_dev_paragraphs: int = 60
    qa_test_paragraphs: int = setting(100, "QA test paragraphs per language")
    parallel_pairs: int = 1000
    # Translation pairs the parallel-data methods (VECO, PPA) train on; disjoint from the
    # evaluation pairs above and from every QA test paragraph (``World.parallel_train``).
    parallel_train_pairs: int = 2000
    agreement_pairs: int = 300
    sense_pairs: int = 200

    @classmethod
    def from_dict(cls, d: dict, *, path: str | None = None) -> "WorldConfig":
        d = dict(d)
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise XlvizError(f"unknown world setting(s) {shown_keys(sorted(unknown))}; known: {sorted(known)}", path=path, field="world")
        langs = d.pop("languages", None)
        if "qa_facts" in d:
            f = d["qa_facts"]
            if not (isinstance(f, (list, tuple)) and len(f) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in f) and 1 <= f[0] <= f[1] <= 8):
                raise XlvizError(f"must be [min, max] with 1 <= min <= max <= 8, got {f!r}", path=path, field="world.qa_facts")
            d["qa_facts"] = tuple(f)
        cfg = cls(**d)
        if langs is not None:
            cfg.languages = _language_specs(langs, path=path)
        cfg.validate(path=path)
        return cfg

    def to_dict(self) -> dict:
        """Every setting, except the shared-material ones at their defaults (so world.json and a
        run's config.json keep the bytes they had before those settings existed)."""
        d = asdict(self)
        for key, default in LATER_DEFAULTS.items():
            if d[key] == default:
                del d[key]
        return d

    def validate(self, *, path: str | None = None) -> None:
        for name, (lo, hi) in WORLD_RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:  # NaN fails too
                raise XlvizError(f"must be a number from {lo} to {hi}, got {v!r:.60}", path=path, field=f"world.{name}")
        if not isinstance(self.shared_names, bool):
            raise XlvizError(f"must be true or false, got {self.shared_names!r}", path=path, field="world.shared_names")
        for name in ("corpus_documents", "qa_train_paragraphs", "qa_dev_paragraphs", "qa_test_paragraphs", "parallel_pairs", "parallel_train_pairs", "agreement_pairs", "sense_pairs"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise XlvizError(f"must be a positive integer, got {v!r}", path=path, field=f"world.{name}")
        codes = [l.code for l in self.languages]
        if not codes:
            raise XlvizError("at least one L2 is needed", path=path, field="world.languages")
        for l in self.languages:
            check_code(l.code, field="world.languages.code", path=path)
        # compared without case: 'EN' and 'en', 'Svo' and 'svo' name the same language to
        # people, and on a case-insensitive file system the same tokenizer and stage folders
        folded = [c.casefold() for c in codes]
        if len(set(folded)) != len(folded) or L1 in folded:
            raise XlvizError(f"L2 codes must be unique and differ from '{L1}' (ignoring case): {codes}", path=path,
                             field="world.languages")
        for l in self.languages:
            grammar_of(l.order, field="world.languages.order", path=path)
            if l.script not in SCRIPTS:
                raise XlvizError(f"unknown script {l.script!r} for '{l.code}'; choose from {sorted(SCRIPTS)}", path=path, field="world.languages.script")


def _language_specs(langs: object, *, path: str | None) -> list[LanguageSpec]:
    """A config's ``languages`` list: each entry a code or an object with ``code``, ``script``
    and a grammar, given as ``order`` (a preset name or an object of features) and/or
    ``features`` (an object of features over ``order``'s preset). Grammars that are not a plain
    preset are stored as their full feature mapping."""
    if not isinstance(langs, list):
        return [LanguageSpec(**l) for l in language_entries(langs, path=path)]
    plain, grammars = [], []
    for entry in langs:
        grammar = None
        if isinstance(entry, dict) and (isinstance(entry.get("order"), dict) or "features" in entry):
            entry = dict(entry)
            order, features = entry.pop("order", "svo"), entry.pop("features", {})
            if not isinstance(features, dict):
                raise XlvizError(f"must be an object of typological features, got {features!r}", path=path, field="world.languages.features")
            base = order if isinstance(order, dict) else {"preset": order}
            grammar = normal_form({**base, **features}, field="world.languages.features", path=path)
        plain.append(entry)
        grammars.append(grammar)
    specs = []
    for entry, grammar in zip(language_entries(plain, path=path), grammars):
        if grammar is not None:
            entry["order"] = grammar
        specs.append(LanguageSpec(**entry))
    return specs


def make_habits(seed: int) -> dict[str, dict]:
    """The world's facts: every subject has a habit (a verb and an object), a home place and a
    characteristic adjective. Both languages' corpora talk about the same facts in different
    sentences, which is what makes independent monolingual corpora alignable at all."""
    rng = random.Random(f"habits-{seed}")
    habits = {}
    for head in NAMES + SUBJECT_NOUNS:
        verb = rng.choice(VERBS)
        obj = rng.choice([o for o in SELECTS.get(verb, OBJECT_NOUNS) if o != head])
        habits[head] = {"verb": verb, "obj": obj, "place": rng.choice(PLACES), "adj": rng.choice(ADJECTIVES)}
    return habits


class Sampler:
    """Random clauses of the world, drawn from one seeded stream. With ``habits``, a share of
    clauses states a subject's habit (its verb, object and home place). With ``preference``,
    choices follow per-word skewed distributions fixed by ``seed`` (the same in every language)."""

    def __init__(self, rng: random.Random, habits: dict[str, dict] | None = None, habit_share: float = 0.0,
                 preference: float = 0.0, seed: int = 0, numeral_share: float = 0.0, date_share: float = 0.0,
                 paraphrase_share: float = 0.0, paraphrase_seed: int = 0):
        self.rng = rng
        self.habits = habits or {}
        self.habit_share = habit_share
        self.preference = preference
        self.seed = seed
        # at 0 no extra draw is made: the stream, and every clause, stays as it was
        self.numeral_share = numeral_share
        self.date_share = date_share
        self.paraphrase_share = paraphrase_share
        self.paraphrase_seed = paraphrase_seed
        self._weights: dict[tuple, list[float]] = {}

    def pick(self, pool: list[str], key: str = "") -> str:
        """One of ``pool``: uniform, or by ``key``'s fixed preference ranking."""
        if not self.preference:
            return self.rng.choice(pool)
        cache = (key, tuple(pool))
        if cache not in self._weights:
            ranks = list(range(len(pool)))
            random.Random(f"pref-{self.seed}-{key}").shuffle(ranks)
            self._weights[cache] = [1.0 / (r + 1) ** self.preference for r in ranks]
        return self.rng.choices(pool, weights=self._weights[cache])[0]

    def pick_sample(self, pool: list[str], k: int, key: str = "") -> tuple[str, ...]:
        if not self.preference:
            return tuple(self.rng.sample(pool, k))
        out: list[str] = []
        while len(out) < k:
            w = self.pick(pool, key)
            if w not in out:
                out.append(w)
        return tuple(out)

    def np(self, pool: list[str], *, name_share: float = 0.0, adj_max: int = 2, mod_share: float = 0.0, number: str | None = None, key: str = "") -> NP:
        r = self.rng
        if name_share and r.random() < name_share:
            return NP(self.pick(NAMES, key + "/name"), "sg", None)
        head = self.pick(pool, key)
        number = number or ("pl" if r.random() < 0.35 else "sg")
        det = "the" if number == "pl" or r.random() < 0.7 else "a"
        n_adj = r.choices(range(adj_max + 1), weights=[5, 4, 1][: adj_max + 1])[0]
        adjs = self.pick_sample(ADJECTIVES, n_adj, "adj/" + head)
        mod = None
        if mod_share and r.random() < mod_share:
            mod = PP(self.pick(PREPOSITIONS, "mod/" + head), self.np(SUBJECT_NOUNS + PLACES, adj_max=1, key="modnp/" + head))
        if self.numeral_share and number == "pl" and r.random() < self.numeral_share:
            return NP(head, number, None, adjs, mod, count=r.randint(2, 20))  # "3 red apples", no article
        return NP(head, number, det, adjs, mod)

    def date(self) -> str:
        """A date as ISO 8601 writes it in every language (1950-2020; day 1-28 keeps it valid)."""
        r = self.rng
        return f"{r.randint(1950, 2020)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"

    def clause(self, *, loc_share: float = 0.6, mod_share: float = 0.0, avoid: set[str] = frozenset(), verbs: list[str] | None = None) -> Clause:
        r = self.rng
        for _ in range(1000):
            subj = self.np(SUBJECT_NOUNS, name_share=0.3, mod_share=mod_share, key="subj")
            verb = self.pick(verbs or VERBS, "verb/" + subj.head)
            habit = self.habits.get(subj.head) if not verbs and r.random() < self.habit_share else None
            if habit:
                verb = habit["verb"]
                if not subj.is_name and r.random() < 0.5:
                    subj = NP(subj.head, subj.number, subj.det, (habit["adj"],), subj.mod, count=subj.count)
            obj = self.np(SELECTS.get(verb, OBJECT_NOUNS), name_share=0.0 if verb in SELECTS else 0.1, adj_max=1, key="obj/" + verb)
            if habit:
                obj = NP(habit["obj"], "sg", None) if habit["obj"] in NAMES else NP(
                    habit["obj"], obj.number, obj.det if obj.count else obj.det or "the", obj.adjs, count=obj.count)
            if subj.head == obj.head or {subj.head, obj.head, verb} & avoid:
                continue
            place = self.np(PLACES, adj_max=1, number="sg", key="place/" + verb)
            loc = PP(self.pick(PREPOSITIONS, "prep/" + place.head), place) if r.random() < loc_share else None
            if habit and loc:
                loc = PP(loc.prep, NP(habit["place"], "sg", loc.np.det, loc.np.adjs))
            if loc and loc.np.head in avoid:
                loc = None
            if self.date_share and r.random() < self.date_share:
                return Clause(subj, verb, obj, loc, when=self.date())
            return Clause(subj, verb, obj, loc)
        raise RuntimeError("could not sample a clause under the constraints")

    def question(self, clause: Clause) -> Question:
        targets = ["subj", "obj"] + (["loc"] if clause.loc else [])
        target = self.rng.choice(targets)
        return Question(clause, target, paraphrase=self.paraphrased(clause, target))

    def paraphrased(self, clause: Clause, target: str) -> bool:
        """Whether the question about ``target`` of ``clause`` is paraphrased: a fixed function of
        the question and the seed, drawn from no stream, so a world with paraphrases holds the
        same facts, questions and answers as one without (only the wording differs)."""
        if not self.paraphrase_share:
            return False
        h = hashlib.blake2b(f"{self.paraphrase_seed}|paraphrase|{clause!r}|{clause.when}|{target}".encode(), digest_size=4)
        return int.from_bytes(h.digest(), "big") / 2**32 < self.paraphrase_share


@dataclass
class Rendered:
    text: str
    words: list[Word]
    spans: list[tuple[int, int]]


@dataclass(frozen=True)
class Answer:
    """The short answer to a question, as people write it after one: "who sees the dog? anna."."""

    question: Question


Item = Clause | Question | Answer


def clause_of(item: Item) -> Clause:
    if isinstance(item, Answer):
        return item.question.clause
    return item.clause if isinstance(item, Question) else item


def render(lang: Language, item: Item, verb_number: str | None = None) -> Rendered:
    if isinstance(item, Answer):
        statement = lang.render_statement(item.question.clause)
        target = item.question.target
        words = [(w, slot) for w, slot in statement if slot == target or slot.startswith(target + "/")] + [(".", "punct")]
    elif isinstance(item, Question):
        words = lang.render_question(item)
    else:
        words = lang.render_statement(item, verb_number)
    text, spans = join_words([w for w, _ in words])
    return Rendered(text, words, spans)


class World:
    """A generated world. Cheap to construct; each artefact is generated on first use."""

    def __init__(self, config: WorldConfig):
        config.validate()
        self.config = config
        self.l1 = L1
        self.languages: list[str] = [L1] + [l.code for l in config.languages]
        self.specs = {l.code: l for l in config.languages}
        self.habits = make_habits(config.seed)
        self.lang: dict[str, Language] = {L1: Language(L1, variety=float(config.l1_variety), variety_seed=config.seed)}
        for i, spec in enumerate(config.languages):
            lex = L2Lexicon.generate(config.seed * 1000 + i, spec.script, shared_names=config.shared_names,
                                     loanword_share=float(config.loanword_share))
            self.lang[spec.code] = Language(spec.code, grammar_of(spec.order), lex)

    @property
    def _material(self) -> dict[str, float]:
        """Numerals and dates, for the samplers of the corpora, the QA sets and the parallel
        pairs (the agreement and sense pairs, built to test one word, have none)."""
        return {"numeral_share": float(self.config.numeral_share), "date_share": float(self.config.date_share),
                "paraphrase_share": float(self.config.qa_paraphrase), "paraphrase_seed": self.config.seed}

    @property
    def l2s(self) -> list[str]:
        return self.languages[1:]

    def _check(self, lang: str) -> Language:
        if lang not in self.lang:
            raise XlvizError(f"unknown language {lang!r}; this world has {self.languages}", field="language")
        return self.lang[lang]

    def _rng(self, *parts: object) -> random.Random:
        return random.Random("-".join(map(str, (self.config.seed,) + parts)))

    # --- corpora -----------------------------------------------------------------
    def _corpus_items(self, lang: str, forbidden: set) -> list[list[Item]]:
        """Documents of 3-7 statements; ``question_share`` of them end with one to three
        question-answer exchanges about their own statements, so that predicting a masked
        answer means finding it earlier in the document (reading, learned without labels)."""
        s = Sampler(self._rng("corpus", lang), self.habits, self.config.habit_share, self.config.preference, self.config.seed,
                    **self._material)
        docs = []
        for _ in range(self.config.corpus_documents):
            doc: list[Item] = []
            for _ in range(s.rng.randint(3, 7)):
                c = s.clause(mod_share=0.15)
                if c not in forbidden:
                    doc.append(c)
            if doc and s.rng.random() < self.config.question_share:
                for c in s.rng.sample(doc, min(len(doc), s.rng.randint(1, 3))):
                    q = s.question(c)
                    doc += [q, Answer(q)]
            docs.append(doc)
        return docs

    @cached_property
    def _l1_corpus_items(self) -> list[list[Item]]:
        return self._corpus_items(L1, set())

    @cached_property
    def l1_clauses(self) -> set[Clause]:
        return {clause_of(it) for doc in self._l1_corpus_items for it in doc}

    def corpus_items(self, lang: str) -> list[list[Item]]:
        """Documents of clauses/questions. L2 corpora are drawn independently of L1's and never
        contain a clause that the L1 corpus contains: no sentence of one translates the other."""
        self._check(lang)
        if lang == L1:
            return self._l1_corpus_items
        return self._corpus_items(lang, self.l1_clauses)

    def corpus(self, lang: str) -> list[str]:
        """One string per document, sentences separated by spaces."""
        language = self._check(lang)
        return [" ".join(render(language, it).text for it in doc) for doc in self.corpus_items(lang)]

    def articles(self, lang: str) -> list[str] | None:
        """The language's article words for MLQA-style answer normalisation; None for English,
        which the official v1.1 normalisation already covers."""
        language = self._check(lang)
        return None if language.is_english else [language.fn("the"), language.fn("a")]

    # --- QA ------------------------------------------------------------------------
    def _paragraphs(self, split: str, n: int) -> list[list[tuple[Clause, list[Question]]]]:
        s = Sampler(self._rng("qa", split), **self._material)
        paras = []
        for _ in range(n):
            used: set[str] = set()
            facts = []
            for _ in range(s.rng.randint(*self.config.qa_facts)):
                c = s.clause(avoid=used)
                used |= {c.subj.head, c.obj.head, c.verb} | ({c.loc.np.head} if c.loc else set())
                targets = ["subj", "obj"] + (["loc"] if c.loc else [])
                k = 1 if s.rng.random() < 0.6 else 2
                facts.append((c, [Question(c, t, paraphrase=s.paraphrased(c, t)) for t in s.rng.sample(targets, k)]))
            paras.append(facts)
        return paras

    def _sizes(self) -> dict[str, int]:
        return {"train": self.config.qa_train_paragraphs, "dev": self.config.qa_dev_paragraphs, "test": self.config.qa_test_paragraphs}

    def qa(self, split: str, lang: str = L1) -> dict:
        """SQuAD v1.1 JSON. Train and dev exist in L1 only; test in every language with shared ids.
        (The L1 training set rendered in an L2 is :meth:`translate_train`, kept apart so that no
        zero-shot system reads it by accident.)"""
        self._check(lang)
        if split not in self._sizes():
            raise XlvizError(f"unknown split {split!r}; choose from {list(self._sizes())}", field="split")
        if split != "test" and lang != L1:
            raise XlvizError(f"the {split} split exists in {L1} only (zero-shot transfer); "
                             "translate-train systems read World.translate_train", field="language")
        return self._qa(split, lang)

    def qa_facts(self, split: str) -> list[list[tuple[Clause, list[Question]]]]:
        """The facts behind :meth:`qa`'s paragraphs: per paragraph, its clauses in context order,
        each with the questions asked about it (question id ``<split>-<paragraph:04d>-<fact>-<target>``).
        Why: analyses group questions by what the generator knows (the asked role, the answer's
        kind, the paragraph's size) without parsing the rendered text; reading them changes no
        generated byte."""
        if split not in self._sizes():
            raise XlvizError(f"unknown split {split!r}; choose from {list(self._sizes())}", field="split")
        return self._paragraphs(split, self._sizes()[split])

    def translate_train(self, lang: str) -> dict:
        """The L1 QA training set rendered in ``lang``: the same facts, questions and ids, with
        answer offsets tracked in the L2 rendering (the translate-train setting of VECO and PPA).
        Only systems whose ``uses()`` says ``l2_labels`` may read it (the run checks)."""
        if self._check(lang).is_english:
            raise XlvizError(f"translate-train data exists for the L2s only, not {lang!r}", field="language")
        out = self._qa("train", lang)
        out["version"] = f"xlviz-world-translate-train-{lang}"
        return out

    def qa_alignment(self, split: str, lang: str) -> dict[str, dict]:
        """Gold word alignment of each QA question and context of ``split`` between L1 and
        ``lang`` (the texts of :meth:`qa`): ``{id: {"question": side, "context": side}}`` with
        ``side = {"words_a", "spans_a", "words_b", "spans_b", "pairs"}`` (L1 = a; spans are
        characters of that text; pairs (word in a, word in b) join words from the same slot).
        Why: the XQuAD page links an English word's salience to its translation's."""
        a, b = self.lang[L1], self._check(lang)
        if split not in self._sizes():
            raise XlvizError(f"unknown split {split!r}; choose from {list(self._sizes())}", field="split")

        def side(pairs_of_renderings: list) -> dict:
            out = {"words_a": [], "spans_a": [], "words_b": [], "spans_b": [], "pairs": []}
            pos = {"a": 0, "b": 0}
            for ra, rb in pairs_of_renderings:
                base_a, base_b = len(out["words_a"]), len(out["words_b"])
                out["pairs"] += [(i + base_a, j + base_b) for i, j in word_alignment(ra.words, rb.words)]
                for key, r in (("a", ra), ("b", rb)):
                    out[f"words_{key}"] += [w for w, _ in r.words]
                    out[f"spans_{key}"] += [(s + pos[key], e + pos[key]) for s, e in r.spans]
                    pos[key] += len(r.text) + 1  # sentences joined by one space, as in _qa
            return out

        found: dict[str, dict] = {}
        for p_idx, facts in enumerate(self._paragraphs(split, self._sizes()[split])):
            context = side([(render(a, c), render(b, c)) for c, _ in facts])
            for f_idx, (_, questions) in enumerate(facts):
                for q in questions:
                    found[f"{split}-{p_idx:04d}-{f_idx}-{q.target}"] = {
                        "question": side([(render(a, q), render(b, q))]), "context": context}
        return found

    def _qa(self, split: str, lang: str) -> dict:
        language = self.lang[lang]
        sizes = self._sizes()
        articles = []
        for p_idx, facts in enumerate(self._paragraphs(split, sizes[split])):
            if p_idx % 5 == 0:
                articles.append({"title": f"world-{split}-{p_idx // 5:03d}", "paragraphs": []})
            sents = [render(language, c) for c, _ in facts]
            context = " ".join(r.text for r in sents)
            offsets, pos = [], 0
            for r in sents:
                offsets.append(pos)
                pos += len(r.text) + 1
            qas = []
            for f_idx, ((c, questions), r, off) in enumerate(zip(facts, sents, offsets)):
                for q in questions:
                    start, end = constituent_span(r.words, r.spans, q.target)
                    answer = context[off + start: off + end]
                    qas.append({
                        "id": f"{split}-{p_idx:04d}-{f_idx}-{q.target}",
                        "question": render(language, q).text,
                        "answers": [{"text": answer, "answer_start": off + start}],
                    })
            articles[-1]["paragraphs"].append({"context": context, "qas": qas})
        out = {"version": f"xlviz-world-{split}-{lang}", "data": articles}
        words = self.articles(lang)
        if words is not None:
            out["articles"] = words  # for MLQA-style scoring (xlviz.data.squad.language_articles)
        return out

    # --- analysis material -------------------------------------------------------------
    def _parallel_items(self, key: str, n: int, forbidden: frozenset = frozenset()) -> list[Item]:
        """``n`` statements and questions; none whose clause or English text is ``forbidden``
        (a question can read the same from two clauses: "what does nina swing?")."""
        s = Sampler(self._rng(key), self.habits, self.config.habit_share, self.config.preference, self.config.seed,
                    **self._material)
        items: list[Item] = []
        while len(items) < n:
            c = s.clause(mod_share=0.1)
            item = s.question(c) if s.rng.random() < 0.2 else c
            if not forbidden or (c not in forbidden and render(self.lang[L1], item).text not in forbidden):
                items.append(item)
        return items

    def _pairs(self, l2: str, items: list[Item], prefix: str) -> list[dict]:
        a, b = self.lang[L1], self._check(l2)
        out = []
        for i, item in enumerate(items):
            ra, rb = render(a, item), render(b, item)
            out.append({
                "id": f"{prefix}-{i:05d}", "src": ra.text, "tgt": rb.text,
                "src_words": [w for w, _ in ra.words], "tgt_words": [w for w, _ in rb.words],
                "alignment": word_alignment(ra.words, rb.words),
            })
        return out

    def parallel_pairs(self, l2: str, n: int | None = None) -> list[dict]:
        """Translation pairs (statements and questions) with gold word alignment (en index, l2
        index): the held-out pairs the analysis pages evaluate on."""
        self._check(l2)
        return self._pairs(l2, self._parallel_items("parallel", n or self.config.parallel_pairs), "pair")

    @cached_property
    def held_out_clauses(self) -> frozenset:
        """What no training pair of the parallel-data methods may contain: the clauses and
        English texts of the evaluation pairs, the clauses of every QA dev and test paragraph."""
        items = self._parallel_items("parallel", self.config.parallel_pairs)
        pairs = {clause_of(it) for it in items} | {render(self.lang[L1], it).text for it in items}
        qa = {c for split in ("dev", "test") for facts in self._paragraphs(split, self._sizes()[split]) for c, _ in facts}
        return frozenset(pairs | qa)

    def parallel_train(self, l2: str, n: int | None = None) -> list[dict]:
        """The parallel training corpus of ``l2`` (VECO's CA-MLM/TLM, PPA's MoCo + TLM): drawn
        with its own seed, never containing a clause of :meth:`parallel_pairs` or of a QA dev or
        test paragraph (so retrieval and QA scores stay held out)."""
        self._check(l2)
        items = self._parallel_items("parallel-train", n or self.config.parallel_train_pairs, self.held_out_clauses)
        return self._pairs(l2, items, "train-pair")

    def dictionary(self, l2: str) -> list[dict]:
        """Gold bilingual dictionary over word forms: {en, l2, lemma, pos}."""
        a, b = self.lang[L1], self._check(l2)
        rows = []
        for lemma in NAMES:
            rows.append({"en": lemma, l2: b.fn(lemma), "lemma": lemma, "pos": "name"})
        for lemma in THINGS + ANIMALS + PEOPLE + PLACES + [s for p in HOMONYMS.values() for s in p]:
            for number in ("sg", "pl"):
                np = NP(lemma, number)
                rows.append({"en": a.noun(np), l2: b.noun(np), "lemma": lemma, "pos": f"noun.{number}"})
        for lemma in VERBS:
            for number in ("sg", "pl"):
                rows.append({"en": a.verb(lemma, number), l2: b.verb(lemma, number), "lemma": lemma, "pos": f"verb.{number}"})
        for lemma in ADJECTIVES + PREPOSITIONS + ["the", "a", "who", "what", "where", "does", "do"]:
            rows.append({"en": lemma, l2: b.fn(lemma), "lemma": lemma, "pos": "function" if lemma not in ADJECTIVES else "adj"})
        if self.config.date_share > 0:  # the dates' preposition, where the texts use it
            rows.append({"en": DATE_PREPOSITION, l2: b.fn(DATE_PREPOSITION), "lemma": DATE_PREPOSITION, "pos": "function"})
        if self.config.qa_paraphrase > 0:  # the class nouns of paraphrased questions
            for lemma in dict.fromkeys(HYPERNYMS.values()):
                for number in ("sg", "pl"):
                    np = NP(lemma, number)
                    rows.append({"en": a.noun(np), l2: b.noun(np), "lemma": lemma, "pos": f"noun.{number}"})
        return rows

    def agreement_pairs(self, lang: str, n: int | None = None) -> list[dict]:
        """Subject-verb agreement minimal pairs (grammatical / ungrammatical), by category:
        simple; across_pp (an opposite-number noun inside a PP modifying the subject);
        object_attractor (the object has the opposite number)."""
        language = self._check(lang)
        s = Sampler(self._rng("agreement", lang))
        out = []
        cats = ["simple", "across_pp", "object_attractor"]
        for i in range(n or self.config.agreement_pairs):
            cat = cats[i % 3]
            number = "sg" if s.rng.random() < 0.5 else "pl"
            other = "pl" if number == "sg" else "sg"
            subj = s.np(SUBJECT_NOUNS, number=number, adj_max=1)
            if cat == "across_pp":
                subj = NP(subj.head, number, subj.det, subj.adjs, PP(s.rng.choice(PREPOSITIONS), s.np(SUBJECT_NOUNS, number=other, adj_max=0)))
            verb = s.rng.choice([v for v in VERBS if v not in SELECTS])
            obj = s.np(OBJECT_NOUNS, number=other if cat == "object_attractor" else number, adj_max=1)
            c = Clause(subj, verb, obj, None)
            good, bad = render(language, c), render(language, c, verb_number=other)
            idx = next(j for j, (_, slot) in enumerate(good.words) if slot == "verb")
            out.append({
                "id": f"agr-{lang}-{i:05d}", "category": cat, "good": good.text, "bad": bad.text,
                "words": [w for w, _ in good.words], "index": idx,
                "good_word": good.words[idx][0], "bad_word": bad.words[idx][0],
            })
        return out

    def sense_pairs(self, lang: str, n: int | None = None) -> list[dict]:
        """Pairs of contexts of an ambiguous English word (bat, seal, crane), labelled same
        sense or not. The two senses are different words in every L2."""
        language = self._check(lang)
        s = Sampler(self._rng("senses"))
        homs = sorted(HOMONYMS)
        out = []

        def context(sense: str) -> tuple[list[str], int]:
            if sense.endswith("#animal") and s.rng.random() < 0.5:
                c = s.clause(loc_share=0.3, avoid={sense})
                c = Clause(NP(sense, "sg", "the", ()), c.verb, c.obj, c.loc)
                slot = "subj/head"
            else:
                verb = "feed" if sense.endswith("#animal") else s.rng.choice(["swing", "carry", "hold", "find"])
                c = s.clause(loc_share=0.3, verbs=[verb])
                c = Clause(c.subj, verb, NP(sense, "sg", "the", ()), c.loc)
                slot = "obj/head"
            r = render(language, c)
            return [w for w, _ in r.words], next(j for j, (_, sl) in enumerate(r.words) if sl == slot)

        for i in range(n or self.config.sense_pairs):
            word = homs[i % len(homs)]
            senses = HOMONYMS[word]
            s1 = s.rng.choice(senses)
            same = s.rng.random() < 0.5
            s2 = s1 if same else senses[1 - senses.index(s1)]
            (w1, i1), (w2, i2) = context(s1), context(s2)
            out.append({
                "id": f"wic-{i:05d}", "lemma": word, "sense1": s1, "sense2": s2, "same_sense": same,
                "words1": w1, "index1": i1, "words2": w2, "index2": i2,
                "sentence1": join_words(w1)[0], "sentence2": join_words(w2)[0],
            })
        return out

    # --- files --------------------------------------------------------------------------
    def read_back(self) -> list[dict]:
        """The files :meth:`save` writes that readers open again, as the run's manifest names
        them (``kind`` and its fields, :func:`xlviz.runs.world_relpath`): the world's
        description, each language's QA test set, the L1 training and dev sets, the parallel
        evaluation pairs of each L2. The world stage records them."""
        return [{"kind": "world"},
                *({"kind": "qa", "split": "test", "language": lang} for lang in self.languages),
                *({"kind": "qa", "split": split, "language": L1} for split in ("train", "dev")),
                *({"kind": "parallel", "language": l2, "pair": L1} for l2 in self.l2s)]

    def save(self, directory: str | Path) -> Path:
        """Write every artefact as plain files (txt, SQuAD JSON, JSONL) under ``directory``; those
        read back (:meth:`read_back`) where :func:`xlviz.runs.world_relpath` puts them."""
        d = Path(directory)
        atomic_write_json(d / world_relpath("world"), {"config": self.config.to_dict(), "languages": self.languages})
        for lang in self.languages:
            atomic_write_text(d / "corpora" / f"{lang}.txt", "\n".join(self.corpus(lang)) + "\n")
            atomic_write_json(d / world_relpath("qa", split="test", language=lang), self.qa("test", lang))
            _write_jsonl(d / "agreement" / f"{lang}.jsonl", self.agreement_pairs(lang))
            _write_jsonl(d / "senses" / f"{lang}.jsonl", self.sense_pairs(lang))
        for split in ("train", "dev"):
            atomic_write_json(d / world_relpath("qa", split=split, language=L1), self.qa(split, L1))
        for l2 in self.l2s:
            _write_jsonl(d / world_relpath("parallel", language=l2, pair=L1), self.parallel_pairs(l2))
            # Training material of the parallel-data methods, in folders of their own so that
            # no evaluation reading world/qa or world/parallel picks it up.
            _write_jsonl(d / "parallel-train" / f"{L1}-{l2}.jsonl", self.parallel_train(l2))
            atomic_write_json(d / "translate-train" / f"train.{l2}.json", self.translate_train(l2))
            _write_jsonl(d / "dictionary" / f"{L1}-{l2}.jsonl", self.dictionary(l2))
        return d


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def generate_world(config: WorldConfig | None = None) -> World:
    return World(config or WorldConfig())


def load_world(directory: str | Path) -> World:
    """Rebuild the world saved in ``directory`` (it is deterministic given its config)."""
    meta = read_json(Path(directory) / "world.json", what="world description")
    if "config" not in meta:
        raise XlvizError("missing 'config'", path=Path(directory) / "world.json", field="config")
    return World(WorldConfig.from_dict(meta["config"], path=str(Path(directory) / "world.json")))


# Re-exported for users of the world who want English morphology helpers.
__all__ = ["World", "WorldConfig", "LanguageSpec", "generate_world", "load_world", "render", "english_plural", "english_3sg", "surface_lemma"]
