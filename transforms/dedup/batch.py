"""The cheap stages on batches, the record side: read -> validate ->
normalise+hash -> exact dedup -> MinHash band records, where each Beam
element is a chunk of tasks or one shard's records as arrays, not a row.

Why: the row path (read.py, validate.py, exact.py, near.py) moves every
task through ~10 Beam steps and ~20 band records per task through a
GroupByKey, one Python element at a time; at 100k tasks that per-element
cost is most of the run. Here each element is a chunk of up to `CHUNK`
tasks or one shard's records, so Beam handles a few thousand elements
per run instead of millions. batch_near.py does the rest of near dedup;
pipeline/cheap_batch.py assembles both.

The decisions are the row path's, by construction (tests/test_batch_dedup.py
compares results.parquet of both): the same validate_row, first_by_position,
content_hash, pick_survivor and band keys (shards.py and signatures.py
reproduce them bit for bit):

1. read+validate per source file; valid tasks leave in chunks keyed by a
   shard of (source, task_id)            [GroupByKey: repeated ids]
2. first of each id; content hash; chunks keyed by a shard of the hash
                                          [GroupByKey: exact dedup]
3. per hash shard: pick_survivor per hash, MinHash of all survivors at
   once, bucket records split by bucket shard: one element per shard;
   the survivors themselves are held for the route step (batch_near.py).

Only Map/FlatMap and keyed GroupByKey are used (no finish_bundle outputs,
no side inputs), so it runs on the DaskRunner too. Memory: no step holds
more than one shard's chunks (1/SHARDS of the pool) in Python objects.
"""

from __future__ import annotations

import numpy as np

from tasksieve.transforms.dedup.exact import pick_survivor
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.near import task_node
from tasksieve.transforms.dedup.shards import StringColumn, exact_keys, shard_of, split_by_shard, text_bands_and_sizes
from tasksieve.transforms.dedup.signatures import set_sizes
from tasksieve.transforms.normalize import hashed_with_text
from tasksieve.transforms import read as reader  # looked up per call: one reader for both paths
from tasksieve.transforms.same_problem.rules import Rules
from tasksieve.transforms.chunks import Spill, as_chunk, pack, unpack
from tasksieve.transforms.stage import DROPPED, KEPT
from tasksieve.transforms.validate import first_by_position, quarantine_row, repeat_entry, validate_row

SHARDS = 32  # id, hash and bucket shards: enough for 2-16 workers, 1/32 of a pool per group
# Near dedup's edge shards (batch_near): a row travels to each edge shard
# holding one of its candidate pairs, and on a templated pool a row's pairs
# grow with the pool, so more shards mean more copies (the 1M bench pool:
# 2.77 million row copies over 32 shards, 1.94 million over 8). An edge
# shard holds its rows, so their number grows with the pool: one per
# EDGE_TASKS input tasks.
EDGE_TASKS, MIN_EDGE_SHARDS = 125_000, 8
POOL_SRC = 1 << 20  # reference-pool row group i is held under POOL_SRC + i; hash shards are below it
POSITION_BITS = 32  # node_ids: the holder above these bits, the row's position in its list below
CHUNK = 2048  # tasks per element: big enough that Beam's per-element cost vanishes
ROWS, QUARANTINE, TASKS = "rows", "quarantine", "tasks"
BUCKETS, BATCH, SEMANTIC = "buckets", "batch", "semantic"



def _flush(buf: dict, shard: int, chunk: int, spill: Spill | None, force: bool = False):
    if buf.get(shard) and (force or len(buf[shard]) >= chunk):
        yield TASKS, (shard, pack(buf.pop(shard), spill))


def read_validated(path: str, max_row_bytes: int, limits: tuple, spill: Spill | None = None, shards: int = SHARDS,
                   chunk: int = CHUNK):
    """One source file -> (ROWS, n) counts, (QUARANTINE, entry) per bad row,
    (TASKS, (id shard, [tasks])) chunks. Parsing and validating are per row
    (each row can fail on its own); everything after is per chunk."""
    buf: dict = {}
    n = 0
    for raw in reader.read_source(path, max_row_bytes):
        n += 1
        if n % chunk == 0:
            yield ROWS, chunk
        task, reason = validate_row(raw, *limits)
        if task is None:
            yield QUARANTINE, quarantine_row(raw, reason)
            continue
        s = shard_of(f"{task['source']}\x1f{task['task_id']}", shards)
        buf.setdefault(s, []).append(task)
        yield from _flush(buf, s, chunk, spill)
    if n % chunk:
        yield ROWS, n % chunk
    for s in sorted(buf):
        yield from _flush(buf, s, chunk, spill, force=True)


