"""Stages `near_dedup` and `against_pool`: MinHash + LSH candidates,
confirmed with the exact Jaccard similarity, clustered with union-find.

How it scales (nothing holds the corpus in one list):
1. Element-wise: each task's signature and band keys (`minhash.py`); each
   task emits one small (band key, node id) record per band, plus one for
   its exact content hash when a pool is given (exact copies of pool items).
   Reference-pool items come with their bands precomputed (`pool_index.py`).
2. Keyed grouping on the band key: a bucket of 2+ members yields candidate
   pairs (all pairs up to `max_bucket_pairs` members, else a star on the
   first member plus a chain in rank order: linear in the bucket).
3. Union-find over the distinct candidate *edges* in one combiner. Memory
   bound: O(nodes that have a candidate edge) ids, never texts; edges are
   far fewer than rows (a 100k-task pool with 5% planted duplicates gives
   ~5k edges). A corpus where most tasks collide would make this O(corpus
   ids), ~100 bytes each.
4. A keyed join (node -> component root) sends only tasks that have a
   candidate edge to their component; every other task passes straight on.
5. Per component: every candidate edge is confirmed with the exact Jaccard
   similarity of the two shingle sets, and by the numbers the two texts
   hold (see `number_overlap`); a local union-find over confirmed edges
   gives the clusters. A cluster holding a pool item drops all its
   tasks at `against_pool` (the pool is never modified); otherwise the
   survivor is chosen by the exact-dedup rule (earliest `created_at`, then
   `source`, `task_id`, file position) and the rest drop at `near_dedup`.
   `drop_detail` names the survivor (or pool item), the measured similarity
   to it, and the edge that confirmed the link (clusters are transitive, so
   a member may join through a neighbour rather than the survivor).
6. Issue 43: a linked pair (shingles, or one text contained in the other:
   same_problem.relation.contained) is one of relation.relate's relations;
   duplicates and variants are confirmed, siblings and different questions
   on one setup are not. A cluster is groups of duplicates joined by
   variant edges: the groups after the original's drop as `near_variant`
   unless `keep_variants` keeps them (decide_cluster). Candidates also come
   from sentence-set buckets (sentences.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import apache_beam as beam
import numpy as np

from tasksieve.transforms.dedup.exact import survivor_key
from tasksieve.transforms.dedup import number_guard
from tasksieve.transforms.dedup.number_guard import numbers_in, refused_by_numbers
from tasksieve.transforms.dedup.minhash import MinHashParams, band_keys, params_from_config, task_bands, text_of
from tasksieve.transforms.dedup.signatures import jaccard_counts, signatures
from tasksieve.transforms.dedup.semantic import quantity_key, semantic_edges
from tasksieve.transforms.stage import DROPPED, KEPT, drop_record, split_tagged
from tasksieve.transforms.same_problem import relation
from tasksieve.transforms.same_problem.quantities import quantities
from tasksieve.transforms.same_problem.rules import Rules, judge_pair, rules_from_config

STAGE = "near_dedup"
POOL_STAGE = "against_pool"
POOL_NODE = "pool\x1f"  # prefix of reference-pool node ids; task nodes never start with it (task_node)
EXACT_BAND = -1  # band index of the exact-content-hash bucket


def number_overlap(a: str, b: str) -> float:
    """Multiset Jaccard of the numbers in two texts (1.0 if either has none).

    Why: "Calculate 1 + 8." and "Calculate 1 + 9." are 71% similar as
    5-character shingles, yet they are two problems from one template:
    in a short prompt the numbers *are* the problem. So a pair that is
    similar but not very similar (below `number_guard_below`) must also
    share most of its numbers; a GSM8K-length problem with one number
    edited stays ~96% similar and is caught whatever its numbers."""
    return counts_overlap(Counter(numbers_in(a)), Counter(numbers_in(b)))


def counts_overlap(na: Counter, nb: Counter) -> float:
    """number_overlap of two texts' number counts."""
    if not na or not nb:
        return 1.0
    return round(sum((na & nb).values()) / sum((na | nb).values()), 4)


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


def bucket_key(band: int, key: int) -> int:
    """One 63-bit int per (band, band hash): the cheapest key to shuffle."""
    return (((band + 2) * 0x9E3779B97F4A7C15) ^ key) & 0x7FFFFFFFFFFFFFFF


