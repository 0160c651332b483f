"""Near dedup of the batch path: candidate edges per bucket shard, each
edge judged where its two rows meet, then clusters of confirmed edges
decided where their members meet. Every Beam element is a shard's worth
of records, never one edge, node or task, so Beam's per-element cost is
paid a few hundred times per run, not millions.

The decisions are near.py's: the same bucket_pairs, semantic_edges,
judge_edges, best_links and decide_clusters (tests/test_batch_dedup.py
compares both paths). The row path judges edges per connected component
of *candidate* edges; on a pool built from shared templates those
percolate into one component holding a large share of the pool (15% at
100k tasks), which one worker would hold in memory. A judgement needs
only its edge's two rows, so here edges are judged in edge shards and
only *confirmed* edges are joined into clusters.

    bucket records --GroupByKey(bucket shard)--> edges by edge shard + where each node is
    quantity groups --GroupByKey(key shard)----> semantic edges, the same
    edges --GroupByKey(edge shard)--> distinct edges; which shards need each row
    held rows + needs --GroupByKey(hash shard)--> rows to edge shards; the rest kept
    rows + edges --GroupByKey(edge shard)--> confirmed edges (judge_edges)
    confirmed --CombineGlobally--> cluster and best link of each member
    pending rows + clusters --GroupByKey(hash shard)--> members per cluster shard
    members --GroupByKey(cluster shard)--> kept and dropped chunks (decide_clusters)
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from tasksieve.transforms.chunks import Spill, as_chunk, pack, unpack
from tasksieve.transforms.dedup.batch import CHUNK, SHARDS, NearSettings
from tasksieve.transforms.dedup.near import (Component, UnionFind, best_links, bucket_pairs, decide_clusters,
                                             edge_order, judge_edges, sort_edges, task_node)
from tasksieve.transforms.dedup.shards import bucket_groups, shard_of
from tasksieve.transforms.stage import DROPPED, KEPT

NEEDS, EDGES, EDGE_ROWS, PENDING, CLUSTERS, MEMBERS = "needs", "edges", "edge_rows", "pending", "clusters", "members"


def _by_edge_shard(edges: list[tuple], where: dict, spill: Spill | None):
    """(edge shard, packed ([edges], {node: src})) for each edge shard the
    edges fall in: candidate edges meet in their edge shard, not in one step.
    An edge's shard is its lower node's (edges are (lower, higher, ...)), so
    a node's edges as the lower node all meet in one shard and its row goes
    to fewer shards than it has edges (a shard per edge sent a row once per
    edge); the one tuple always lands in one shard, so duplicates still meet."""
    parts: dict = {}
    node_shard: dict = {}
    for e in edges:
        shard = node_shard.get(e[0])
        if shard is None:
            shard = node_shard[e[0]] = shard_of(e[0], SHARDS)
        parts.setdefault(shard, []).append(e)
    for shard, part in parts.items():
        yield shard, pack((part, {n: where[n] for e in part for n in e[:2]}), spill)


def size_bound(a: int, b: int, threshold: float) -> bool:
    """Can two texts with a and b distinct shingles be confirmed by their
    shingles at all? Their Jaccard is at most min/max (all of the smaller
    set shared), and rounding to 4 places is monotone, so an edge with
    round(min/max, 4) under the threshold is refused by judge_edges whatever
    its texts say. Edges with equal content hashes (confirmed outright)
    have equal texts, so equal sizes; meaning edges never pass here."""
    return round(min(a, b) / max(a, b), 4) >= threshold


def _size_bound_mask(small: np.ndarray, large: np.ndarray, threshold: float) -> np.ndarray:
    """size_bound for arrays of set sizes, exactly: round(x, 4) is within
    0.5e-4 (and an ulp) of x, so a ratio 1e-4 or more clear of the threshold
    is decided by the comparison alone; only the few closer ones go through
    size_bound itself."""
    ratio = small / large
    keep = ratio >= threshold + 1e-4
    near = np.flatnonzero(~keep & (ratio >= threshold - 1e-4))
    for i in near.tolist():
        keep[i] = size_bound(int(small[i]), int(large[i]), threshold)
    return keep


def _two_record_edges(nodes, sizes, pool, pairs: np.ndarray, near: NearSettings):
    """bucket_pairs and size_bound for every bucket of exactly two records,
    as arrays: (lower node, higher node, record index of each) of the edges
    kept. The same pairs and the same refusals as the per-bucket loop."""
    ia, ib = pairs[:, 0], pairs[:, 1]
    na, nb = nodes[ia], nodes[ib]
    pa, pb = pool[ia], pool[ib]
    # Pool-pool never; task-task only `within`; one node twice is no pair.
    keep = (na != nb) & ((pa != pb) | (~pa & ~pb & near.within))
    sa, sb = sizes[ia], sizes[ib]
    keep[keep] = _size_bound_mask(np.minimum(sa[keep], sb[keep]), np.maximum(sa[keep], sb[keep]), near.threshold)
    ia, ib, na, nb = ia[keep], ib[keep], na[keep], nb[keep]
    low = na < nb
    return np.where(low, na, nb), np.where(low, nb, na), ia, ib


def band_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One bucket shard's records -> its candidate edges, by edge shard,
    with `src` (the shard holding the row) of each node in an edge. Edges
    the set sizes already refuse (size_bound) are dropped here, before any
    row moves for them: half the candidates of a templated pool. Buckets of
    two records (most) are handled as arrays, larger ones by bucket_pairs."""
    parts = [unpack(b) for b in kv[1]]
    keys = np.concatenate([p[1] for p in parts])
    nodes = np.concatenate([p[2] for p in parts])
    sizes = np.concatenate([p[3] for p in parts])
    srcs = [p[0] for p in parts]
    part_of = np.concatenate([np.full(p[1].shape[0], i) for i, p in enumerate(parts)])
    # Pool rows come in parts of their own (pool_unit_records), tasks never.
    pool = np.concatenate([np.full(p[1].shape[0], isinstance(p[0], tuple) and p[0][0] == "pool") for p in parts])
    pairs, larger = bucket_groups(keys)
    lo, hi, ia, ib = _two_record_edges(nodes, sizes, pool, pairs, near)
    edges = list(zip(lo.tolist(), hi.tolist()))
    where = dict(zip(nodes[ia].tolist(), (srcs[i] for i in part_of[ia].tolist())))
    where.update(zip(nodes[ib].tolist(), (srcs[i] for i in part_of[ib].tolist())))
    size_list = sizes.tolist()
    for idx in larger:
        members = nodes[idx].tolist()
        size = dict(zip(members, (size_list[i] for i in idx.tolist())))
        found = [e for e in bucket_pairs(members, near.max_pairs, near.within)
                 if size_bound(size[e[0]], size[e[1]], near.threshold)]
        if not found:
            continue
        in_edge = {x for e in found for x in e}
        for i in idx.tolist():
            if nodes[i] in in_edge:
                where[nodes[i]] = srcs[part_of[i]]
        edges += found
    yield from _by_edge_shard(edges, where, spill)


