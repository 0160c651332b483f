"""The probes of a chunk of tasks at once: `BenchmarkIndex.probe_of` for
each, with the word-window look-ups done as array operations.

Most windows of a task's words are in no benchmark item, and looking each
up in a dict was most of what a probe cost (with the fuzzy check's
counting of shared probe-grams per item). Here every word gets the id it
has in the benchmarks' vocabulary (0: in no item, so no window holding it
can match), each window a 64-bit polynomial hash of its ids, and one
sorted look-up per window length says which windows could be an item's:
only those are then looked up as `_lexical` does, in the same order, so
the candidates and their evidence are the row-by-row ones. A window the
index holds always has a hash the index holds (a filter never misses);
two different windows sharing a hash only cost a dict look-up. The fuzzy
check's shared-gram counts come from one sparse product (tasks x grams
times grams x items); where two of the index's own probe-grams share a
hash the counts could merge, so that index keeps the row-by-row path.
Quantity candidates (`quantity_candidates`, BenchmarkIndex.by_quantities
for a chunk) likewise: the postings propose pairs and the count tests
are array operations; the few pairs left are finished row by row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tasksieve.transforms.decontam.benchmarks import words
from tasksieve.transforms.decontam.index import Probe
from tasksieve.transforms.same_problem.quantities import quantities

_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd: the hash of a window is a polynomial in it


@dataclass
class Found:
    """Where one text's windows may hit the index (BenchmarkIndex._lexical)."""

    ngram: list[int]
    short: dict[int, list[int]]
    fuzzy: dict[int, int]


def _window_hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash of the n ids starting at each position (wrapping, uint64)."""
    m = len(ids) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * _MULT + ids[k : k + m]
    return h


def _hash_of(ids: list[int]) -> int:
    return int(_window_hashes(np.asarray(ids, dtype=np.uint64), len(ids))[0])


class WindowTables:
    """The index's windows as sorted hash arrays, built once per index."""

    def __init__(self, index):
        self.vocab: dict[str, int] = {}
        item_ids = []
        for m in index.meta:
            item_ids.append(np.fromiter((self.vocab.setdefault(w, len(self.vocab) + 1) for w in m.words), np.uint64))
        self.n = index.n
        self.ngram = np.unique(
            np.concatenate([_window_hashes(a, index.n) for a in item_ids] or [np.zeros(0, np.uint64)])
        )
        self.short = {
            length: np.unique(np.array([_hash_of(a) for a in item_ids if len(a) == length], dtype=np.uint64))
            for length in index.short
        }
        self.exact = True
        self.grams = np.zeros(0, dtype=np.uint64)
        self.fuzzy = None
        if index.fuzzy and index.fuzzy_items:
            self._fuzzy_tables(index, item_ids)

    def _fuzzy_tables(self, index, item_ids):
        from scipy import sparse

        seen: dict[int, tuple] = {}
        rows, cols = [], []
        for idx in index.fuzzy_items:
            ws, a = index.meta[idx].words, item_ids[idx]
            hs = _window_hashes(a, index.probe)
            for i, h in enumerate(hs.tolist()):
                gram = tuple(ws[i : i + index.probe])
                if seen.setdefault(h, gram) != gram:
                    self.exact = False  # two grams, one hash: counts could merge
                    return
            for h in set(hs.tolist()):
                rows.append(h)
                cols.append(idx)
        keys, gram_of = np.unique(np.array(rows, dtype=np.uint64), return_inverse=True)
        df = np.bincount(gram_of, minlength=len(keys))
        keep = df[gram_of] <= index.max_df  # _probe_hits skips grams in more than max_df items
        self.grams = keys
        self.fuzzy = sparse.csr_matrix(
            (np.ones(int(keep.sum()), dtype=np.int32), (gram_of[keep], np.asarray(cols)[keep])),
            shape=(len(keys), len(index.meta)),
        )
        self.need = np.zeros(len(index.meta), dtype=np.int64)
        for idx, k in index.fuzzy_min_hits.items():
            self.need[idx] = k

    def found(self, index, all_words: list[list[str]]) -> list[Found]:
        """Each text's possible hits: n-gram and short-item window starts, fuzzy counts."""
        windows = _Windows(self.vocab, all_words)
        out = [Found([], {}, {}) for _ in all_words]
        for r, i, _ in windows.holding(self.n, self.ngram):
            out[r].ngram.append(i)
        for length, keys in self.short.items():
            for r, i, _ in windows.holding(length, keys):
                out[r].short.setdefault(length, []).append(i)
        if self.fuzzy is not None:
            self._fuzzy_hits(index, windows, out)
        return out

    def _fuzzy_hits(self, index, windows: _Windows, out: list[Found]) -> None:
        from scipy import sparse

        rows, gram = windows.holding(index.probe, self.grams, arrays=True)
        task_grams = sparse.csr_matrix(
            (np.ones(len(rows), dtype=np.int32), (rows, gram)), shape=(len(out), len(self.grams))
        )
        task_grams.data[:] = 1  # each distinct gram of a text once, as _probe_hits counts them (repeats were summed)
        counts = (task_grams @ self.fuzzy).tocoo()
        # Only items with enough shared grams can be aligned (_aligned): the rest need no count.
        keep = counts.data >= self.need[counts.col]
        for r, i, c in zip(counts.row[keep].tolist(), counts.col[keep].tolist(), counts.data[keep].tolist()):
            out[r].fuzzy[i] = c