def exact_key(content_hash: str) -> int:
    return bucket_key(EXACT_BAND, int(content_hash[:15], 16))


def task_records(task: dict, p: MinHashParams, with_exact: bool = False) -> list[tuple[int, str]]:
    """(bucket key, node) for each band, plus the exact-hash bucket when a
    pool is present (exact copies within the inputs are gone already).
    Records are kept tiny, an int and the node id: there are `bands` of
    them per task, and shuffling them is the stage's main cost."""
    from tasksieve.transforms.dedup.sentences import sentence_keys

    node = task_node(task)
    out = [(bucket_key(b, k), node) for b, k in task_bands(task, p)]
    out += [(k, node) for k in sentence_keys(text_of(task))]
    if with_exact:
        out.append((exact_key(task["content_hash"]), node))
    return out


def pool_records(row: dict) -> list[tuple[int, str]]:
    node = row["node"]
    return [(bucket_key(b, k), node) for b, k in enumerate(row["bands"])] + [(exact_key(row["content_hash"]), node)]


def bucket_pairs(members, max_bucket_pairs: int = 32, within: bool = True):
    """Candidate edges of one bucket (node ids), as sorted (a, b) pairs.
    Pool-pool pairs are skipped (nothing is ever dropped from the pool), and
    so are task-task pairs when `within` is off (only against-pool matching)."""
    nodes = sorted(set(members), key=lambda n: (not n.startswith(POOL_NODE), n))  # pool items first
    if len(nodes) < 2:
        return
    if len(nodes) <= max_bucket_pairs:
        pairs = ((nodes[i], nodes[j]) for i in range(len(nodes)) for j in range(i + 1, len(nodes)))
    else:  # star on the first (a pool item if any) + chain: linear
        pairs = [(nodes[0], n) for n in nodes[1:]] + list(zip(nodes[1:], nodes[2:]))
    for a, b in pairs:
        pools = a.startswith(POOL_NODE) + b.startswith(POOL_NODE)
        if pools == 1 or (pools == 0 and within):
            yield (a, b) if a < b else (b, a)


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


class ComponentsFn(beam.CombineFn):
    """Candidate edges -> components: {root: [edges]}. Accumulators are
    edge lists, so merging across workers is a concatenation."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, edge):
        acc.append(edge)
        return acc

    def merge_accumulators(self, accs):
        out = []
        for a in accs:
            out.extend(a)
        return out

    def extract_output(self, acc):
        uf = UnionFind()
        for e in acc:
            uf.union(e[0], e[1])
        comps: dict = {}
        for e in acc:
            comps.setdefault(uf.find(e[0]), []).append(tuple(e))
        return comps


def edge_order(e: tuple) -> tuple:
    """Total order over (a, b) and (a, b, cosine or None) edges."""
    return (e[0], e[1], len(e), -2.0 if len(e) < 3 or e[2] is None else e[2])


def sort_edges(edges) -> list:
    """Edges as a list in edge_order. When every edge is an (a, b) pair
    (no meaning stage) that is plain tuple order, sorted without a key call
    per edge (millions of edges at pool scale)."""
    edges = list(edges)
    if all(len(e) == 2 for e in edges):
        edges.sort()
    else:
        edges.sort(key=edge_order)
    return edges


def component_messages(comps: dict):
    """(node, ('root', root)) for each node, (root, ('edges', edges)) for each component."""
    for root, edges in comps.items():
        yield root, ("edges", sorted(edges, key=edge_order))
        for n in sorted({x for e in edges for x in e[:2]}):
            yield n, ("root", root)


_EDGE_BLOCK = 250_000  # candidate edges judged together: each node's shingles made once per block (~1 KiB a node)


def _pair(e: tuple) -> tuple:
    """An edge's two nodes in one order: the similarity is symmetric."""
    return (e[0], e[1]) if e[0] <= e[1] else (e[1], e[0])


def similarity(inter: int, size_a: int, size_b: int) -> float:
    """The shingle Jaccard of two sets of these sizes sharing `inter`,
    rounded to 4 places: what every threshold is compared with."""
    return round(inter / (size_a + size_b - inter), 4)


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


