"""The benchmark index: hashed word n-grams of every benchmark question
(and of the worked answers where a benchmark ships them), short items,
fuzzy word order, quantities and meanings, each a candidate generator
confirmed by the same-problem rules (transforms/same_problem/).

The index is built once per worker process (see `get_index`), not per
element, and is small: GSM8K test, about 1,300 items, gives ~150k n-grams.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from tasksieve.transforms.decontam.benchmarks import ITEMS, ngram_hash, background_words, load_user_items, ngrams, words
from tasksieve.transforms.same_problem.quantities import quantities
from tasksieve.transforms.same_problem.rules import Idf, Item, Rules, judge_item, rules_from_config


@dataclass
class Probe:
    """One task as every check against the index starts from it, computed
    once (BenchmarkIndex.probe_of) and shared by the prefilter, ask_ahead.py
    and judge: its words, its quantities, its word candidates and, when first
    asked, its quantity candidates (by_quantities)."""

    text: str
    words: list[str]
    quantities: Counter
    lexical: list[tuple[int, dict]]
    quantity_candidates: list[tuple[int, float]] | None = None


class BenchmarkIndex:
    """Candidate generators over benchmark items, then the same-problem
    confirmation (`same_problem.judge_item`).

    Candidates, cheapest first:
    - `ngram`: hashed word n-grams -> items; a shared n-gram;
    - `short_item`: items with fewer than n words (but at least
      `short_min_words`) that a long n-gram can never match: the task
      contains the item's whole normalised word sequence;
    - `fuzzy`: light rewording that breaks every n-gram. Items sharing
      several word `probe`-grams with the task (probes in more than `max_df`
      items are too common to mean anything), with `fuzzy_threshold` of the
      item's words in the task in the same order;
    - `semantic`: rewordings that keep little of the wording (names and
      objects swapped, paraphrases, translations): items whose quantities
      the task states (`numbers_min` of them; looked up by each item's two
      rarest quantities) and whose meaning is close (cosine of sentence
      embeddings >= `rules.semantic_min`, see embed.py).

    `match(text)` is the words-only judgement (the first candidate found);
    `judge(task)` confirms candidates on numbers, the reference answer and
    code behaviour, with boilerplate down-weighted (same_problem.py)."""

    def __init__(
        self,
        n: int,
        short_min_words: int = 4,
        fuzzy: bool = True,
        fuzzy_threshold: float = 0.6,
        probe: int = 3,
        max_df: int = 50,
        confirm: bool = True,
        semantic: bool = True,
        rules: Rules | None = None,
        max_candidates: int = 8,
    ):
        self.n = n
        self.grams: dict[int, list[int]] = {}
        self.items = 0
        self.meta: list[Item] = []
        self.short_min_words = short_min_words
        self.short: dict[int, dict[int, list[int]]] = {}  # length -> hash -> items
        self.fuzzy, self.fuzzy_threshold, self.probe, self.max_df = fuzzy, fuzzy_threshold, probe, max_df
        self.fuzzy_items: list[int] = []
        self.fuzzy_bags: dict[int, Counter] = {}  # a fuzzy item's words as a multiset
        self.fuzzy_min_hits: dict[int, int] = {}  # shared probes it needs to be aligned
        self.postings: dict[int, list[int]] = {}
        self.confirm, self.semantic, self.rules = confirm, semantic, rules or Rules()
        self.max_candidates = max_candidates
        self.min_surprise = 6.0
        self.idf = Idf()
        self.qdf: Counter = Counter()
        self._qpost: dict[str, list[int]] | None = None
        self._qtotals: list[int] = []  # each item's count of quantities, made with _qpost
        self.by_answer: dict[str, list[int]] = {}  # a numeric answer -> items (answer_key)
        self.windows = None  # (items, batch_probe.WindowTables), made on a chunk's first probes
        self.quantity_tables = None  # (items, batch_probe.QuantityTables), likewise

    def add(
        self,
        benchmark: str,
        item_id: str,
        text: str,
        fuzzy: bool = True,
        answer: str | None = None,
        tests: str | None = None,
        entry_point: str | None = None,
    ) -> None:
        idx = len(self.meta)
        self.items += 1
        ws = words(text)
        q = quantities(text)
        self.meta.append(Item(benchmark, item_id, text, ws, answer, tests, entry_point, q))
        key = answer_key(answer)
        if key is not None and not item_id.endswith("/answer"):
            self.by_answer.setdefault(key, []).append(idx)
        self.idf.add(ws)
        self.qdf.update(set(q))
        self._qpost = None
        for _, h in ngrams(ws, self.n):
            hits = self.grams.setdefault(h, [])
            if len(hits) < 16 and (not hits or hits[-1] != idx):
                hits.append(idx)
        if self.short_min_words <= len(ws) < self.n:
            self.short.setdefault(len(ws), {}).setdefault(ngram_hash(ws), []).append(idx)
        # Fuzzy only for items of n words or more: a shorter item must match whole
        # (one changed word in "what is the capital of X" is another question).
        if self.fuzzy and fuzzy and len(ws) >= self.n:
            self.fuzzy_items.append(idx)
            self.fuzzy_bags[idx] = Counter(ws)
            # Enough shared probes to be worth aligning: a fifth of the item's.
            self.fuzzy_min_hits[idx] = max(2, (len(ws) - self.probe + 1) // 5)
            for h in {h for _, h in ngrams(ws, min(self.probe, len(ws)))}:
                self.postings.setdefault(h, []).append(idx)

    def add_background(self, ws: list[str]) -> None:
        """A clean task's words: counted for IDF only (boilerplate evidence)."""
        self.idf.add(ws)

    # --- candidates --------------------------------------------------------------------------

    def _item_evidence(self, idx: int) -> dict:
        m = self.meta[idx]
        return {"benchmark": m.benchmark, "benchmark_item": m.item_id}

    def _lexical(self, ws: list[str], first_only: bool = False, found=None) -> list[tuple[int, dict]]:
        """Word candidates in the order judge takes them. `found`: where the
        chunk's window hashes put this text's possible hits (batch_probe.py,
        a filter that never misses one); None: every window is looked up."""
        out: list[tuple[int, dict]] = []
        seen: set[int] = set()

        def put(idx, ev):
            if idx not in seen:
                seen.add(idx)
                out.append((idx, ev))

        # An item is a candidate once, with its first window's evidence: `seen`
        # is asked before the evidence is made (most hits repeat an item).
        for i, h in ngrams(ws, self.n, None if found is None else found.ngram):
            for idx in self.grams.get(h, ()):
                if idx not in seen:
                    put(idx, {"check": "ngram", "ngram": " ".join(ws[i : i + self.n]), "n": self.n})
            if first_only and out:
                return out
        for length, table in self.short.items():
            for i, h in ngrams(ws, length, None if found is None else found.short.get(length, ())):
                for idx in table.get(h, ()):
                    if idx not in seen:
                        put(idx, {"check": "short_item", "matched_text": " ".join(ws[i : i + length])})
                if first_only and out:
                    return out
        if self.fuzzy and self.fuzzy_items:
            hits = self._probe_hits(ws) if found is None else found.fuzzy
            for idx, coverage in self._aligned(ws, hits, first_only, seen):
                put(
                    idx,
                    {
                        "check": "fuzzy",
                        "matched_text": " ".join(self.meta[idx].words)[:500],
                        "similarity": round(coverage, 4),
                    },
                )
        return out

    def _probe_hits(self, ws: list[str]) -> dict[int, int]:
        """Fuzzy items -> how many of the text's distinct probe-grams they
        share (grams in more than `max_df` items left out)."""
        hits: dict[int, int] = {}
        for h in {h for _, h in ngrams(ws, self.probe)}:
            post = self.postings.get(h)
            if post is not None and len(post) <= self.max_df:
                for idx in post:
                    hits[idx] = hits.get(idx, 0) + 1
        return hits

    def _aligned(self, ws: list[str], hits: dict[int, int], first_only: bool, seen=frozenset()) -> list:
        """(item, coverage) of the (at most 5) best-hit fuzzy items whose
        words the text holds in order; `seen` items (candidates already)
        are not aligned: the caller would drop them."""
        need = self.fuzzy_min_hits
        cands = [i for i, c in hits.items() if c >= need[i]]
        out = []
        bag = None
        for idx in sorted(cands, key=lambda i: (-hits[i], i))[:5]:
            if idx in seen:
                continue
            item_ws = self.meta[idx].words
            # The aligned words are at most the words both have (as multisets):
            # below the threshold on that bound, the alignment cannot reach it.
            bag = Counter(ws) if bag is None else bag
            if sum((self.fuzzy_bags[idx] & bag).values()) / len(item_ws) < self.fuzzy_threshold:  # as coverage below
                continue
            blocks = SequenceMatcher(None, item_ws, ws, autojunk=False).get_matching_blocks()
            coverage = sum(b.size for b in blocks) / len(item_ws)
            if coverage >= self.fuzzy_threshold:
                out.append((idx, coverage))
                if first_only:
                    break
        return out

    def probe_of(self, task: dict) -> Probe:
        """One task's probe (batch_probe.probes_of: a chunk's, the same)."""
        text = task.get("prompt") or ""
        ws = words(text)
        return Probe(text, ws, quantities(text), self._lexical(ws))

    def by_quantities(self, probe: Probe) -> list[tuple[int, float]]:
        """`_by_quantities` of the probe's quantities, computed once."""
        if probe.quantity_candidates is None:
            probe.quantity_candidates = self._by_quantities(probe.quantities)
        return probe.quantity_candidates

    def _quantity_postings(self) -> dict[str, list[int]]:
        """Each item (with enough quantities) under its two rarest quantities."""
        if self._qpost is None:
            post: dict[str, list[int]] = {}
            for idx, m in enumerate(self.meta):
                if sum(m.quantities.values()) >= self.rules.min_numbers and not m.item_id.endswith("/answer"):
                    for v in sorted(m.quantities, key=lambda v: (self.qdf[v], v))[:2]:
                        post.setdefault(v, []).append(idx)
            self._qtotals = [sum(m.quantities.values()) for m in self.meta]
            self._qpost = post
        return self._qpost

    def _by_quantities(self, tq: Counter) -> list[tuple[int, float]]:
        """Items whose quantities the task states (`numbers_min` of them), that
        make up most of the task's own (a long task does not match every
        short item inside it), and whose shared quantities are unlikely by
        chance: their summed IDF over the items at least `min_surprise`
        (small numbers like 2, 3, 5 are in hundreds of items)."""
        post = self._quantity_postings()
        totals = self._qtotals
        n = len(self.meta) + 1
        t_total = sum(tq.values())
        numbers_min = self.rules.numbers_min
        out = {}
        for v in tq:
            for idx in post.get(v, ()):
                if idx in out:
                    continue
                total = totals[idx]
                # common <= total and common <= t_total: either bound failing the
                # test below fails it without counting (this loop is hot).
                if total < 0.5 * t_total or t_total < numbers_min * total:
                    out[idx] = None
                    continue
                q = self.meta[idx].quantities
                common = sum(min(c, tq.get(x, 0)) for x, c in q.items())
                if common < numbers_min * total or common < 0.5 * t_total:
                    out[idx] = None
                    continue
                share = round(common / total, 4)
                surprise = sum(math.log(n / (self.qdf[x] + 1)) for x in (q & tq))
                out[idx] = share if surprise >= self.min_surprise else None
        return sorted(((i, s) for i, s in out.items() if s is not None), key=lambda x: (-x[1], x[0]))

    # --- judgements --------------------------------------------------------------------------

    def answer_candidates(self, task: dict, tq: Counter, judged=frozenset()) -> list[int]:
        """Items with the task's answer (a number) whose quantities the task
        states, every one (`share` 1), that make up most of the task's own
        (`back` >= ANSWER_BACK_MIN) and are unlikely by chance (the summed
        IDF of the quantities over the items, plus the answer's, at least
        `min_surprise`, as _by_quantities): the item reworded, names and
        objects swapped or translated. Not yet confirmed: `_by_answer`
        judges them; the prefilter and ask_ahead.py ask what they need."""
        key = answer_key(task.get("answer"))
        if key is None or key not in self.by_answer:
            return []
        n = len(self.meta) + 1
        same_answer = self.by_answer[key]
        # The answer is evidence too: rarer answers, more (log n / items with it).
        answer_surprise = math.log(n / (len(same_answer) + 1))
        out = []
        for idx in same_answer[:64]:
            if idx in judged:
                continue
            if self.number_poor(idx):
                continue
            q = self.meta[idx].quantities
            common = sum((q & tq).values())
            if common < sum(q.values()) or common < ANSWER_BACK_MIN * sum(tq.values()):
                continue
            if answer_surprise + sum(math.log(n / (self.qdf[x] + 1)) for x in q) < self.min_surprise:
                continue
            out.append(idx)
        return out

    def _by_answer(self, task: dict, probe: Probe, judged: set[int]) -> dict | None:
        """The first of `answer_candidates` that judge_item confirms."""
        for idx in self.answer_candidates(task, probe.quantities, judged):
            same, why = judge_item(task, probe.words, self.meta[idx], self.idf, self.rules, lazy_answer=True)
            if same:
                return {**self._item_evidence(idx), "check": "answer_quantities", **why}
        return None

    def match(self, text: str) -> dict | None:
        """Words only, no confirmation: evidence of the first candidate, or None."""
        if not self.items:
            return None  # no benchmark configured: nothing to tokenise for
        found = self._lexical(words(text), first_only=True)
        if not found:
            return None
        idx, ev = found[0]
        return {**self._item_evidence(idx), **ev}

    def _cosines(self, text: str, idxs: list[int], need: float) -> dict[int, float | None]:
        """The encoder's cosines of `text` to the items, None where the
        bag-of-pieces bound puts one below `need` (embed.Embedder.cosines)."""
        from tasksieve.transforms.same_problem.embed import get_model

        return dict(zip(idxs, get_model().cosines([(text, self.meta[i].text) for i in idxs], need)))

    def semantic_candidates(self, probe: Probe) -> list[tuple[int, float]]:
        """Quantity candidates that are not word candidates, as judge takes them."""
        proposed = {idx for idx, _ in probe.lexical}
        return [(i, s) for i, s in self.by_quantities(probe) if i not in proposed][: self.max_candidates]

    def number_poor(self, idx: int) -> bool:
        return sum(self.meta[idx].quantities.values()) < self.rules.min_numbers

    def poor_need(self, idx: int, task_words: list[str]) -> float:
        """The bar a number-poor word candidate's cosine is asked against
        (Embedder.cosines): semantic_alone_min, where meaning alone could
        confirm it; none where its words may (judge_item: the evidence of
        that verdict names the cosine, so it is the encoder's)."""
        if self.idf.coverage(self.meta[idx].words, task_words) >= self.rules.text_min:
            return float("-inf")
        return self.rules.semantic_alone_min

    def judge(self, task: dict, probe: Probe | None = None) -> dict | None:
        """Evidence that `task` is a benchmark item (candidate generator, what
        was compared, the item), or None. Without `confirm`: `match`.
        `probe`: the task's, if already computed (decontaminate_rows)."""
        if not self.items:
            return None
        if not self.confirm:
            return self.match(task.get("prompt") or "")
        probe = probe or self.probe_of(task)
        text, ws = probe.text, probe.words
        cands = probe.lexical
        # Words first: most contaminated tasks are confirmed here, without the model.
        for idx, ev in cands[: self.max_candidates]:
            cos = None
            if self.semantic and self.number_poor(idx):  # number-poor item: meaning may confirm it
                cos = self._cosines(text, [idx], self.poor_need(idx, ws))[idx]
            same, why = judge_item(task, ws, self.meta[idx], self.idf, self.rules, cos, lazy_answer=True)
            if same:
                return {**self._item_evidence(idx), **ev, **why}
        # A rewording that swapped names and objects keeps the item's numbers
        # and its answer: found by both, without meaning (translations too).
        hit = self._by_answer(task, probe, {idx for idx, _ in cands[: self.max_candidates]})
        if hit is not None:
            return hit
        if not self.semantic:
            return None
        # Then meaning, only for items whose quantities the task states.
        sem = self.semantic_candidates(probe)
        if not sem:
            return None
        cos = self._cosines(text, [i for i, _ in sem], self.rules.semantic_min)
        for idx, share in sem:
            if cos[idx] is None or cos[idx] < self.rules.semantic_min:
                continue
            ev = {"check": "semantic", "cosine": round(cos[idx], 4), "item_numbers_in_task": share}
            same, why = judge_item(task, ws, self.meta[idx], self.idf, self.rules, cos[idx], lazy_answer=True)
            if same:
                return {**self._item_evidence(idx), **ev, **why}
        return None