def semantic_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One key shard's quantity groups -> semantic.semantic_edges of each, by edge shard."""
    from tasksieve.transforms.dedup.semantic import semantic_edges

    groups: dict = {}
    for part in kv[1]:
        for key, members in unpack(part).items():
            groups.setdefault(key, []).extend(members)
    edges, where = [], {}
    for key, members in groups.items():
        if len(members) < 2:
            continue
        src_of = {n: s for n, _, s in members}
        found = semantic_edges([(n, t) for n, t, _ in members], key, near.p, near.threshold, near.rules, near.within)
        for e in found:
            where[e[0]], where[e[1]] = src_of[e[0]], src_of[e[1]]
        edges += found
    yield from _by_edge_shard(edges, where, spill)


def edge_shard_found(kv, spill: Spill | None = None):
    """One edge shard's candidate edges, from every bucket and key shard ->
    (shard, (EDGES, its distinct edges in edge_order)) and, per shard
    holding rows of them, (src, (NEEDS, {node: [this shard]}))."""
    shard, edges, where = kv[0], set(), {}
    for part in kv[1]:
        part_edges, part_where = unpack(part)
        edges.update(map(tuple, part_edges))
        where.update(part_where)
    needs: dict = {}
    for n in {n for e in edges for n in e[:2]}:
        needs.setdefault(where[n], {})[n] = [shard]
    yield shard, (EDGES, pack(sort_edges(edges), spill))
    for src, nodes in needs.items():
        yield src, (NEEDS, pack(nodes, spill))