def confirmed(s: float, numbers: float, threshold: float, min_numbers: float, guard_below: float) -> bool:
    """A candidate pair with similarity `s` and number overlap `numbers` is a duplicate."""
    return s >= threshold and (s >= guard_below or numbers >= min_numbers)


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
    def of_nodes(cls, by_node, pool_by_node: dict, texts: dict, p: MinHashParams,
                 hashes: dict | None = None) -> "Component":
        """The same Component from rows already keyed by node and every
        node's text (the batch path's edge shards have them): no node or
        text made again per row. With every node's content hash in
        `hashes`, `by_node` need only answer `get` (judging reads a row
        through row() alone: batch_near._LazyRows)."""
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


def _judge_edge(c: Component, e: tuple, sim: float, threshold: float, min_numbers: float, guard_below: float,
                rules: Rules, cover: float = 0.0) -> tuple[dict | None, float]:
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
    if linked is None and relation.contained(s, cover, threshold) \
            and relation.counts_contained(c.sh.number_counts(a), c.sh.number_counts(b)):
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


def _confirmed_clusters(c: Component, edges: list[tuple], threshold: float, min_numbers: float,
                        guard_below: float, rules: Rules) -> tuple[list[list[str]], dict]:
    """(clusters of nodes joined by confirmed edges, node -> (neighbour,
    similarity, how) of its best confirmed edge: MinHash edges first)."""
    uf = UnionFind()
    confirmed = judge_edges(c, edges, threshold, min_numbers, guard_below, rules)
    for e, _, _ in confirmed:
        uf.union(e[0], e[1])
    clusters: dict = {}
    for n in c.texts:
        clusters.setdefault(uf.find(n), []).append(n)
    return list(clusters.values()), best_links(confirmed)


def judge_edges(c: Component, edges: list[tuple], threshold: float, min_numbers: float, guard_below: float,
                rules: Rules) -> list[tuple]:
    """(edge, how, similarity) of each confirmed edge, in the order given.
    Each judgement needs only the edge's two rows, so the batch path judges
    edges wherever their rows meet (dedup/batch_near.py)."""
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


def _guard_refusals(c: Component, edges: list[tuple], sims: list[float], covers: list[float], threshold: float,
                    min_numbers: float, guard_below: float) -> set[int]:
    """Positions of the edges the number guard refuses in _judge_edge
    (plain, not copies, similar but under guard_below, sharing too few
    numbers, and not contained: relation.contained), found on arrays
    (number_guard.py) and skipped there."""
    if min_numbers <= _FAR_UNDER or not number_guard.enabled:
        return set()
    hashes = c.hashes
    at = [k for k, (e, s, cv) in enumerate(zip(edges, sims, covers))
          if len(e) == 2 and threshold <= s < guard_below and hashes[e[0]] != hashes[e[1]]
          and not relation.contained(s, cv, threshold)]
    if not at:
        return set()
    index: dict = {}
    ea = np.fromiter((index.setdefault(edges[k][0], len(index)) for k in at), dtype=np.int64, count=len(at))
    eb = np.fromiter((index.setdefault(edges[k][1], len(index)) for k in at), dtype=np.int64, count=len(at))
    nodes = list(index)
    refused = refused_by_numbers(lambda i: c.sh.number_counts(nodes[i]), ea, eb, min_numbers, _FAR_UNDER)
    return {at[k] for k in np.flatnonzero(refused).tolist()}


# A Jaccard this far under the threshold rounds (to 4 places) under it
# whatever the float error: round() moves a value by at most 0.00005.
_FAR_UNDER = 1e-3