def first_and_hash(kv, spill: Spill | None = None, shards: int = SHARDS, chunk: int = CHUNK):
    """One id shard -> the first row of each (source, task_id) (later ones
    quarantined, as validate.ValidateRows), hashed, in hash-shard chunks
    of (task, normalised prompt): the text is made once, here, with the hash."""
    by_id: dict = {}
    for tasks in kv[1]:
        for t in unpack(tasks):
            by_id.setdefault((t["source"], t["task_id"]), []).append(t)
    buf: dict = {}
    for group in by_id.values():
        first, rest = first_by_position(group)
        for t in rest:
            yield QUARANTINE, repeat_entry(first, t)
        first, text = hashed_with_text(first)
        s = shard_of(first["content_hash"], shards)
        buf.setdefault(s, []).append((first, text))
        yield from _flush(buf, s, chunk, spill)
    for s in sorted(buf):
        yield from _flush(buf, s, chunk, spill, force=True)


def exact_survivors(chunks) -> tuple[list[dict], list[str], list[dict]]:
    """(survivors, their normalised prompts, dropped) of one hash shard's
    chunks of (task, text): exact.pick_survivor per hash."""
    by_hash: dict = {}
    for pairs in chunks:
        for t, text in unpack(pairs):
            by_hash.setdefault(t["content_hash"], []).append((t, text))
    kept, texts, dropped = [], [], []
    for group in by_hash.values():
        if len(group) == 1:  # most hashes: the one task survives, as pick_survivor would say
            kept.append(group[0][0])
            texts.append(group[0][1])
            continue
        keep, drop = pick_survivor([t for t, _ in group])
        kept.append(keep)
        texts.append(next(text for t, text in group if t is keep))
        dropped.extend(drop)
    return kept, texts, dropped


def node_ids(src: int, start: int, n: int) -> np.ndarray:
    """Integer ids of rows start..start+n-1 of the one list held under `src`
    (a hash shard, or POOL_SRC + a pool row group): the holder in the high
    bits, the position in the low 32. Near dedup moves these, not the node
    strings, between its shards: where a row is held is read off its id,
    and an edge is two int64s."""
    return (np.int64(src) << POSITION_BITS) | np.arange(start, start + n, dtype=np.int64)


def holder_of(ids):
    """The holder (`src`) of node ids: an int or an int64 array, as given."""
    return ids >> POSITION_BITS


def position_of(ids):
    """The position in its holder's list of node ids: an int or an int64 array."""
    return ids & ((1 << POSITION_BITS) - 1)


def bucket_records(nodes: list[str], ids: np.ndarray, keys: np.ndarray, sizes: np.ndarray,
                   spill: Spill | None = None, shards: int = SHARDS):
    """(BUCKETS, (bucket shard, (keys, nodes, ids, sizes))) per shard: `keys`
    is (n, k) bucket keys of the n `nodes` (node_ids `ids`), `sizes` their
    shingle-set sizes (signatures.set_sizes). The node strings ride along,
    as a shards.StringColumn, for the few buckets too large to pair whole
    (near.bucket_pairs orders their members by node)."""
    k = keys.shape[1]
    flat = (np.repeat(np.arange(len(nodes)), k), np.repeat(ids, k), np.repeat(sizes, k))
    for bs, (ks, at, ix, sz) in split_by_shard(keys.reshape(-1), flat[0], shards, *flat[1:]).items():
        ns = StringColumn.of(list(map(nodes.__getitem__, at.tolist())))
        yield BUCKETS, (bs, pack((ks, ns, ix, sz), spill))