class _PackedParts(beam.CombineFn):
    """Accumulators are lists of packed parts, so the runner moves a few
    blobs, not every edge as an object; `extract_output` sees all parts."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, part):
        acc.append(part)
        return acc

    def merge_accumulators(self, accs):
        return [part for acc in accs for part in acc]


def _node(kind: str, row: dict) -> str:
    return task_node(row) if kind == "task" else row["node"]


# What near.judge_edges reads of a task (its node, text and hash; the
# same-problem rules' prompt, answer and code): rows travel to every edge
# shard that needs them, so they travel without the rest.
_JUDGED = ("task_id", "source", "prompt", "answer", "tests", "entry_point", "reference_solution", "content_hash")


def _judged(kind: str, row: dict) -> dict:
    if kind == "task":
        return {k: row.get(k) for k in _JUDGED}
    return {k: v for k, v in row.items() if k != "bands"}  # a pool row: its band keys are spent


def route_candidates(kv, spill: Spill | None = None, chunk: int = CHUNK):
    """One hash shard's held rows (tasks with their normalised prompts, pool
    rows with theirs) -> (EDGE_ROWS, (edge shard, [(kind, src, row, text)]))
    for rows an edge needs, (PENDING, (src, [(kind, row)])) the same rows
    kept for the cluster join, and KEPT chunks of tasks in no candidate edge."""
    src, needs, held = kv[0], {}, []
    for v in kv[1]:
        if v[0] == NEEDS:  # one message per edge shard
            for n, shards in unpack(v[1]).items():
                needs.setdefault(n, []).extend(shards)
        else:
            held.append(v)
    to_shard: dict = {}
    pending, rest = [], []
    for kind, packed in held:
        rows = unpack(packed)  # tasks come as (rows, texts) from exact_and_bands
        rows, texts = rows if kind == "task" else (rows, [r["text"] for r in rows])
        for r, text in zip(rows, texts):
            n = _node(kind, r)
            if n in needs:
                pending.append((kind, r))
                slim = _judged(kind, r)
                for shard in needs[n]:
                    to_shard.setdefault(shard, []).append((kind, src, slim, text))
            elif kind == "task":
                rest.append(r)
    for shard, rows in to_shard.items():
        yield EDGE_ROWS, (shard, (EDGE_ROWS, pack(rows, spill)))
    if pending:
        yield PENDING, (src, (PENDING, pack(pending, spill)))
    for i in range(0, len(rest), chunk):
        yield KEPT, as_chunk(rest[i : i + chunk], spill)


def judge_shard(kv, near: NearSettings, spill: Spill | None = None):
    """One edge shard: its edges and their rows -> packed [(edge, how,
    similarity, src of a, src of b)] of the confirmed edges (near.judge_edges)."""
    edges, tasks, pool, src_of, texts = [], {}, {}, {}, {}
    for kind, v in kv[1]:
        if kind == EDGES:
            edges += unpack(v)
            continue
        for row_kind, src, r, text in unpack(v):
            n = _node(row_kind, r)
            (tasks if row_kind == "task" else pool)[n] = r
            src_of[n], texts[n] = src, text
    c = Component(list(tasks.values()), list(pool.values()), near.p, texts)
    edges = sort_edges(edges)
    confirmed = judge_edges(c, edges, near.threshold, near.min_numbers, near.guard_below, near.rules)
    if confirmed:
        yield pack([(e, how, s, src_of[e[0]], src_of[e[1]]) for e, how, s in confirmed], spill)


class ClustersFn(_PackedParts):
    """Packed confirmed edges -> {src: {node: (cluster root, best link)}}:
    the row path's union-find and best_links, over confirmed edges only."""

    def extract_output(self, acc):
        confirmed, src_of = [], {}
        for part in acc:
            for e, how, s, src_a, src_b in unpack(part):
                confirmed.append((e, how, s))
                src_of[e[0]], src_of[e[1]] = src_a, src_b
        confirmed.sort(key=lambda c: edge_order(c[0]))
        uf = UnionFind()
        for e, _, _ in confirmed:
            uf.union(e[0], e[1])
        via = best_links(confirmed)
        out: dict = {}
        for n, src in src_of.items():
            out.setdefault(src, {})[n] = (uf.find(n), via[n])
        return out


def cluster_messages(clusters: dict, spill: Spill | None = None):
    for src, members in clusters.items():
        yield src, (CLUSTERS, pack(members, spill))


def route_clusters(kv, spill: Spill | None = None, shards: int = SHARDS, chunk: int = CHUNK):
    """One hash shard's pending rows and their clusters -> (MEMBERS,
    (cluster shard, [(root, kind, row, link)])); tasks whose candidate
    edges were all refused leave as KEPT chunks."""
    clusters, pending = {}, []
    for kind, v in kv[1]:
        if kind == CLUSTERS:
            clusters.update(unpack(v))
        else:
            pending += unpack(v)
    members: dict = {}
    rest = []
    for kind, r in pending:
        n = _node(kind, r)
        if n in clusters:
            root, link = clusters[n]
            members.setdefault(shard_of(root, shards), []).append((root, kind, r, link))
        elif kind == "task":
            rest.append(r)
    for shard, ms in members.items():
        yield MEMBERS, (shard, pack(ms, spill))
    for i in range(0, len(rest), chunk):
        yield KEPT, as_chunk(rest[i : i + chunk], spill)


def resolve_clusters(kv, near: NearSettings, spill: Spill | None = None):
    """One cluster shard -> near.decide_clusters of its clusters (one
    Component for the shard, so the drop details' similarities are one
    block): one KEPT chunk and one DROPPED chunk."""
    by_root: dict = {}
    for part in kv[1]:
        for root, kind, r, link in unpack(part):
            by_root.setdefault(root, []).append((kind, r, link))
    members = [m for root in sorted(by_root) for m in by_root[root]]
    c = Component([r for k, r, _ in members if k == "task"], [r for k, r, _ in members if k != "task"], near.p)
    via = {_node(k, r): link for k, r, link in members}
    clusters = [[_node(k, r) for k, r, _ in by_root[root]] for root in sorted(by_root)]
    kept, dropped = [], []
    for tag, t in decide_clusters(c, clusters, via, near.p, near.threshold):
        (kept if tag == KEPT else dropped).append(t)
    if kept:
        yield KEPT, as_chunk(kept, spill)
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
