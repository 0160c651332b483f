"""Near dedup of the batch path: candidate edges per bucket shard, each
edge judged where its two rows meet, then clusters of confirmed edges
decided where their members meet. Every Beam element is a shard's worth
of records, never one edge, node or task, so Beam's per-element cost is
paid a few hundred times per run, not millions.

The decisions are near.py's: the same bucket_pairs, semantic_edges,
judge_edges, best_links and decide_clusters (tests/batch/test_batch_decisions.py
compares the decisions). find_near_duplicates judges edges per connected component
of *candidate* edges; on a pool built from shared templates those
percolate into one component holding a large share of the pool (15% at
100k tasks), which one worker would hold in memory. A judgement needs
only its edge's two rows, so here edges are judged in edge shards and
only *confirmed* edges are joined into clusters.

Rows are named by integer ids (batch.node_ids: the holder, a hash shard
or a pool row group, and the position in its list) until their rows meet
in an edge shard, so candidate edges travel as int64 arrays and where a
row is held is read off its id; edges are judged on node strings, each
lower node first, exactly as near.py.

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

from tasksieve.transforms.batch.chunks import ROW_BYTES, Spill, as_chunk, pack, unpack
from tasksieve.transforms.batch.dedup import CHUNK, POSITION_BITS, NearSettings, holder_of, node_ids_at, position_of
from tasksieve.transforms.dedup.near import sort_edges
from tasksieve.transforms.dedup.near_judge import Component, judge_edges, judge_ranked, task_node
from tasksieve.transforms.dedup.near_rule import FAR_UNDER
from tasksieve.transforms.batch.sketch import could_reach
from tasksieve.transforms.same_problem.relation import jaccard_floor
from tasksieve.transforms.stage import KEPT
from tasksieve.transforms.batch.tags import SKETCHES, NEEDS, EDGES, EDGE_ROWS, PENDING, ASKS, SKETCHED, TASK_ROWS


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
        pairs = pairs[could_reach(sketches, a, b, jaccard_floor(near.threshold) - FAR_UNDER) | (codes[a] == codes[b])]
    yield shard, (EDGES, pack((pairs, meaning), spill))
    yield from _per_holder(NEEDS, shard, _edge_ids(pairs, meaning), spill)


class PackedParts(beam.CombineFn):
    """Accumulators are lists of packed parts, so the runner moves a few
    blobs, not every edge as an object; `extract_output` sees all parts."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, part):
        acc.append(part)
        return acc

    def merge_accumulators(self, accs):
        return [part for acc in accs for part in acc]


def row_node(kind: str, row: dict) -> str:
    return task_node(row) if kind == TASK_ROWS else row["node"]


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
        rows, texts = rows if kind == TASK_ROWS else (rows, [r["text"] for r in rows])
        for pos, (r, text) in enumerate(zip(rows, texts)):
            shards = wanted.get(pos)
            if shards is not None:
                pending.append((kind, r))
                if kind == TASK_ROWS:
                    at = len(sent[0])
                    for col, value in zip(sent, (base | pos, task_node(r), text, r)):
                        col.append(value)
                    for shard in shards:
                        to_shard.setdefault(shard, ([], []))[0].append(at)
                else:
                    item = (base | pos, _pool_judged(r), text)
                    for shard in shards:
                        to_shard.setdefault(shard, ([], []))[1].append(item)
            elif kind == TASK_ROWS:
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
    node strings, each edge lower node first, as near.py does
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
