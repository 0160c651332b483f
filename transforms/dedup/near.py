"""Stages `near_dedup` and `against_pool`: MinHash + LSH candidates,
confirmed with the exact Jaccard similarity, clustered with union-find.
The rule as Beam-free functions (find_near_duplicates: `tasksieve
validate`'s judgement and the reference the batch engine, transforms/batch/,
is tested against); the batch engine runs it on shards of chunks at scale
(docs/scaling.md).

1. Each task's signature and band keys (`minhash.py`) put its node in one
   bucket per band, plus its exact content hash's bucket when a pool is
   given (exact copies of pool items). Reference-pool items come with their
   bands precomputed (`pool_index.py`).
2. A bucket of 2+ members yields candidate pairs (all pairs up to
   `max_bucket_pairs` members, else a star on the first member plus a
   chain in rank order: linear in the bucket).
3. Union-find over the distinct candidate *edges* gives the components;
   a task without a candidate edge is kept at once.
4. Per component: every candidate edge is confirmed with the exact Jaccard
   similarity of the two shingle sets, and by the numbers the two texts
   hold (see `number_overlap`); a local union-find over confirmed edges
   gives the clusters. A cluster holding a pool item drops all its
   tasks at `against_pool` (the pool is never modified); otherwise the
   survivor is chosen by the exact-dedup rule (earliest `created_at`, then
   `source`, `task_id`, file position) and the rest drop at `near_dedup`.
   `drop_detail` names the survivor (or pool item), the measured similarity
   to it, and the edge that confirmed the link (clusters are transitive, so
   a member may join through a neighbour rather than the survivor).
5. Issue 43: a linked pair (shingles, or one text contained in the other:
   same_problem.relation.contained) is one of relation.relate's relations;
   duplicates and variants are confirmed, siblings and different questions
   on one setup are not. A cluster is groups of duplicates joined by
   variant edges: the groups after the original's drop as `near_variant`
   unless `keep_variants` keeps them (near_decide.py). Candidates also come
   from sentence-set buckets (sentences.py).
"""

from __future__ import annotations

from collections import defaultdict

from tasksieve.transforms.dedup.minhash import MinHashParams, band_keys, text_of
from tasksieve.transforms.dedup.near_judge import POOL_NODE, Component, UnionFind, best_links, judge_edges, task_node
from tasksieve.transforms.dedup.semantic import bag_ahead, quantity_key, semantic_edges
from tasksieve.transforms.dedup.signatures import signatures
from tasksieve.transforms.dedup.near_decide import decide_clusters
from tasksieve.transforms.same_problem.rules import Rules
from tasksieve.transforms.stage import KEPT

EXACT_BAND = -1  # band index of the exact-content-hash bucket


def bucket_key(band: int, key: int) -> int:
    """One 63-bit int per (band, band hash): the cheapest key to shuffle."""
    return (((band + 2) * 0x9E3779B97F4A7C15) ^ key) & 0x7FFFFFFFFFFFFFFF


def exact_key(content_hash: str) -> int:
    return bucket_key(EXACT_BAND, int(content_hash[:15], 16))


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
    keep_variants: int = 0,
):
    """Confirm a component's candidate edges and decide: yields (tag, task).
    Edges are (a, b) from MinHash bands, confirmed by the exact Jaccard
    similarity and the number guard, or (a, b, cosine) from semantic
    neighbours (semantic.py), confirmed by the same-problem rules
    (`same_problem.judge_pair`)."""
    c = Component(tasks, pool, p)
    clusters, via = _confirmed_clusters(c, edges, threshold, min_numbers, guard_below, rules or Rules())
    yield from decide_clusters(c, clusters, via, p, threshold, keep_variants)


def bucket_edges(
    tasks: list[dict], pool_rows: list[dict], p: MinHashParams, max_bucket_pairs: int = 32, within: bool = True
) -> set:
    """The candidate edges of the MinHash buckets: bucket_pairs of each,
    from a dict of buckets filled one band at a time (batch/candidates.band_edges
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
    keep_variants: int = 0,
):
    """The near-dedup stage's Beam-free function (REPL, `tasksieve validate`,
    the batch engine's reference in tests/batch/): the candidate generators
    (MinHash bands, quantity-grouped meanings) and the confirmation
    (`resolve_component`), in memory. Yields (KEPT | DROPPED, task). `candidates` finds the
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
        bag_ahead(groups.values())
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
            keep_variants=keep_variants,
        )
