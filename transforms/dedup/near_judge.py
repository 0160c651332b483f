"""Judging near dedup's candidate edges: a component's rows and shingle
similarities (`Component`), and which of its candidate edges are confirmed
(`judge_edges`, and `judge_ranked` for edges given as index arrays). The
rule itself is near_rule.py; near.py's find_near_duplicates and the
batch engine's transforms/batch/near.py judge through these functions, so they decide
alike (tests/batch/test_batch_dedup.py, tests/dedup/test_near_dedup.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from tasksieve.transforms.dedup import number_guard
from tasksieve.transforms.dedup.minhash import MinHashParams, text_of
from tasksieve.transforms.dedup.near_rule import FAR_UNDER, confirmed, counts_overlap, similarity
from tasksieve.transforms.dedup.number_guard import numbers_in, refused_by_numbers
from tasksieve.transforms.dedup.signatures import jaccard_counts
from tasksieve.transforms.same_problem import relation
from tasksieve.transforms.same_problem.rules import Rules, judge_pair

POOL_NODE = "pool\x1f"  # prefix of reference-pool node ids; task nodes never start with it (task_node)


def task_node(task: dict) -> str:
    """The node id of a task: one per (source, task_id), which is unique
    after validation. Plainly "source<US>task_id"; a source that holds the
    separator, or is "pool", is written length-prefixed behind a leading
    separator instead. Without that, delivery ids could spell another
    task's node (source "a<US>b" + id "c" == source "a" + id "b<US>c": one
    task stood in for both and a row was lost) or a pool node (source
    "pool": its tasks were never paired with each other)."""
    source, task_id = task["source"], task["task_id"]
    if "\x1f" in source or source == "pool":
        return f"\x1f{len(source)}:{source}\x1f{task_id}"
    return f"{source}\x1f{task_id}"


def pool_node(task: dict) -> str:
    """The node id of a reference-pool task (pool_index.py stores it)."""
    return POOL_NODE + task_node(task)


class UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # Deterministic root (the smaller id), whatever the merge order.
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            self.parent[hi] = lo
            self.parent.setdefault(lo, lo)


_EDGE_BLOCK = 250_000  # candidate edges judged together: each node's shingles made once per block (~1 KiB a node)


def _pair(e: tuple) -> tuple:
    """An edge's two nodes in one order: the similarity is symmetric."""
    return (e[0], e[1]) if e[0] <= e[1] else (e[1], e[0])


class _Shingles:
    """Shingle similarities and number overlaps of a component's members."""

    def __init__(self, texts: dict, p: MinHashParams):
        self.texts, self.p, self.counts, self.known = texts, p, {}, {}

    def number_counts(self, n) -> Counter:
        """Node n's numbers, counted once per component (the array guard
        asks for a node in every block of edges it is in)."""
        if n not in self.counts:
            self.counts[n] = Counter(numbers_in(self.texts[n]))
        return self.counts[n]

    def numbers(self, a, b) -> float:
        return counts_overlap(self.number_counts(a), self.number_counts(b))

    def sims(self, edges: list[tuple]) -> list[float]:
        """The exact shingle Jaccard of every edge's two texts, rounded to 4
        places: a block of edges at a time, each node's shingles made once
        per block, in compiled code (signatures.jaccard_counts)."""
        return self.sims_covers(edges)[0]

    def sims_covers(self, edges: list[tuple]) -> tuple[list[float], list[float]]:
        """(sims, and the share of the smaller shingle set found in the
        other: relation.cover_of) of every edge."""
        out: list[float] = []
        covers: list[float] = []
        for i in range(0, len(edges), _EDGE_BLOCK):
            block = edges[i : i + _EDGE_BLOCK]
            index: dict = {}
            for e in block:
                index.setdefault(e[0], len(index))
                index.setdefault(e[1], len(index))
            ea = np.fromiter((index[e[0]] for e in block), dtype=np.int64, count=len(block))
            eb = np.fromiter((index[e[1]] for e in block), dtype=np.int64, count=len(block))
            inter, lens = jaccard_counts([self.texts[n] for n in index], ea, eb, self.p)
            trip = list(zip(inter.tolist(), lens[ea].tolist(), lens[eb].tolist()))
            out += [similarity(x, la, lb) for x, la, lb in trip]
            covers += [relation.cover_of(x, la, lb) for x, la, lb in trip]
        return out, covers

    def remember(self, pairs: list[tuple]) -> None:
        """Measure `pairs` now, in one block, for later `sim` calls (the
        similarities a cluster's drop details name)."""
        todo = list({_pair(e) for e in pairs} - self.known.keys())
        self.known.update(zip(todo, self.sims(todo)))

    def sim(self, a, b) -> float:
        """The similarity of one pair: remembered, or a block of one."""
        key = _pair((a, b))
        if key not in self.known:
            self.known[key] = self.sims([key])[0]
        return self.known[key]