class _Windows:
    """A chunk's words as one id array (0: a word in no item), with what
    says whether a window stays inside one text and holds only known words."""

    def __init__(self, vocab: dict[str, int], all_words: list[list[str]]):
        lens = np.fromiter(map(len, all_words), dtype=np.int64, count=len(all_words))
        self.starts = np.concatenate([[0], np.cumsum(lens)])
        self.ids = np.fromiter(
            (vocab.get(w, 0) for ws in all_words for w in ws), dtype=np.uint64, count=int(self.starts[-1])
        )
        self.unknown = np.concatenate([[0], np.cumsum(self.ids == 0)])
        self.row_of = np.repeat(np.arange(len(all_words)), lens)

    def holding(self, n: int, keys: np.ndarray, arrays: bool = False):
        """The n-word windows whose hash is in `keys` (sorted): (row, start
        within the row, index in keys) each, or with `arrays` (rows, key
        indexes) as two arrays."""
        h = _window_hashes(self.ids, n)
        if not len(h) or not len(keys):
            empty = np.zeros(0, np.int64)
            return (empty, empty) if arrays else []
        p = np.arange(len(h))
        rows = self.row_of[p]
        at = np.minimum(np.searchsorted(keys, h), len(keys) - 1)
        ok = (p + n <= self.starts[rows + 1]) & (self.unknown[p + n] == self.unknown[p]) & (keys[at] == h)
        if arrays:
            return rows[ok], at[ok]
        return zip(rows[ok].tolist(), (p[ok] - self.starts[rows[ok]]).tolist(), at[ok].tolist())


def _tables(index, name: str, make):
    """The index's `name` tables, made once (again if items were added)."""
    kept = getattr(index, name)
    if kept is None or kept[0] != len(index.meta):
        kept = (len(index.meta), make(index))
        setattr(index, name, kept)
    return kept[1]


def probes_of(index, tasks: list[dict]) -> list[Probe]:
    """`[index.probe_of(task) for task in tasks]`, the windows looked up per chunk."""
    tables = _tables(index, "windows", WindowTables)
    if not tables.exact:
        return [index.probe_of(task) for task in tasks]
    texts = [task.get("prompt") or "" for task in tasks]
    all_words = [words(text) for text in texts]
    found = tables.found(index, all_words)
    return [Probe(t, ws, quantities(t), index._lexical(ws, found=f)) for t, ws, f in zip(texts, all_words, found)]


