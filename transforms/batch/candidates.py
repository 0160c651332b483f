"""Near dedup of the batch path, first step: candidate edges. The MinHash
buckets of a bucket shard give id pairs by dedup/near.py's bucket_pairs
rules (as arrays: `band_edges` finds the same edges), pairs the set sizes
already refuse are dropped (near_rule.size_bound), and each edge is sent
to its edge shard; quantity groups give the semantic edges the same way."""

from __future__ import annotations

import numpy as np

from tasksieve.transforms.batch.chunks import Spill, pack, unpack
from tasksieve.transforms.batch.dedup import POOL_SRC, NearSettings, holder_of
from tasksieve.transforms.dedup.minhash import text_of
from tasksieve.transforms.dedup.near import bucket_edges
from tasksieve.transforms.dedup.near_judge import POOL_NODE, task_node
from tasksieve.transforms.dedup.near_rule import size_bound_mask
from tasksieve.transforms.dedup.sentences import sentence_matrix
from tasksieve.transforms.batch.shards import StringColumn, bucket_runs, text_bands_sizes_sketches


_MIX = np.uint64(0x9E3779B97F4A7C15)


def edge_shards(lower: np.ndarray, shards: int) -> np.ndarray:
    """The edge shard of each edge, from its first node's id (a
    multiplicative hash: the ids of one holder are consecutive)."""
    with np.errstate(over="ignore"):
        return ((lower.astype(np.uint64) * _MIX) >> np.uint64(40)).astype(np.int64) % shards


def _by_edge_shard(pairs: np.ndarray, meaning: list[tuple], shards: int, spill: Spill | None):
    """(edge shard, packed (pairs, meaning edges)) for each edge shard the
    edges fall in: candidate edges meet in their edge shard, not in one
    step. `pairs` is an (m, 2) array of node ids, lower id first; meaning
    edges are (id, id, cosine) in node order. An edge's shard is its first
    node's, so a node's edges as the first node all meet in one shard and
    its row goes to fewer shards than it has edges; the one edge always
    lands in one shard, so duplicates still meet."""
    parts: dict = {}
    if pairs.shape[0]:
        shard = edge_shards(pairs[:, 0], shards)
        order = np.argsort(shard, kind="stable")
        cuts = np.flatnonzero(np.diff(shard[order])) + 1
        for idx in np.split(order, cuts):
            parts[int(shard[idx[0]])] = (pairs[idx], [])
    if meaning:
        for e, sh in zip(meaning, edge_shards(np.array([e[0] for e in meaning], dtype=np.int64), shards).tolist()):
            parts.setdefault(sh, (np.zeros((0, 2), dtype=np.int64), []))[1].append(e)
    for shard, part in parts.items():
        yield shard, pack(part, spill)


def _pair_edges(
    ids: np.ndarray, sizes: np.ndarray, pool: np.ndarray, pairs: np.ndarray, near: NearSettings
) -> np.ndarray:
    """bucket_pairs' rules and size_bound for the record pairs it would
    make (_all_pairs_buckets, _star_chain_pairs), as arrays: the (m, 2)
    node ids, lower first, of the edges kept. The same pairs and the same
    refusals as the per-bucket loop."""
    ia, ib = pairs[:, 0], pairs[:, 1]
    na, nb = ids[ia], ids[ib]
    pa, pb = pool[ia], pool[ib]
    # Pool-pool never; task-task only `within`; one node twice is no pair.
    keep = (na != nb) & ((pa != pb) | (~pa & ~pb & near.within))
    sa, sb = sizes[ia], sizes[ib]
    keep[keep] = size_bound_mask(np.minimum(sa[keep], sb[keep]), np.maximum(sa[keep], sb[keep]), near.threshold)
    na, nb = na[keep], nb[keep]
    return np.stack([np.minimum(na, nb), np.maximum(na, nb)], axis=1)