class Component:
    """One connected component's tasks and pool rows, by node, with their
    texts, content hashes and shingle similarities (_Shingles)."""

    def __init__(self, tasks: list[dict], pool: list[dict], p: MinHashParams, texts: dict | None = None):
        """`texts`: each task's text_of by node, when the caller has them already."""
        by_node = {task_node(t): t for t in tasks}
        pool_by_node = {r["node"]: r for r in pool}
        all_texts = {n: texts[n] if texts else text_of(t) for n, t in by_node.items()}
        all_texts.update({n: r["text"] for n, r in pool_by_node.items()})
        self._keyed(by_node, pool_by_node, all_texts, p)

    @classmethod
    def of_nodes(
        cls, by_node, pool_by_node: dict, texts: dict, p: MinHashParams, hashes: dict | None = None
    ) -> "Component":
        """The same Component from rows already keyed by node and every
        node's text (the batch path's edge shards have them): no node or
        text made again per row. With every node's content hash in
        `hashes`, `by_node` need only answer `get` (judging reads a row
        through row() alone: batch/near._LazyRows)."""
        c = cls.__new__(cls)
        c._keyed(by_node, pool_by_node, texts, p, hashes)
        return c

    def _keyed(self, by_node, pool_by_node: dict, texts: dict, p: MinHashParams, hashes: dict | None = None) -> None:
        self.by_node, self.pool_by_node, self.texts = by_node, pool_by_node, texts
        if hashes is None:
            hashes = {n: t["content_hash"] for n, t in by_node.items()}
            hashes.update({n: r["content_hash"] for n, r in pool_by_node.items()})
        self.hashes = hashes
        self.sh = _Shingles(texts, p)

    def row(self, n: str) -> dict:
        return self.by_node.get(n) or self.pool_by_node[n]


def could_link(sim: float, cover: float, copy: bool, threshold: float) -> bool:
    """Whether _judge_edge can confirm a plain edge with these shingle
    figures at all: a copy, similar enough, or contained (relation.contained)."""
    return copy or sim >= threshold or relation.contained(sim, cover, threshold)


def _judge_edge(
    c: Component,
    e: tuple,
    sim: float,
    threshold: float,
    min_numbers: float,
    guard_below: float,
    rules: Rules,
    cover: float = 0.0,
) -> tuple[dict | None, float]:
    """(how the edge was confirmed, or None; its similarity). `sim`: the
    shingle Jaccard of its two texts (_Shingles.sims), `cover` the share
    of the smaller one's shingles in the other. A linked pair is then one
    of relation.relate's relations: duplicates and variants are confirmed
    (`how` names which), siblings and different questions on one setup are
    not."""
    a, b = e[0], e[1]
    exact = c.hashes[a] == c.hashes[b]
    s = 1.0 if exact else sim
    # The number overlap only matters between the threshold and the guard.
    numbers = c.sh.numbers(a, b) if threshold <= s < guard_below else 1.0
    linked = "minhash" if exact or confirmed(s, numbers, threshold, min_numbers, guard_below) else None
    if (
        linked is None
        and relation.contained(s, cover, threshold)
        and relation.counts_contained(c.sh.number_counts(a), c.sh.number_counts(b))
    ):
        linked = "containment"
    if linked is not None:
        kind, ev = relation.relate(c.row(a), c.row(b), rules, exact)
        # Contained with another answer: the added sentence changed the
        # problem; a copy with a sentence added keeps its answer.
        if linked == "containment" and kind == relation.VARIANT:
            kind = relation.DISTINCT
        if kind in (relation.DUPLICATE, relation.VARIANT):
            how = {"generator": linked, "relation": kind}
            if linked == "containment":
                how["containment"] = cover
            if kind == relation.VARIANT:
                how["same_problem"] = ev
            return how, s
        if linked == "minhash" or len(e) < 3:
            return None, s
    if len(e) > 2:
        cos = e[2] if e[2] is not None else _cosine(c.texts[a], c.texts[b])
        same, ev = judge_pair(c.row(a), c.row(b), cos, rules)
        if same:
            return {"generator": "semantic", "relation": relation.DUPLICATE, "same_problem": ev}, s
    return None, s