class QuantityTables:
    """The index's quantity postings (BenchmarkIndex._quantity_postings) as
    sparse matrices: which items each quantity finds, and each item's
    quantities with their counts."""

    def __init__(self, index):
        from scipy import sparse

        post = index._quantity_postings()
        self.ids: dict[str, int] = {}
        prow, pcol, irow, icol, idata = [], [], [], [], []
        for v, items in post.items():
            for idx in items:
                prow.append(self.ids.setdefault(v, len(self.ids)))
                pcol.append(idx)
        for idx, m in enumerate(index.meta):
            for v, c in m.quantities.items():
                irow.append(idx)
                icol.append(self.ids.setdefault(v, len(self.ids)))
                idata.append(c)
        q, n = len(self.ids), len(index.meta)
        # An item is posted once under each of its two rarest (distinct) quantities: no repeats to sum.
        self.post = sparse.csr_matrix((np.ones(len(prow), np.int32), (prow, pcol)), shape=(q, n))
        self.items = sparse.csr_matrix((np.asarray(idata, np.int64), (irow, icol)), shape=(n, q))
        self.totals = np.asarray(index._qtotals, dtype=np.float64)


def quantity_candidates(index, probes: list) -> None:
    """Sets each probe's `quantity_candidates` (BenchmarkIndex.by_quantities)
    for a chunk at once: the pairs the postings propose and the count
    bounds reject, as array operations; the shared count exactly (the least
    of the two counts of each quantity, summed); the share and the chance
    (summed IDF) of the few pairs left, row by row as `_by_quantities`."""
    from scipy import sparse

    todo = [p for p in probes if p.quantity_candidates is None]
    if not todo:
        return
    qt = _tables(index, "quantity_tables", QuantityTables)
    rows, cols, data = [], [], []
    for r, p in enumerate(todo):
        for v, c in p.quantities.items():
            j = qt.ids.get(v)
            if j is not None:
                rows.append(r)
                cols.append(j)
                data.append(c)
    t_total = np.fromiter((sum(p.quantities.values()) for p in todo), dtype=np.float64, count=len(todo))
    tasks = sparse.csr_matrix((np.asarray(data, np.int64), (rows, cols)), shape=(len(todo), len(qt.ids)))
    tasks.sort_indices()
    proposed = (tasks > 0).astype(np.int32) @ qt.post
    pr, pi = proposed.nonzero()
    total = qt.totals[pi]
    numbers_min = index.rules.numbers_min
    # The bounds _by_quantities tests first (common <= either total), then the shared count.
    ok = ~((total < 0.5 * t_total[pr]) | (t_total[pr] < numbers_min * total))
    pr, pi, total = pr[ok], pi[ok], total[ok]
    starts, ends = qt.items.indptr[pi], qt.items.indptr[pi + 1]
    lengths = ends - starts
    pair = np.repeat(np.arange(len(pr)), lengths)
    at = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
    x, item_count = qt.items.indices[at], qt.items.data[at]
    # Each pair's count of x in the task: its stored entries, row-major, are sorted keys.
    q = len(qt.ids)
    entry_keys = np.repeat(np.arange(len(todo), dtype=np.int64), np.diff(tasks.indptr)) * q + tasks.indices
    want = pr[pair].astype(np.int64) * q + x
    task_count = np.zeros(len(want), dtype=np.int64)
    if len(entry_keys):
        hit = np.minimum(np.searchsorted(entry_keys, want), len(entry_keys) - 1)
        task_count = np.where(entry_keys[hit] == want, tasks.data[hit], 0)
    common = np.bincount(pair, weights=np.minimum(item_count, task_count), minlength=len(pr))
    ok = (common >= numbers_min * total) & (common >= 0.5 * t_total[pr])
    found: list[list] = [[] for _ in todo]
    n = len(index.meta) + 1
    for r, idx, c in zip(pr[ok].tolist(), pi[ok].tolist(), common[ok].tolist()):
        iq, tq = index.meta[idx].quantities, todo[r].quantities
        surprise = sum(math.log(n / (index.qdf[v] + 1)) for v in (iq & tq))
        if surprise >= index.min_surprise:
            found[r].append((idx, round(c / qt.totals[idx], 4)))
    for p, f in zip(todo, found):
        p.quantity_candidates = sorted(f, key=lambda x: (-x[1], x[0]))
