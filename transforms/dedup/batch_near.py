"""Near dedup of the batch path: candidate edges per bucket shard, one
union-find, then each component resolved where its members meet. Every
Beam element is a shard's worth of records (lists and dicts), never one
edge, node or task, so Beam's per-element cost is paid a few hundred
times per run, not millions.

The decisions are near.py's: the same bucket_pairs, semantic_edges,
UnionFind (deterministic roots) and resolve_component; only the plumbing
between them differs (tests/test_batch_dedup.py compares both paths).

    bucket records --GroupByKey(bucket shard)--> edges + where each node is
    quantity groups --GroupByKey(key shard)----> semantic edges + where
    all of it --CombineGlobally--> roots per hash shard, edges per component shard
    held tasks + their roots --GroupByKey(hash shard)--> members per component shard
    members + edges --GroupByKey(component shard)--> kept and dropped chunks
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from tasksieve.transforms.chunks import Spill, as_chunk, pack, unpack
from tasksieve.transforms.dedup.batch import CHUNK, SHARDS, NearSettings
from tasksieve.transforms.dedup.near import UnionFind, bucket_pairs, edge_order, resolve_component, task_node
from tasksieve.transforms.dedup.shards import buckets, shard_of
from tasksieve.transforms.stage import DROPPED, KEPT

ROOTS, EDGES, MEMBERS = "roots", "edges", "members"


def band_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One bucket shard's records -> ([candidate edges], {node: src}) for
    the nodes in an edge: `src` is the shard holding the node's row."""
    parts = [unpack(b) for b in kv[1]]
    keys = np.concatenate([ks for _, ks, _ in parts])
    nodes = np.concatenate([ns for _, _, ns in parts])
    srcs = np.concatenate([np.full(ks.shape[0], i) for i, (_, ks, _) in enumerate(parts)])
    edges, where = [], {}
    for idx in buckets(keys):
        found = list(bucket_pairs(nodes[idx].tolist(), near.max_pairs, near.within))
        if not found:
            continue
        in_edge = {x for e in found for x in e}
        for i in idx:
            if nodes[i] in in_edge:
                where[nodes[i]] = parts[srcs[i]][0]
        edges += found
    if edges:
        yield pack((edges, where), spill)


def semantic_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One key shard's quantity groups -> semantic.semantic_edges of each."""
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
    if edges:
        yield pack((edges, where), spill)


class ComponentsFn(beam.CombineFn):
    """Packed ([edges], {node: src}) parts -> the components, as
    near.ComponentsFn (distinct edges, deterministic roots), addressed for
    the next joins. Accumulators stay lists of the packed parts, so the
    runner moves a few blobs, not every edge as an object."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, found):
        acc.append(found)
        return acc

    def merge_accumulators(self, accs):
        return [part for acc in accs for part in acc]

    def extract_output(self, acc):
        edges, where = set(), {}
        for part in acc:
            part_edges, part_where = unpack(part)
            edges.update(map(tuple, part_edges))
            where.update(part_where)
        uf = UnionFind()
        for e in sorted(edges, key=edge_order):
            uf.union(e[0], e[1])
        by_root: dict = {}
        for e in edges:
            by_root.setdefault(uf.find(e[0]), []).append(e)
        roots_at: dict = {}
        for node, src in where.items():
            roots_at.setdefault(src, {})[node] = uf.find(node)
        return roots_at, by_root


def component_messages(found, spill: Spill | None = None, shards: int = SHARDS):
    """(src, (ROOTS, {node: root})) for every shard holding a member, and
    (component shard, (EDGES, {root: sorted edges})) for every component."""
    roots_at, by_root = found
    for src, roots in roots_at.items():
        yield src, (ROOTS, pack(roots, spill))
    per_shard: dict = {}
    for root, edges in by_root.items():
        per_shard.setdefault(shard_of(root, shards), {})[root] = sorted(edges, key=edge_order)
    for shard, comps in per_shard.items():
        yield shard, (EDGES, pack(comps, spill))


def route(kv, spill: Spill | None = None, shards: int = SHARDS, chunk: int = CHUNK):
    """One shard's held rows and its members' roots -> (MEMBERS, (component
    shard, [(root, kind, row)])) for rows in a component and KEPT chunks
    of the other tasks (pool rows outside every component are done with)."""
    roots, held = {}, []
    for v in kv[1]:
        if v[0] == ROOTS:
            roots.update(unpack(v[1]))
        else:
            held.append(v)
    members: dict = {}
    rest = []
    for kind, rows in held:
        for r in unpack(rows):
            n = task_node(r) if kind == "task" else r["node"]
            if n in roots:
                members.setdefault(shard_of(roots[n], shards), []).append((roots[n], kind, r))
            elif kind == "task":
                rest.append(r)
    for shard, ms in members.items():
        yield MEMBERS, (shard, (MEMBERS, pack(ms, spill)))
    for i in range(0, len(rest), chunk):
        yield KEPT, as_chunk(rest[i : i + chunk], spill)


def resolve_shard(kv, near: NearSettings, spill: Spill | None = None):
    """One component shard -> near.resolve_component of each of its
    components: one KEPT chunk and one DROPPED chunk."""
    comps, edges = {}, {}
    for kind, v in kv[1]:
        if kind == EDGES:
            edges.update(unpack(v))
            continue
        for root, member_kind, row in unpack(v):
            comps.setdefault(root, ([], []))[0 if member_kind == "task" else 1].append(row)
    kept, dropped = [], []
    for root in sorted(comps):
        tasks, pool = comps[root]
        for tag, t in resolve_component(tasks, pool, edges.get(root, []), near.p, near.threshold,
                                        near.min_numbers, near.guard_below, near.rules):
            (kept if tag == KEPT else dropped).append(t)
    if kept:
        yield KEPT, as_chunk(kept, spill)
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