# Share of the task's quantities an item found by its answer must make up
# (a rewording may add a number: "the three of them" among four). At 2/3 a
# clean task stating an item's two common numbers, a third and the item's
# common answer was taken for it (the bundled sample's A-047 for GSM8K test/217).
ANSWER_BACK_MIN = 0.75


def answer_key(answer) -> str | None:
    """A numeric answer as an exact fraction's string (`$18`, `18.0` and
    `18` alike), or None."""
    if answer is None or not str(answer).strip():
        return None
    from tasksieve.transforms.same_problem.rules import as_number

    v = as_number(str(answer).strip())
    return None if v is None else str(v)


def build_index(
    n: int, benchmarks: list[str], extra_paths: list[str], background_paths: list[str] | tuple = (), **checks
) -> BenchmarkIndex:
    """`checks`: BenchmarkIndex's keyword options (short_min_words, fuzzy, confirm, ...)."""
    index = BenchmarkIndex(n, **checks)
    for name in benchmarks:
        if name not in ITEMS:
            raise ValueError(f"unknown bundled benchmark {name!r}; known: {', '.join(ITEMS)}")
        for item in ITEMS[name]():
            # Worked answers are long and only ever pasted verbatim: n-grams suffice.
            index.add(
                name,
                item["id"],
                item["text"],
                fuzzy=not item["id"].endswith("/answer"),
                answer=item.get("answer"),
                tests=item.get("tests"),
                entry_point=item.get("entry_point"),
            )
    for path in extra_paths:
        label = Path(path).stem
        for item in load_user_items(path):
            index.add(
                label,
                item["id"],
                item["text"],
                answer=item["answer"],
                tests=item["tests"],
                entry_point=item["entry_point"],
            )
    for ws in background_words(list(background_paths)):
        index.add_background(ws)
    return index