def semantic_records(nodes: list[str], ids: np.ndarray, texts: list[str], spill: Spill | None = None,
                     shards: int = SHARDS):
    """(SEMANTIC, (key shard, {quantity key: [(node, id, text)]})): one
    record per key shard per chunk. Quantity groups are many and mostly of
    one task, so they travel sharded, not one Beam element per group."""
    from tasksieve.transforms.dedup.semantic import quantity_key

    by_shard: dict = {}
    for n, i, t in zip(nodes, ids.tolist(), texts):
        key = quantity_key(t)
        by_shard.setdefault(shard_of(key, shards), {}).setdefault(key, []).append((n, i, t))
    for shard, groups in by_shard.items():
        yield SEMANTIC, (shard, pack(groups, spill))


def edge_shard_count(configured: int, tasks: int | None) -> int:
    """`[dedup] edge_shards`, or for 0 one edge shard per EDGE_TASKS input
    tasks (SHARDS when they could not be counted), at least MIN_EDGE_SHARDS."""
    if configured:
        return configured
    return SHARDS if tasks is None else max(MIN_EDGE_SHARDS, -(-tasks // EDGE_TASKS))


class NearSettings:
    """What near.NearDedup takes, in one picklable object, and the number of
    edge shards (edge_shard_count)."""

    def __init__(self, p: MinHashParams, threshold: float, max_bucket_pairs: int = 32, within: bool = True,
                 min_numbers: float = 0.5, guard_below: float = 0.9, semantic: bool = False,
                 rules: Rules | None = None, with_pool: bool = False, edge_shards: int = SHARDS):
        self.p, self.threshold, self.max_pairs, self.within = p, threshold, max_bucket_pairs, within
        self.min_numbers, self.guard_below, self.semantic = min_numbers, guard_below, semantic
        self.rules, self.with_pool, self.edge_shards = rules or Rules(), with_pool, edge_shards


def exact_and_bands(kv, near: NearSettings | None, spill: Spill | None = None, chunk: int = CHUNK):
    """One hash shard -> exact-dedup drops, and either kept chunks (no near
    dedup) or the survivors' bucket records (+ semantic texts) and the
    survivors themselves, held for the route step under this shard."""
    src, chunks = kv
    kept, texts, dropped = exact_survivors(chunks)
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
    if near is None:
        for i in range(0, len(kept), chunk):
            yield KEPT, as_chunk(kept[i : i + chunk], spill)
        return
    yield from task_records(src, kept, texts, near, spill)
    yield BATCH, (src, ("task", pack((kept, texts), spill)))


def task_records(src, kept: list[dict], texts: list[str], near: NearSettings, spill: Spill | None = None):
    """Bucket (and semantic) records of a shard's survivors, whose normalised
    prompts (minhash.text_of) are `texts`, per chunk so the signature
    matrices stay small."""
    for i in range(0, len(kept), CHUNK):
        part, part_texts = kept[i : i + CHUNK], texts[i : i + CHUNK]
        nodes, ids = [task_node(t) for t in part], node_ids(src, i, len(part))
        keys, sizes = text_bands_and_sizes(part_texts, near.p)
        if near.with_pool:  # exact copies of pool items (near.task_records)
            keys = np.concatenate([keys, exact_keys([t["content_hash"] for t in part])[:, None]], axis=1)
        yield from bucket_records(nodes, ids, keys, sizes, spill)
        if near.semantic:
            yield from semantic_records(nodes, ids, part_texts, spill)


def pool_unit_records(indexed_unit: tuple, near: NearSettings, spill: Spill | None = None):
    """(i, one reference-pool row group) -> its bucket records (precomputed
    bands plus the exact-hash key, as near.pool_records) and the rows, held
    for the route step under POOL_SRC + i."""
    from tasksieve.transforms.dedup.pool_index import read_row_group
    from tasksieve.transforms.dedup.shards import bucket_keys

    i, unit = indexed_unit
    rows = list(read_row_group(unit))
    if not rows:
        return
    src = POOL_SRC + i
    nodes, ids, texts = [r["node"] for r in rows], node_ids(src, 0, len(rows)), [r["text"] for r in rows]
    bands = np.array([r["bands"] for r in rows], dtype=np.uint64)
    keys = np.concatenate([bucket_keys(bands), exact_keys([r["content_hash"] for r in rows])[:, None]], axis=1)
    yield from bucket_records(nodes, ids, keys, set_sizes(texts, near.p), spill)
    if near.semantic:
        yield from semantic_records(nodes, ids, texts, spill)
    yield BATCH, (src, ("pool", pack(rows, spill)))


