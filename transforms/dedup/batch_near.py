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

Rows are named by integer ids (batch.node_ids: the holder, a hash shard
or a pool row group, and the position in its list) until their rows meet
in an edge shard, so candidate edges travel as int64 arrays and where a
row is held is read off its id; edges are judged on node strings, each
lower node first, exactly as the row path.

    bucket records --GroupByKey(bucket shard)--> edges (id pairs) by edge shard
    quantity groups --GroupByKey(key shard)----> semantic edges, the same
    edges --GroupByKey(edge shard)--> distinct edges; which sketches each holder must send
    held sketches + asks --GroupByKey(holder)--> sketches to edge shards
    edges + sketches --GroupByKey(edge shard)--> edges that could be confirmed; which rows each holder must send
    held rows + needs --GroupByKey(holder)--> rows to edge shards; the rest kept
    rows + edges --GroupByKey(edge shard)--> confirmed edges (judge_edges)
    confirmed --CombineGlobally--> cluster and best link of each member
    pending rows + clusters --GroupByKey(hash shard)--> members per cluster shard
    members --GroupByKey(cluster shard)--> kept and dropped chunks (decide_clusters)
"""

from __future__ import annotations

from itertools import repeat

import apache_beam as beam
import numpy as np

from tasksieve.transforms.chunks import ROW_BYTES, Spill, as_chunk, pack, unpack
from tasksieve.transforms.dedup.batch import (CHUNK, POOL_SRC, POSITION_BITS, SHARDS, SKETCHES, NearSettings,
                                              holder_of, node_ids_at, position_of)
from tasksieve.transforms.dedup.minhash import text_of
from tasksieve.transforms.dedup.near import (_FAR_UNDER, POOL_NODE, Component, UnionFind, best_links, bucket_edges,
                                             decide_clusters, edge_order, judge_edges, judge_ranked, sort_edges,
                                             task_node)
from tasksieve.transforms.dedup.shards import StringColumn, bucket_runs, shard_of, text_bands_sizes_sketches
from tasksieve.transforms.dedup.sentences import sentence_matrix
from tasksieve.transforms.dedup.sketch import could_reach
from tasksieve.transforms.same_problem.relation import jaccard_floor
from tasksieve.transforms.stage import DROPPED, KEPT

NEEDS, EDGES, EDGE_ROWS, PENDING, CLUSTERS, MEMBERS = "needs", "edges", "edge_rows", "pending", "clusters", "members"
ASKS, SKETCHED = "asks", "sketched"


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


def size_bound(a: int, b: int, threshold: float) -> bool:
    """Can two texts with a and b distinct shingles be confirmed by their
    shingles at all? Their Jaccard is at most min/max (all of the smaller
    set shared), and rounding to 4 places is monotone, so an edge with
    round(min/max, 4) under the threshold is refused by judge_edges whatever
    its texts say. Edges with equal content hashes (confirmed outright)
    have equal texts, so equal sizes; meaning edges never pass here. The
    bound is relation.jaccard_floor: the lowest Jaccard a containment link
    (a sentence added) is judged at, the same for both paths."""
    return round(min(a, b) / max(a, b), 4) >= jaccard_floor(threshold)


def _size_bound_mask(small: np.ndarray, large: np.ndarray, threshold: float) -> np.ndarray:
    """size_bound for arrays of set sizes, exactly: round(x, 4) is within
    0.5e-4 (and an ulp) of x, so a ratio 1e-4 or more clear of the threshold
    is decided by the comparison alone; only the few closer ones go through
    size_bound itself."""
    ratio, floor = small / large, jaccard_floor(threshold)
    keep = ratio >= floor + 1e-4
    near = np.flatnonzero(~keep & (ratio >= floor - 1e-4))
    for i in near.tolist():
        keep[i] = size_bound(int(small[i]), int(large[i]), threshold)
    return keep


def _pair_edges(ids: np.ndarray, sizes: np.ndarray, pool: np.ndarray, pairs: np.ndarray,
                near: NearSettings) -> np.ndarray:
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
    keep[keep] = _size_bound_mask(np.minimum(sa[keep], sb[keep]), np.maximum(sa[keep], sb[keep]), near.threshold)
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
    pairs = np.concatenate([pairs // bands,
                            _star_chain_pairs([g // bands for g in larger], StringColumn.of(nodes), max_pairs)])
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
    from tasksieve.transforms.dedup.semantic import semantic_edges

    groups: dict = {}
    for part in kv[1]:
        for key, members in unpack(part).items():
            groups.setdefault(key, []).extend(members)
    meaning = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        id_of = {n: i for n, i, _ in members}
        found = semantic_edges([(n, t) for n, _, t in members], key, near.p, near.threshold, near.rules, near.within)
        meaning += [(id_of[e[0]], id_of[e[1]], *e[2:]) for e in found]
    yield from _by_edge_shard(np.zeros((0, 2), dtype=np.int64), meaning, near.edge_shards, spill)


def _distinct_pairs(pairs: np.ndarray) -> np.ndarray:
    if pairs.shape[0] < 2:
        return pairs
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return pairs[np.r_[True, (pairs[1:] != pairs[:-1]).any(axis=1)]]


def edge_shard_found(kv, spill: Spill | None = None):
    """One edge shard's candidate edges, from every bucket and key shard ->
    (shard, (EDGES, its distinct edges)) and, per holder of rows they name,
    (holder, (ASKS, (this shard, the rows' positions in the holder))): the
    rows' sketches are asked for first (send_sketches, prune_shard)."""
    shard, pair_parts, meaning = kv[0], [], set()
    for part in kv[1]:
        pairs, sem = unpack(part)
        pair_parts.append(pairs)
        meaning.update(sem)
    pairs = _distinct_pairs(np.concatenate(pair_parts)) if pair_parts else np.zeros((0, 2), dtype=np.int64)
    meaning = list(meaning)
    yield shard, (EDGES, pack((pairs, meaning), spill))
    yield from _per_holder(ASKS, shard, _edge_ids(pairs, meaning), spill)


def _edge_ids(pairs: np.ndarray, meaning: list) -> np.ndarray:
    """The distinct node ids the edges name, sorted."""
    return np.unique(np.concatenate([pairs.reshape(-1), np.array([i for e in meaning for i in e[:2]], dtype=np.int64)]))


def _per_holder(tag: str, shard: int, ids: np.ndarray, spill: Spill | None):
    """(holder, (tag, (shard, positions))) for each holder of the sorted `ids`."""
    holder = holder_of(ids)
    cuts = np.flatnonzero(np.diff(holder)) + 1
    for part in np.split(ids, cuts) if ids.shape[0] else []:
        yield int(holder_of(part[0])), (tag, pack((shard, position_of(part)), spill))


def send_sketches(kv, spill: Spill | None = None):
    """One holder's sketches (sketch.py) and content-hash codes
    (shards.exact_keys), and the positions edge shards ask for -> (edge
    shard, (SKETCHED, (ids, sketches, codes))) of those rows. The rows
    themselves stay where they are held until the edges are pruned."""
    src, asks, held = kv[0], [], []
    for tag, packed in kv[1]:
        (held if tag == SKETCHES else asks).append(unpack(packed))
    if not asks:
        return
    if len(held) != 1:
        raise RuntimeError(f"near dedup: {len(held)} sketch arrays held under {src!r}, expected one")
    sketches, codes = held[0]
    for shard, positions in asks:
        yield shard, (SKETCHED, pack((node_ids_at(src, positions), sketches[positions], codes[positions]), spill))


def prune_shard(kv, near: NearSettings, spill: Spill | None = None):
    """One edge shard: its candidate edges and their rows' sketches -> (shard,
    (EDGES, the edges that could be confirmed)) and, per holder of rows
    those name, (holder, (NEEDS, (this shard, positions))). A plain edge
    whose sketch bound is more than 1e-3 under the threshold, and whose
    rows are not copies, is one judge_ranked and judge_edges refuse on its
    Jaccard (sketch.py): at 1M tasks ~92% of the candidates, whose rows
    then never move, and a row in no edge left is kept where it is held.
    Meaning edges are judged by the same-problem rules: all kept."""
    shard, pairs, meaning, parts = kv[0], np.zeros((0, 2), dtype=np.int64), [], []
    for tag, packed in kv[1]:
        if tag == EDGES:
            pairs, meaning = unpack(packed)
        else:
            parts.append(unpack(packed))
    if pairs.shape[0]:
        if not parts:
            raise RuntimeError("near dedup: an edge shard holds edges without their sketches")
        ids, sketches, codes = (np.concatenate([p[k] for p in parts]) for k in range(3))
        order = np.argsort(ids)
        ids, sketches, codes = ids[order], sketches[order], codes[order]
        at = np.minimum(np.searchsorted(ids, pairs), ids.shape[0] - 1)
        if not (ids[at] == pairs).all():
            raise RuntimeError("near dedup: an edge shard holds an edge without its sketches")
        a, b = at[:, 0], at[:, 1]
        pairs = pairs[could_reach(sketches, a, b, jaccard_floor(near.threshold) - _FAR_UNDER) | (codes[a] == codes[b])]
    yield shard, (EDGES, pack((pairs, meaning), spill))
    yield from _per_holder(NEEDS, shard, _edge_ids(pairs, meaning), spill)


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
_HASH = _JUDGED.index("content_hash")


def _pool_judged(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "bands"}  # a pool row: its band keys are spent


class JudgedRows:
    """The judged fields (_JUDGED) of the tasks one holder sends one edge
    shard, a list per field, with their ids, nodes and texts: at 1M tasks
    ~2 million of these rows cross to edge shards, mostly pickled to the
    spill, and a list of strings pickles and loads at a fraction of the
    cost of as many dicts. A task's dict is made in the edge shard only
    when a rule reads it (`row`), for the few candidates close enough."""

    __slots__ = ("ids", "nodes", "texts", "fields")

    def __init__(self, ids: list, nodes: list, texts: list, fields: tuple):
        self.ids, self.nodes, self.texts, self.fields = ids, nodes, texts, fields

    @classmethod
    def of(cls, ids: list, nodes: list, texts: list, tasks: list) -> "JudgedRows":
        """From the tasks, with their ids, nodes and texts, one list each."""
        return cls(ids, nodes, texts, tuple(list(map(dict.get, tasks, repeat(k))) for k in _JUDGED))

    def take(self, at: list) -> "JudgedRows":
        """The rows at positions `at`, in that order: a holder makes its
        rows' columns once and sends each edge shard its picks, where a
        row was read field by field for each edge shard it went to (~2
        million row copies at 1M tasks)."""
        pick = lambda col: list(map(col.__getitem__, at))  # noqa: E731
        return JudgedRows(pick(self.ids), pick(self.nodes), pick(self.texts), tuple(map(pick, self.fields)))

    def __reduce__(self):  # pickled as its lists: no per-row object
        return JudgedRows, (self.ids, self.nodes, self.texts, self.fields)

    @property
    def nbytes(self) -> int:
        """The memory budget's estimate (chunks.Spill.memory_bytes): ROW_BYTES
        a row, as when each was a tuple in a list, so the budget holds and
        spills what it did (held, the strings are the pending rows' own)."""
        return len(self.ids) * ROW_BYTES

    def row(self, i: int) -> dict:
        """The i-th task's judged fields: {k: task.get(k) for k in _JUDGED}."""
        return {k: col[i] for k, col in zip(_JUDGED, self.fields)}


class _LazyRows:
    """node -> a task's judged fields (JudgedRows.row), made on first use:
    what near.Component reads of its tasks (`get`)."""

    def __init__(self):
        self.where: dict = {}  # node -> (JudgedRows, index)
        self.made: dict = {}

    def get(self, node: str, default=None):
        row = self.made.get(node)
        if row is None:
            at = self.where.get(node)
            if at is None:
                return default
            row = self.made[node] = at[0].row(at[1])
        return row


def route_candidates(kv, spill: Spill | None = None, chunk: int = CHUNK):
    """One holder's rows (a hash shard's tasks with their normalised
    prompts, or a pool row group, whose rows carry theirs) and the
    positions edge shards need -> (EDGE_ROWS, (edge shard, (JudgedRows of
    its tasks, [(id, pool row, text)]))) for rows an edge needs, (PENDING,
    (src, [(kind, row)])) the same rows kept for the cluster join, and KEPT
    chunks of tasks in no candidate edge."""
    src, wanted, held = kv[0], {}, []
    for v in kv[1]:
        if v[0] == NEEDS:  # one message per edge shard
            shard, positions = unpack(v[1])
            for pos in positions.tolist():
                wanted.setdefault(pos, []).append(shard)
        else:
            held.append(v)
    if len(held) > 1:  # ids are positions in the one list a holder holds
        raise RuntimeError(f"near dedup: {len(held)} row lists held under {src!r}, expected one")
    to_shard: dict = {}  # shard -> (positions in `sent`, pool items)
    sent: tuple = ([], [], [], [])  # ids, nodes, texts and rows of the tasks sent, each once
    pending, rest = [], []
    base = src << POSITION_BITS  # node_ids(src, pos), one int at a time
    for kind, packed in held:
        rows = unpack(packed)  # tasks come as (rows, texts) from exact_and_bands
        rows, texts = rows if kind == "task" else (rows, [r["text"] for r in rows])
        for pos, (r, text) in enumerate(zip(rows, texts)):
            shards = wanted.get(pos)
            if shards is not None:
                pending.append((kind, r))
                if kind == "task":
                    at = len(sent[0])
                    for col, value in zip(sent, (base | pos, task_node(r), text, r)):
                        col.append(value)
                    for shard in shards:
                        to_shard.setdefault(shard, ([], []))[0].append(at)
                else:
                    item = (base | pos, _pool_judged(r), text)
                    for shard in shards:
                        to_shard.setdefault(shard, ([], []))[1].append(item)
            elif kind == "task":
                rest.append(r)
    table = JudgedRows.of(*sent)
    for shard, (at, pool) in to_shard.items():
        yield EDGE_ROWS, (shard, (EDGE_ROWS, pack((table.take(at), pool), spill)))
    if pending:
        yield PENDING, (src, (PENDING, pack(pending, spill)))
    for i in range(0, len(rest), chunk):
        yield KEPT, as_chunk(rest[i : i + chunk], spill)


def _positions(pairs: np.ndarray, node_of: dict) -> tuple[list, np.ndarray]:
    """Id pairs -> (node names in id order, the (m, 2) positions of each
    pair's two nodes among them); an id without its row is an error."""
    ids = np.fromiter(node_of, dtype=np.int64, count=len(node_of))
    ids.sort()
    names = list(map(node_of.__getitem__, ids.tolist()))
    at = np.minimum(np.searchsorted(ids, pairs), len(ids) - 1)
    if not (ids[at] == pairs).all():
        raise RuntimeError("near dedup: an edge shard holds an edge without its rows")
    return names, at


def _ranked_edges(pairs: np.ndarray, node_of: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """Id pairs -> (node names in node order, lo, hi): edge k is
    (names[lo[k]], names[hi[k]]), lower node first, the edges sorted: what
    near.sort_edges gives, with the nodes ranked once and the edges
    ordered by rank in numpy instead of comparing strings per edge."""
    names, at = _positions(pairs, node_of)
    by_rank = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[by_rank] = np.arange(len(names))
    ra, rb = rank[at[:, 0]], rank[at[:, 1]]
    lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
    order = np.lexsort((hi, lo))
    return [names[i] for i in by_rank], lo[order], hi[order]


def _id_edges(pairs: np.ndarray, node_of: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """Id pairs -> (node names in id order, lo, hi): edge k joins
    names[lo[k]] and names[hi[k]], the edges sorted by id, so each node's
    edges as the lower id come in a run (jaccard_counts fills its table
    once for them). judge_ranked turns each edge lower node first, so the
    nodes need no ranking by name: sorting ~250,000 node strings per edge
    shard at 1M tasks cost more than the ids' sort."""
    names, at = _positions(pairs, node_of)
    order = np.lexsort((at[:, 1], at[:, 0]))
    return names, at[order, 0], at[order, 1]


def _node_edges(pairs: np.ndarray, node_of: dict) -> list[tuple]:
    """_ranked_edges as (node, node) tuples."""
    names, lo, hi = _ranked_edges(pairs, node_of)
    return [(names[a], names[b]) for a, b in zip(lo.tolist(), hi.tolist())]


def judge_shard(kv, near: NearSettings, spill: Spill | None = None):
    """One edge shard: its edges (node ids) and their rows -> packed [(edge,
    how, similarity, src of a, src of b)] of the confirmed edges, judged on
    node strings, each edge lower node first, as the row path
    (near.judge_edges)."""
    pair_parts, meaning, tasks, pool, pool_ids, node_of, texts, hashes = [], [], _LazyRows(), {}, {}, {}, {}, {}
    for kind, v in kv[1]:
        if kind == EDGES:
            pairs, sem = unpack(v)
            pair_parts.append(pairs)
            meaning += sem
            continue
        rows, pool_rows = unpack(v)
        # ~2 million row copies over the edge shards at 1M tasks: indexed by
        # dict.update over zips, not a Python loop of four stores a row.
        tasks.where.update(zip(rows.nodes, zip(repeat(rows), range(len(rows.ids)))))
        node_of.update(zip(rows.ids, rows.nodes))
        texts.update(zip(rows.nodes, rows.texts))
        hashes.update(zip(rows.nodes, rows.fields[_HASH]))
        for rid, r, text in pool_rows:
            n = r["node"]
            pool[n], pool_ids[n] = r, rid
            node_of[rid], texts[n], hashes[n] = n, text, r["content_hash"]
    pairs = np.concatenate(pair_parts) if pair_parts else np.zeros((0, 2), dtype=np.int64)
    c = Component.of_nodes(tasks, pool, texts, near.p, hashes)
    judged = (near.threshold, near.min_numbers, near.guard_below, near.rules)
    if meaning:  # meaning edges carry a cosine: judged one by one, in edge_order
        edges = sort_edges(_node_edges(pairs, node_of) + [(node_of[e[0]], node_of[e[1]], *e[2:]) for e in meaning])
        confirmed = judge_edges(c, edges, *judged)
    else:
        confirmed = judge_ranked(c, *_id_edges(pairs, node_of), *judged)
    if confirmed:
        # The holders of the confirmed edges' nodes only (~4% of the
        # candidates), each read off its id where the row came in.
        src_of = {n: holder_of(_id_in(tasks, pool_ids, n)) for e, _, _ in confirmed for n in e[:2]}
        yield pack([(e, how, s, src_of[e[0]], src_of[e[1]]) for e, how, s in confirmed], spill)


def _id_in(tasks: _LazyRows, pool_ids: dict, node: str) -> int:
    """The node id of a node an edge shard holds: a task's from its
    JudgedRows, a pool row's as it came."""
    at = tasks.where.get(node)
    return at[0].ids[at[1]] if at is not None else pool_ids[node]


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
    for tag, t in decide_clusters(c, clusters, via, near.p, near.threshold, near.keep_variants):
        (kept if tag == KEPT else dropped).append(t)
    if kept:
        yield KEPT, as_chunk(kept, spill)
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