def judge_edges(
    c: Component, edges: list[tuple], threshold: float, min_numbers: float, guard_below: float, rules: Rules
) -> list[tuple]:
    """(edge, how, similarity) of each confirmed edge, in the order given.
    Each judgement needs only the edge's two rows, so the batch path judges
    edges wherever their rows meet (batch/near.py)."""
    out = []
    edges = [e for e in edges if e[0] in c.texts and e[1] in c.texts]
    hashes = c.hashes
    sims, covers = c.sh.sims_covers(edges)
    refused = _guard_refusals(c, edges, sims, covers, threshold, min_numbers, guard_below)
    for k, (e, sim, cover) in enumerate(zip(edges, sims, covers)):
        # What _judge_edge says of most candidates, without the call: neither
        # similar nor contained nor a copy, or refused by the number guard.
        if (len(e) == 2 and not could_link(sim, cover, hashes[e[0]] == hashes[e[1]], threshold)) or k in refused:
            continue
        how, s = _judge_edge(c, e, sim, threshold, min_numbers, guard_below, rules, cover)
        if how is not None:
            out.append((e, how, s))
    return out


def _guard_refusals(
    c: Component,
    edges: list[tuple],
    sims: list[float],
    covers: list[float],
    threshold: float,
    min_numbers: float,
    guard_below: float,
) -> set[int]:
    """Positions of the edges the number guard refuses in _judge_edge
    (plain, not copies, similar but under guard_below, sharing too few
    numbers, and not contained: relation.contained), found on arrays
    (number_guard.py) and skipped there."""
    if min_numbers <= FAR_UNDER or not number_guard.enabled:
        return set()
    hashes = c.hashes
    at = [
        k
        for k, (e, s, cv) in enumerate(zip(edges, sims, covers))
        if len(e) == 2
        and threshold <= s < guard_below
        and hashes[e[0]] != hashes[e[1]]
        and not relation.contained(s, cv, threshold)
    ]
    if not at:
        return set()
    index: dict = {}
    ea = np.fromiter((index.setdefault(edges[k][0], len(index)) for k in at), dtype=np.int64, count=len(at))
    eb = np.fromiter((index.setdefault(edges[k][1], len(index)) for k in at), dtype=np.int64, count=len(at))
    nodes = list(index)
    refused = refused_by_numbers(lambda i: c.sh.number_counts(nodes[i]), ea, eb, min_numbers, FAR_UNDER)
    return {at[k] for k in np.flatnonzero(refused).tolist()}