def judge_ranked(c: Component, names: list, lo: np.ndarray, hi: np.ndarray, threshold: float, min_numbers: float,
                 guard_below: float, rules: Rules) -> list[tuple]:
    """judge_edges of the plain edges (names[lo[k]], names[hi[k]]), each
    turned lower node first as judge_edges takes it (the answer check
    compares in that order), in the order given: the same confirmed edges,
    for the batch path's edge shards, where the edges come as index arrays
    in any order of the nodes. The shingle counts of a block come as
    arrays, and a candidate that is neither a copy nor within _FAR_UNDER of
    the threshold is refused on them (what judge_edges refuses it for),
    without a node pair, a dict lookup or a rounding of its own (at 1M
    tasks ~220,000 of them, what the sketches leave of 2.8 million:
    batch_near.prune_shard). The rest are judged as judge_edges
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
        held = (jac >= relation.jaccard_floor(threshold) - _FAR_UNDER) & \
            (inter >= (relation.CONTAINMENT_MIN - _FAR_UNDER) * small) & (small >= relation.CONTAINMENT_MIN_SHINGLES)
        close = (jac >= threshold - _FAR_UNDER) | copy | held
        if min_numbers > _FAR_UNDER and number_guard.enabled:
            # Similar but surely under guard_below, and sharing surely too
            # few numbers: refused by the number guard (one template's
            # siblings: nearly every candidate of a templated delivery).
            g = np.flatnonzero(close & ~copy & (jac < guard_below - _FAR_UNDER))
            block = used.tolist()
            counts = lambda j: c.sh.number_counts(names[block[j]])  # noqa: E731
            refused = refused_by_numbers(counts, ea[g], eb[g], min_numbers, _FAR_UNDER)
            # Contained, with the smaller one's numbers in the other: a sentence
            # added, which the guard does not refuse (judged one by one).
            for i in np.flatnonzero(refused & held[g]).tolist():
                if relation.counts_contained(counts(ea[g[i]]), counts(eb[g[i]])):
                    refused[i] = False
            close[g[refused]] = False
        for k in np.flatnonzero(close).tolist():
            x, sa, sb = int(inter[k]), int(la[k]), int(lb[k])
            e = _pair((names[a[k]], names[b[k]]))
            how, s = _judge_edge(c, e, similarity(x, sa, sb), threshold, min_numbers, guard_below, rules,
                                 relation.cover_of(x, sa, sb))
            if how is not None:
                out.append((e, how, s))
    return out


def best_links(confirmed: list[tuple]) -> dict:
    """node -> (neighbour, similarity, how, duplicate root) of its best
    confirmed edge: MinHash edges first, then the most similar, then the
    first in order. The duplicate root names the node's group of
    duplicates (union over the `duplicate` edges only): a cluster joined by
    `variant` edges holds several such groups (decide_cluster)."""
    via: dict = {}
    dups = UnionFind()
    for e, how, s in confirmed:
        if how.get("relation", relation.DUPLICATE) == relation.DUPLICATE:
            dups.union(e[0], e[1])
        for x, y in ((e[0], e[1]), (e[1], e[0])):
            if x not in via or (how["generator"] == "minhash", s) > (via[x][2]["generator"] == "minhash", via[x][1]):
                via[x] = (y, s, how)
    return {x: (*v, dups.find(x)) for x, v in via.items()}


def resolve_component(tasks: list[dict], pool: list[dict], edges: list[tuple], p: MinHashParams, threshold: float,
                      min_numbers: float = 0.5, guard_below: float = 0.9, rules: Rules | None = None,
                      keep_variants: int = 0):
    """Confirm a component's candidate edges and decide: yields (tag, task).
    Edges are (a, b) from MinHash bands, confirmed by the exact Jaccard
    similarity and the number guard, or (a, b, cosine) from semantic
    neighbours (semantic.py), confirmed by the same-problem rules
    (`same_problem.judge_pair`)."""
    c = Component(tasks, pool, p)
    clusters, via = _confirmed_clusters(c, edges, threshold, min_numbers, guard_below, rules or Rules())
    yield from decide_clusters(c, clusters, via, p, threshold, keep_variants)


def _cluster_rows(c: Component, members: list[str]) -> tuple[list[dict], list[dict]]:
    """(tasks by survivor_key, pool rows) of one cluster."""
    ts = sorted((c.by_node[n] for n in members if n in c.by_node), key=survivor_key)
    return ts, [c.pool_by_node[n] for n in members if n in c.pool_by_node]


def decide_clusters(c: Component, clusters: list[list[str]], via: dict, p: MinHashParams, threshold: float,
                    keep_variants: int = 0):
    """decide_cluster of each cluster in turn, with every similarity the
    drop details name measured first in one block (one compiled call, not
    one per dropped task)."""
    pairs = []
    for members in clusters:
        ts, pools = _cluster_rows(c, members)
        if len(members) > 1 and ts:
            ns = [task_node(t) for t in ts]
            pairs += [(n, r["node"]) for n in ns for r in pools] if pools else [(n, ns[0]) for n in ns[1:]]
    c.sh.remember(pairs)
    for members in clusters:
        yield from decide_cluster(c, members, via, p, threshold, keep_variants)


def decide_cluster(c: Component, members: list[str], via: dict, p: MinHashParams, threshold: float,
                   keep_variants: int = 0):
    """(tag, task) for the tasks of one cluster of confirmed edges, or all
    dropped when the cluster holds a reference-pool row. The cluster is
    groups of duplicates (via's duplicate roots) joined by variant edges:
    the first task by survivor_key is the original and kept, its
    duplicates dropped naming it (near_duplicate); every other group is a
    variant of it: the first `keep_variants` groups (by survivor_key) keep
    their first task, which takes the original's template group, and drop
    their duplicates naming it; the rest drop whole as near_variant."""
    ts, pools = _cluster_rows(c, members)
    if len(members) == 1 or not ts:
        for t in ts:
            yield KEPT, t
        return
    if pools:
        for t in ts:
            yield DROPPED, _pool_drop(c, t, pools, via)
        return
    groups: dict = {}
    for t in ts:
        groups.setdefault(via[task_node(t)][3], []).append(t)
    orig = ts[0]
    yield KEPT, orig
    for k, group in enumerate(groups.values()):
        first = group[0]
        if k == 0:  # the original's own duplicates
            for t in group[1:]:
                yield DROPPED, _near_drop(c, t, orig, via, p, threshold)
        elif k <= keep_variants:
            yield KEPT, dict(first, template_group=orig.get("template_group"))
            for t in group[1:]:
                yield DROPPED, _near_drop(c, t, first, via, p, threshold)
        else:
            for t in group:
                yield DROPPED, _variant_drop(c, t, orig, via)


def _variant_drop(c: Component, t: dict, orig: dict, via: dict) -> dict:
    """A task in a variant group past keep_variants: dropped, naming the
    original and the quantities edited between them."""
    n, on = task_node(t), task_node(orig)
    qa, qb = quantities(orig.get("prompt") or ""), quantities(t.get("prompt") or "")
    detail = {"variant_of": orig["task_id"], "variant_of_source": orig["source"], "similarity": c.sh.sim(n, on),
              "edited": {"original_only": sorted((qa - qb).elements())[:20],
                         "variant_only": sorted((qb - qa).elements())[:20]},
              **_via(via, n, c.pool_by_node, c.by_node)}
    return drop_record(t, STAGE, "near_variant", detail)


def _pool_drop(c: Component, t: dict, pools: list[dict], via: dict) -> dict:
    """A task in a cluster with reference-pool rows: dropped, naming its closest pool row."""
    n = task_node(t)
    sims = {r["node"]: c.sh.sim(n, r["node"]) for r in pools}
    best = max(pools, key=lambda r: (c.hashes[n] == r["content_hash"], sims[r["node"]], r["node"]))
    exact = c.hashes[n] == best["content_hash"]
    detail = {"pool_task_id": best["task_id"], "pool_source": best["source"], "pool": best.get("pool"),
              "match": "exact" if exact else "near", "similarity": 1.0 if exact else sims[best["node"]],
              **_via(via, n, c.pool_by_node, c.by_node)}
    return drop_record(t, POOL_STAGE, "dedup_against_pool", detail)


def _near_drop(c: Component, t: dict, keep: dict, via: dict, p: MinHashParams, threshold: float) -> dict:
    """A task that is not its cluster's survivor: dropped, naming the survivor."""
    n, kn = task_node(t), task_node(keep)
    detail = {"duplicate_of": keep["task_id"], "duplicate_of_source": keep["source"],
              "similarity": c.sh.sim(n, kn), "number_overlap": c.sh.numbers(n, kn), "threshold": threshold,
              "shingle": f"{p.shingle}{p.size}",
              **_via(via, n, c.pool_by_node, c.by_node)}
    return drop_record(t, STAGE, "near_duplicate", detail)


def _cosine(a: str, b: str) -> float:
    from tasksieve.transforms.same_problem.embed import get_model

    va, vb = get_model().encode([a, b])
    return float(va @ vb)


def _via(via: dict, n: str, pool_by_node: dict, by_node: dict) -> dict:
    nb, s, how = via[n][:3]
    row = by_node.get(nb) or pool_by_node[nb]
    return {"matched_task_id": row["task_id"], "matched_source": row["source"], "matched_similarity": s, **how}


def _route_joined(kv):
    """After the node join: tasks without a component pass on; the rest go to their root."""
    _, values = kv
    root, items = None, []
    for kind, v in values:
        if kind == "root":
            root = v
        else:
            items.append((kind, v))
    for kind, v in items:
        if root is not None:
            yield "cluster", (root, (kind, v))
        elif kind == "task":
            yield KEPT, v


def bucket_edges(tasks: list[dict], pool_rows: list[dict], p: MinHashParams, max_bucket_pairs: int = 32,
                 within: bool = True) -> set:
    """The candidate edges of the MinHash buckets: bucket_pairs of each,
    from a dict of buckets filled one band at a time (batch_near.band_edges
    finds the same ones as arrays)."""
    from tasksieve.transforms.dedup.sentences import sentence_keys

    buckets: dict = defaultdict(list)
    # Every task's signature in one compiled pass (signatures.py: the same
    # bits as task_records' one-at-a-time numpy code, tested).
    texts = [text_of(t) for t in tasks]
    for t, text, sig in zip(tasks, texts, signatures(texts, p)):
        node = task_node(t)
        for band, key in band_keys(sig, p.bands, p.rows):
            buckets[bucket_key(band, key)].append(node)
        for key in sentence_keys(text):
            buckets[key].append(node)
        if pool_rows:
            buckets[exact_key(t["content_hash"])].append(node)
    for r in pool_rows:
        for key, node in pool_records(r):
            buckets[key].append(node)
    edges = set()
    for members in buckets.values():
        edges.update(bucket_pairs(members, max_bucket_pairs, within))
    return edges


def find_near_duplicates(tasks: list[dict], pool_rows: list[dict], p: MinHashParams, threshold: float,
                         min_numbers: float = 0.5, guard_below: float = 0.9, semantic: bool = True,
                         rules: Rules | None = None, within: bool = True, max_bucket_pairs: int = 32,
                         candidates=bucket_edges, keep_variants: int = 0):
    """The near-dedup stage's Beam-free function (REPL, `tasksieve validate`):
    the same candidate generators (MinHash bands, quantity-grouped meanings)
    and the same confirmation (`resolve_component`) as the Beam stage, in
    memory. Yields (KEPT | DROPPED, task) like it. `candidates` finds the
    band buckets' edges (bucket_edges, or batch_near.band_edges: the same)."""
    rules = rules or Rules()
    edges = candidates(tasks, pool_rows, p, max_bucket_pairs, within)
    if semantic:
        groups: dict = defaultdict(list)
        for t in tasks:
            text = text_of(t)
            groups[quantity_key(text)].append((task_node(t), text))
        for r in pool_rows:
            groups[quantity_key(r["text"])].append((r["node"], r["text"]))
        for key, members in groups.items():
            edges.update(semantic_edges(members, key, p, threshold, rules, within))
    uf = UnionFind()
    for e in edges:
        uf.union(e[0], e[1])
    comps: dict = defaultdict(list)
    for e in sorted(edges, key=edge_order):
        comps[uf.find(e[0])].append(e)
    by_root_tasks: dict = defaultdict(list)
    by_root_pool: dict = defaultdict(list)
    in_comp = set()
    for t in tasks:
        n = task_node(t)
        if n in uf.parent:
            by_root_tasks[uf.find(n)].append(t)
            in_comp.add(n)
        else:
            yield KEPT, t
    for r in pool_rows:
        if r["node"] in uf.parent:
            by_root_pool[uf.find(r["node"])].append(r)
    for root, comp_edges in comps.items():
        yield from resolve_component(by_root_tasks.get(root, []), by_root_pool.get(root, []), comp_edges, p, threshold,
                                     min_numbers, guard_below, rules=rules, keep_variants=keep_variants)


class NearDedup(beam.PTransform):
    """Tasks in; (kept, dropped) out. `pool_rows` is an optional PCollection
    of reference-pool index rows (see pool_index.read_row_group)."""

    def __init__(self, params: MinHashParams, threshold: float, pool_rows=None, max_bucket_pairs: int = 32,
                 within: bool = True, min_numbers: float = 0.5, guard_below: float = 0.9, semantic: bool = False,
                 rules: Rules | None = None, keep_variants: int = 0):
        super().__init__()
        self.keep_variants = keep_variants
        self.p, self.threshold, self.pool_rows, self.max_pairs = params, threshold, pool_rows, max_bucket_pairs
        self.within, self.min_numbers, self.guard_below = within, min_numbers, guard_below
        self.semantic, self.rules = semantic, rules or Rules()

    @classmethod
    def from_config(cls, dedup, decontam, pool_rows=None) -> "NearDedup":
        """From the run config's `[dedup]` section (the same-problem rules read
        `[decontam]` too); `pool_rows`: the reference pools' index rows."""
        return cls(params_from_config(dedup), dedup.threshold, pool_rows, dedup.max_bucket_pairs, within=dedup.near,
                   min_numbers=dedup.number_overlap, guard_below=dedup.number_guard_below, semantic=dedup.semantic,
                   rules=rules_from_config(decontam, dedup), keep_variants=dedup.keep_variants)

    def expand(self, tasks):
        p, threshold, max_pairs, within = self.p, self.threshold, self.max_pairs, self.within
        min_numbers, guard_below, rules, keep = self.min_numbers, self.guard_below, self.rules, self.keep_variants
        records = [tasks | "Bands" >> beam.FlatMap(task_records, p, self.pool_rows is not None)]
        keyed = [tasks | "KeyTask" >> beam.Map(lambda t: (task_node(t), ("task", t)))]
        if self.pool_rows is not None:
            records.append(self.pool_rows | "PoolBands" >> beam.FlatMap(pool_records))
            keyed.append(self.pool_rows | "KeyPool" >> beam.Map(lambda r: (r["node"], ("pool", r))))
        edge_sources = [
            tuple(records)
            | "AllBands" >> beam.Flatten()
            | "GroupBuckets" >> beam.GroupByKey()
            | "Candidates" >> beam.FlatMap(lambda kv: bucket_pairs(kv[1], max_pairs, within))
        ]
        if self.semantic:

            texts = [tasks | "SemText" >> beam.Map(lambda t: (task_node(t), text_of(t)))]
            if self.pool_rows is not None:
                texts.append(self.pool_rows | "SemPoolText" >> beam.Map(lambda r: (r["node"], r["text"])))
            edge_sources.append(
                tuple(texts)
                | "SemTexts" >> beam.Flatten()
                | "QuantityKey" >> beam.Map(lambda nt: (quantity_key(nt[1]), nt))
                | "GroupQuantities" >> beam.GroupByKey()
                | "SemanticNeighbours" >> beam.FlatMap(
                    lambda kv: semantic_edges(list(kv[1]), kv[0], p, threshold, rules, within)))
        edges = tuple(edge_sources) | "AllEdges" >> beam.Flatten() | "DistinctEdges" >> beam.Distinct()
        messages = (
            edges
            | "Components" >> beam.CombineGlobally(ComponentsFn())
            | "ComponentMessages" >> beam.FlatMap(component_messages)
        )
        routed = split_tagged(
            (*keyed, messages | "Roots" >> beam.Filter(lambda kv: kv[1][0] == "root"))
            | "JoinNodes" >> beam.Flatten()
            | "GroupNodes" >> beam.GroupByKey()
            | "Route" >> beam.FlatMap(_route_joined),
            "RouteSplit", (KEPT, "cluster"))
        comp_edges = messages | "Edges" >> beam.Filter(lambda kv: kv[1][0] == "edges")

        def resolve(kv):
            tasks_, pool_, edges_ = [], [], []
            for kind, v in kv[1]:
                if kind == "task":
                    tasks_.append(v)
                elif kind == "pool":
                    pool_.append(v)
                else:
                    edges_ = v
            yield from resolve_component(tasks_, pool_, edges_, p, threshold, min_numbers, guard_below, rules, keep)

        out = split_tagged(
            (routed["cluster"], comp_edges)
            | "JoinComponents" >> beam.Flatten()
            | "GroupComponents" >> beam.GroupByKey()
            | "Resolve" >> beam.FlatMap(resolve),
            "ResolveSplit", (KEPT, DROPPED))
        kept = (routed[KEPT], out[KEPT]) | "AllKept" >> beam.Flatten()
        return kept, out[DROPPED]