_INDEXES: dict[tuple, BenchmarkIndex] = {}
_LOCK = threading.Lock()


def get_index(n: int, benchmarks: list[str], extra_paths: list[str], **checks) -> BenchmarkIndex:
    """The process's index for these settings, built on first use."""
    key = (n, tuple(benchmarks), tuple(extra_paths), tuple(sorted((k, str(v)) for k, v in checks.items())))
    with _LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = build_index(n, benchmarks, extra_paths, **checks)
        return _INDEXES[key]


def index_spec(decontam) -> tuple:
    """(ngram, benchmarks, extra paths, index_options) from `[decontam]`:
    what the decontamination stage takes (the batch engine's
    transforms/batch/decontam.DecontaminateChunks), mapped here once."""
    return decontam.ngram, decontam.benchmarks, decontam.extra_paths, index_options(decontam)


def index_options(decontam) -> dict:
    """BenchmarkIndex keyword options from a `schemas.config.DecontamConfig`."""
    return {
        "short_min_words": decontam.short_min_words,
        "fuzzy": decontam.fuzzy,
        "fuzzy_threshold": decontam.fuzzy_threshold,
        "probe": decontam.fuzzy_probe,
        "max_df": decontam.fuzzy_max_df,
        "confirm": decontam.confirm,
        "semantic": decontam.semantic,
        "background_paths": tuple(decontam.background_paths),
        "rules": rules_from_config(decontam),
    }