def judge_ranked(
    c: Component,
    names: list,
    lo: np.ndarray,
    hi: np.ndarray,
    threshold: float,
    min_numbers: float,
    guard_below: float,
    rules: Rules,
) -> list[tuple]:
    """judge_edges of the plain edges (names[lo[k]], names[hi[k]]), each
    turned lower node first as judge_edges takes it (the answer check
    compares in that order), in the order given: the same confirmed edges,
    for the batch path's edge shards, where the edges come as index arrays
    in any order of the nodes. The shingle counts of a block come as
    arrays, and a candidate that is neither a copy nor within FAR_UNDER of
    the threshold is refused on them (what judge_edges refuses it for),
    without a node pair, a dict lookup or a rounding of its own (at 1M
    tasks ~220,000 of them, what the sketches leave of 2.8 million:
    batch/near.prune_shard). The rest are judged as judge_edges
    judges them, with their similarity()."""
    out = []
    # Python's hash of each content hash, so copies are found with one array
    # compare: equal hashes always have equal codes, and two other hashes
    # that share a code only make one more close candidate, which
    # _judge_edge then judges on the hashes themselves (not a copy, and
    # under the threshold: refused, as judge_edges refuses it).
    code = np.fromiter(map(hash, map(c.hashes.__getitem__, names)), dtype=np.int64, count=len(names))
    for i in range(0, lo.shape[0], _EDGE_BLOCK):
        a, b = lo[i : i + _EDGE_BLOCK], hi[i : i + _EDGE_BLOCK]
        used, where = np.unique(np.concatenate([a, b]), return_inverse=True)
        ea, eb = where[: a.shape[0]], where[a.shape[0] :]
        texts = list(map(c.texts.__getitem__, map(names.__getitem__, used.tolist())))
        inter, lens = jaccard_counts(texts, ea, eb, c.sh.p)
        la, lb = lens[ea], lens[eb]
        jac, copy = inter / (la + lb - inter), code[a] == code[b]
        # Contained (relation.contained): close to the floor and holding
        # nearly all of the smaller set; judged one by one.
        small = np.minimum(la, lb)
        held = (
            (jac >= relation.jaccard_floor(threshold) - FAR_UNDER)
            & (inter >= (relation.CONTAINMENT_MIN - FAR_UNDER) * small)
            & (small >= relation.CONTAINMENT_MIN_SHINGLES)
        )
        close = (jac >= threshold - FAR_UNDER) | copy | held
        if min_numbers > FAR_UNDER and number_guard.enabled:
            # Similar but surely under guard_below, and sharing surely too
            # few numbers: refused by the number guard (one template's
            # siblings: nearly every candidate of a templated delivery).
            g = np.flatnonzero(close & ~copy & (jac < guard_below - FAR_UNDER))
            block = used.tolist()
            counts = lambda j: c.sh.number_counts(names[block[j]])  # noqa: E731
            refused = refused_by_numbers(counts, ea[g], eb[g], min_numbers, FAR_UNDER)
            # Contained, with the smaller one's numbers in the other: a sentence
            # added, which the guard does not refuse (judged one by one).
            for i in np.flatnonzero(refused & held[g]).tolist():
                if relation.counts_contained(counts(ea[g[i]]), counts(eb[g[i]])):
                    refused[i] = False
            close[g[refused]] = False
        for k in np.flatnonzero(close).tolist():
            x, sa, sb = int(inter[k]), int(la[k]), int(lb[k])
            e = _pair((names[a[k]], names[b[k]]))
            how, s = _judge_edge(
                c, e, similarity(x, sa, sb), threshold, min_numbers, guard_below, rules, relation.cover_of(x, sa, sb)
            )
            if how is not None:
                out.append((e, how, s))
    return out


def best_links(confirmed: list[tuple]) -> dict:
    """node -> (neighbour, similarity, how, duplicate root) of its best
    confirmed edge: MinHash edges first, then the most similar, then the
    first in order. The duplicate root names the node's group of
    duplicates (union over the `duplicate` edges only): a cluster joined by
    `variant` edges holds several such groups (near_decide.decide_cluster)."""
    via: dict = {}
    dups = UnionFind()
    for e, how, s in confirmed:
        if how.get("relation", relation.DUPLICATE) == relation.DUPLICATE:
            dups.union(e[0], e[1])
        for x, y in ((e[0], e[1]), (e[1], e[0])):
            if x not in via or (how["generator"] == "minhash", s) > (via[x][2]["generator"] == "minhash", via[x][1]):
                via[x] = (y, s, how)
    return {x: (*v, dups.find(x)) for x, v in via.items()}


def _cosine(a: str, b: str) -> float:
    from tasksieve.transforms.same_problem.embed import get_model

    va, vb = get_model().encode([a, b])
    return float(va @ vb)