def band_edges(tasks: list[dict], pool_rows: list[dict], p, max_pairs: int = 32, within: bool = True) -> set:
    """near.bucket_edges, the candidate edges of the MinHash band buckets,
    found as band_shard_found finds them (one sort of every band key,
    pairs as index arrays): the same (a, b) node pairs, lower node first.
    near.bucket_edges' dict of buckets and its pairs were ~10 s of Python
    for `tasksieve validate` on a 100k-task delivery. A node given twice
    is one member of its buckets, as bucket_pairs' set() makes it. Against
    a pool (exact-hash buckets, pool rows first): near.bucket_edges."""
    if pool_rows:
        return bucket_edges(tasks, pool_rows, p, max_pairs, within)
    nodes = [task_node(t) for t in tasks]
    if not within or len(nodes) < 2:  # task-task pairs only `within`
        return set()
    texts = [text_of(t) for t in tasks]
    keys = np.concatenate([text_bands_sizes_sketches(texts, p)[0], sentence_matrix(texts)], axis=1)
    bands = keys.shape[1]
    flat = keys.reshape(-1)
    real = np.flatnonzero(flat >= 0)  # -1 pads the sentence keys
    runs = bucket_runs(flat[real])
    runs = (real[runs[0]], runs[1], runs[2])  # record indices back in the full matrix
    pairs, larger = _all_pairs_buckets(runs, max_pairs)
    # Record r is task r // bands (keys row by row); pairs of tasks from here on.
    pairs = np.concatenate(
        [pairs // bands, _star_chain_pairs([g // bands for g in larger], StringColumn.of(nodes), max_pairs)]
    )
    first: dict = {}
    code = np.fromiter((first.setdefault(n, i) for i, n in enumerate(nodes)), dtype=np.int64, count=len(nodes))
    a, b = code[pairs[:, 0]], code[pairs[:, 1]]
    keep = a != b  # one node twice is no pair
    edges = set()
    for x, y in zip(map(nodes.__getitem__, a[keep].tolist()), map(nodes.__getitem__, b[keep].tolist())):
        edges.add((x, y) if x < y else (y, x))
    return edges


def _all_pairs_buckets(runs: tuple, max_pairs: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(record index pairs of every pair within each bucket that
    bucket_pairs pairs all-to-all, as an (m, 2) array; the other buckets'
    record indices, one array each). A bucket of up to max_pairs records
    has up to max_pairs distinct nodes, so bucket_pairs pairs it
    all-to-all: most buckets, done here by size with one index matrix
    each, where the order bucket_pairs sorts its members in does not
    matter (each pair is oriented by id later; a node held twice pairs
    with itself, refused by _pair_edges, and its pairs come twice, made
    distinct in its edge shard). Larger buckets (a star and a chain when
    over max_pairs distinct nodes, which depend on that order) are left
    to _star_chain_pairs."""
    order, starts, sizes = runs
    parts, rest = [np.zeros((0, 2), dtype=np.int64)], []
    for m in np.unique(sizes).tolist():
        first = starts[sizes == m]
        if m > max_pairs:
            rest += [order[f : f + m] for f in first.tolist()]
            continue
        members = order[first[:, None] + np.arange(m)]  # (buckets, m) record indices
        i, j = np.triu_indices(m, 1)
        parts.append(np.stack([members[:, i].ravel(), members[:, j].ravel()], axis=1))
    return np.concatenate(parts), rest


def _star_chain_pairs(groups: list[np.ndarray], nodes: StringColumn, max_pairs: int) -> np.ndarray:
    """bucket_pairs of the buckets _all_pairs_buckets leaves (over
    max_pairs records), as record index pairs: each bucket's distinct
    nodes in bucket_pairs' order (pool rows first, then by node string; one
    sort for all the buckets, a node held twice kept once, by its last
    record, as the per-bucket loop's dict kept it), then a star on the
    first and a chain, or all-to-all where max_pairs or fewer are left."""
    keyed = []
    for b, idx in enumerate(groups):
        keyed += [(b, not n.startswith(POOL_NODE), n, i) for n, i in zip(nodes.take(idx), idx.tolist())]
    keyed.sort()
    kept = [k for k, nxt in zip(keyed, keyed[1:] + [(-1, True, None, -1)]) if (nxt[0], nxt[2]) != (k[0], k[2])]
    bucket = np.fromiter((k[0] for k in kept), dtype=np.int64, count=len(kept))
    record = np.fromiter((k[3] for k in kept), dtype=np.int64, count=len(kept))
    parts = [np.zeros((0, 2), dtype=np.int64)]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(kept) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[starts, len(kept)])
    for s, k in zip(starts[counts <= max_pairs].tolist(), counts[counts <= max_pairs].tolist()):
        i, j = np.triu_indices(k, 1)  # few: only where a node was held twice
        parts.append(np.stack([record[s + i], record[s + j]], axis=1))
    big = np.repeat(counts > max_pairs, counts)
    offset = np.arange(len(kept)) - np.repeat(starts, counts)
    star = big & (offset >= 1)
    parts.append(np.stack([np.repeat(record[starts], counts)[star], record[star]], axis=1))
    chain = star & (offset <= np.repeat(counts, counts) - 2)
    parts.append(np.stack([record[chain], record[np.flatnonzero(chain) + 1]], axis=1))
    return np.concatenate(parts)


def band_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One bucket shard's records -> its candidate edges (node-id pairs), by
    edge shard. Edges the set sizes already refuse (size_bound) are dropped
    here, before any row moves for them: half the candidates of a templated
    pool. Buckets are paired as arrays: all-to-all by bucket size
    (_all_pairs_buckets, most of them), the larger ones after one sort
    into bucket_pairs' order (_star_chain_pairs)."""
    parts = [unpack(b) for b in kv[1]]
    keys, ids, sizes = (np.concatenate([p[i] for p in parts]) for i in (0, 2, 3))
    nodes = StringColumn.joined([p[1] for p in parts])
    pool = holder_of(ids) >= POOL_SRC  # held under a pool row group
    pairs, larger = _all_pairs_buckets(bucket_runs(keys), near.max_pairs)
    pairs = np.concatenate([pairs, _star_chain_pairs(larger, nodes, near.max_pairs)])
    yield from _by_edge_shard(_pair_edges(ids, sizes, pool, pairs, near), [], near.edge_shards, spill)


def semantic_shard_found(kv, near: NearSettings, spill: Spill | None = None):
    """One key shard's quantity groups -> semantic.semantic_edges of each,
    as (id, id, cosine) in node order, by edge shard."""
    from tasksieve.transforms.dedup.semantic import bag_ahead, semantic_edges

    groups: dict = {}
    for part in kv[1]:
        for key, members in unpack(part).items():
            groups.setdefault(key, []).extend(members)
    bag_ahead([(n, t) for n, _, t in members] for members in groups.values())
    meaning = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        id_of = {n: i for n, i, _ in members}
        found = semantic_edges([(n, t) for n, _, t in members], key, near.p, near.threshold, near.rules, near.within)
        meaning += [(id_of[e[0]], id_of[e[1]], *e[2:]) for e in found]
    yield from _by_edge_shard(np.zeros((0, 2), dtype=np.int64), meaning, near.edge_shards, spill)
