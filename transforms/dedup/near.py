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
"""

from __future__ import annotations

from collections import defaultdict

import apache_beam as beam

from tasksieve.transforms.dedup.exact import survivor_key
from tasksieve.transforms.dedup.minhash import MinHashParams, band_keys, params_from_config, task_bands, text_of
from tasksieve.transforms.dedup.near_judge import POOL_NODE, Component, best_links, judge_edges, task_node
from tasksieve.transforms.dedup.semantic import quantity_key, semantic_edges
from tasksieve.transforms.dedup.signatures import signatures
from tasksieve.transforms.dedup.near_rule import near_options
from tasksieve.transforms.same_problem.rules import Rules
from tasksieve.transforms.stage import DROPPED, KEPT, drop_record, split_tagged

STAGE = "near_dedup"
POOL_STAGE = "against_pool"
EXACT_BAND = -1  # band index of the exact-content-hash bucket


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
    node = task_node(task)
    out = [(bucket_key(b, k), node) for b, k in task_bands(task, p)]
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


def _confirmed_clusters(
    c: Component, edges: list[tuple], threshold: float, min_numbers: float, guard_below: float, rules: Rules
) -> tuple[list[list[str]], dict]:
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


def resolve_component(
    tasks: list[dict],
    pool: list[dict],
    edges: list[tuple],
    p: MinHashParams,
    threshold: float,
    min_numbers: float = 0.5,
    guard_below: float = 0.9,
    rules: Rules | None = None,
):
    """Confirm a component's candidate edges and decide: yields (tag, task).
    Edges are (a, b) from MinHash bands, confirmed by the exact Jaccard
    similarity and the number guard, or (a, b, cosine) from semantic
    neighbours (semantic.py), confirmed by the same-problem rules
    (`same_problem.judge_pair`)."""
    c = Component(tasks, pool, p)
    clusters, via = _confirmed_clusters(c, edges, threshold, min_numbers, guard_below, rules or Rules())
    yield from decide_clusters(c, clusters, via, p, threshold)


def _cluster_rows(c: Component, members: list[str]) -> tuple[list[dict], list[dict]]:
    """(tasks by survivor_key, pool rows) of one cluster."""
    ts = sorted((c.by_node[n] for n in members if n in c.by_node), key=survivor_key)
    return ts, [c.pool_by_node[n] for n in members if n in c.pool_by_node]


def decide_clusters(c: Component, clusters: list[list[str]], via: dict, p: MinHashParams, threshold: float):
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
        yield from decide_cluster(c, members, via, p, threshold)


def decide_cluster(c: Component, members: list[str], via: dict, p: MinHashParams, threshold: float):
    """(tag, task) for the tasks of one cluster of confirmed duplicates: the
    first by survivor_key is kept and the rest dropped naming it, or all are
    dropped when the cluster holds a reference-pool row."""
    ts, pools = _cluster_rows(c, members)
    if len(members) == 1 or not ts:
        for t in ts:
            yield KEPT, t
    elif pools:
        for t in ts:
            yield DROPPED, _pool_drop(c, t, pools, via)
    else:
        yield KEPT, ts[0]
        for t in ts[1:]:
            yield DROPPED, _near_drop(c, t, ts[0], via, p, threshold)


def _pool_drop(c: Component, t: dict, pools: list[dict], via: dict) -> dict:
    """A task in a cluster with reference-pool rows: dropped, naming its closest pool row."""
    n = task_node(t)
    sims = {r["node"]: c.sh.sim(n, r["node"]) for r in pools}
    best = max(pools, key=lambda r: (c.hashes[n] == r["content_hash"], sims[r["node"]], r["node"]))
    exact = c.hashes[n] == best["content_hash"]
    detail = {
        "pool_task_id": best["task_id"],
        "pool_source": best["source"],
        "pool": best.get("pool"),
        "match": "exact" if exact else "near",
        "similarity": 1.0 if exact else sims[best["node"]],
        **_via(via, n, c.pool_by_node, c.by_node),
    }
    return drop_record(t, POOL_STAGE, "dedup_against_pool", detail)


def _near_drop(c: Component, t: dict, keep: dict, via: dict, p: MinHashParams, threshold: float) -> dict:
    """A task that is not its cluster's survivor: dropped, naming the survivor."""
    n, kn = task_node(t), task_node(keep)
    detail = {
        "duplicate_of": keep["task_id"],
        "duplicate_of_source": keep["source"],
        "similarity": c.sh.sim(n, kn),
        "number_overlap": c.sh.numbers(n, kn),
        "threshold": threshold,
        "shingle": f"{p.shingle}{p.size}",
        **_via(via, n, c.pool_by_node, c.by_node),
    }
    return drop_record(t, STAGE, "near_duplicate", detail)


def _via(via: dict, n: str, pool_by_node: dict, by_node: dict) -> dict:
    nb, s, how = via[n]
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


def bucket_edges(
    tasks: list[dict], pool_rows: list[dict], p: MinHashParams, max_bucket_pairs: int = 32, within: bool = True
) -> set:
    """The candidate edges of the MinHash buckets: bucket_pairs of each,
    from a dict of buckets filled one band at a time (batch/candidates.band_edges
    finds the same ones as arrays)."""
    buckets: dict = defaultdict(list)
    # Every task's signature in one compiled pass (signatures.py: the same
    # bits as task_records' one-at-a-time numpy code, tested).
    for t, sig in zip(tasks, signatures([text_of(t) for t in tasks], p)):
        node = task_node(t)
        for band, key in band_keys(sig, p.bands, p.rows):
            buckets[bucket_key(band, key)].append(node)
        if pool_rows:
            buckets[exact_key(t["content_hash"])].append(node)
    for r in pool_rows:
        for key, node in pool_records(r):
            buckets[key].append(node)
    edges = set()
    for members in buckets.values():
        edges.update(bucket_pairs(members, max_bucket_pairs, within))
    return edges


def find_near_duplicates(
    tasks: list[dict],
    pool_rows: list[dict],
    p: MinHashParams,
    threshold: float,
    min_numbers: float = 0.5,
    guard_below: float = 0.9,
    semantic: bool = True,
    rules: Rules | None = None,
    within: bool = True,
    max_bucket_pairs: int = 32,
    candidates=bucket_edges,
):
    """The near-dedup stage's Beam-free function (REPL, `tasksieve validate`):
    the same candidate generators (MinHash bands, quantity-grouped meanings)
    and the same confirmation (`resolve_component`) as the Beam stage, in
    memory. Yields (KEPT | DROPPED, task) like it. `candidates` finds the
    band buckets' edges (bucket_edges, or batch/candidates.band_edges: the same)."""
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
        yield from resolve_component(
            by_root_tasks.get(root, []),
            by_root_pool.get(root, []),
            comp_edges,
            p,
            threshold,
            min_numbers,
            guard_below,
            rules=rules,
        )


class NearDedup(beam.PTransform):
    """Tasks in; (kept, dropped) out. `pool_rows` is an optional PCollection
    of reference-pool index rows (see pool_index.read_row_group)."""

    def __init__(
        self,
        params: MinHashParams,
        threshold: float,
        pool_rows=None,
        max_bucket_pairs: int = 32,
        within: bool = True,
        min_numbers: float = 0.5,
        guard_below: float = 0.9,
        semantic: bool = False,
        rules: Rules | None = None,
    ):
        super().__init__()
        self.p, self.threshold, self.pool_rows, self.max_pairs = params, threshold, pool_rows, max_bucket_pairs
        self.within, self.min_numbers, self.guard_below = within, min_numbers, guard_below
        self.semantic, self.rules = semantic, rules or Rules()

    @classmethod
    def from_config(cls, dedup, decontam, pool_rows=None) -> "NearDedup":
        """From the run config's `[dedup]` section (the same-problem rules read
        `[decontam]` too); `pool_rows`: the reference pools' index rows."""
        return cls(params_from_config(dedup), dedup.threshold, pool_rows, **near_options(dedup, decontam))

    def expand(self, tasks):
        p, threshold, max_pairs, within = self.p, self.threshold, self.max_pairs, self.within
        min_numbers, guard_below, rules = self.min_numbers, self.guard_below, self.rules
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
                | "SemanticNeighbours"
                >> beam.FlatMap(lambda kv: semantic_edges(list(kv[1]), kv[0], p, threshold, rules, within))
            )
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
            "RouteSplit",
            (KEPT, "cluster"),
        )
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
            yield from resolve_component(tasks_, pool_, edges_, p, threshold, min_numbers, guard_below, rules)

        out = split_tagged(
            (routed["cluster"], comp_edges)
            | "JoinComponents" >> beam.Flatten()
            | "GroupComponents" >> beam.GroupByKey()
            | "Resolve" >> beam.FlatMap(resolve),
            "ResolveSplit",
            (KEPT, DROPPED),
        )
        kept = (routed[KEPT], out[KEPT]) | "AllKept" >> beam.Flatten()
        return kept, out[DROPPED]
