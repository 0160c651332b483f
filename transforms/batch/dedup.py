"""The cheap stages on batches, the record side: read -> validate ->
normalise+hash -> exact dedup -> MinHash band records, where each Beam
element is a chunk of tasks or one shard's records as arrays, not a row.

Why: a row-at-a-time Beam graph (the one this engine replaced) moved
every task through ~10 Beam steps and ~20 band records per task through a
GroupByKey, one Python element at a time; at 100k tasks that per-element
cost was most of the run. Here each element is a chunk of up to `CHUNK`
tasks or one shard's records, so Beam handles a few thousand elements
per run instead of millions. batch/near.py does the rest of near dedup;
transforms/batch/stages.py assembles both.

The decisions are the stage packages' Beam-free functions', by construction
(tests/batch/test_batch_decisions.py compares results.parquet with theirs,
tests/plain_stages.py): the same validate_row, first_by_position's order,
content_hash, pick_survivor and band keys (shards.py and signatures.py
reproduce them bit for bit):

1. read+validate+normalise+hash per source file: tasks leave in chunks
   keyed by a shard of their content hash, and small id records (the
   (source, task_id), file, line, hash shard and a row ref) in chunks
   keyed by a shard of the id
2. per id shard: the later rows of each repeated id (first_by_position's
   order), as refs sent to their hash shards   [GroupByKey: repeated ids]
3. per hash shard, tasks and those refs together [GroupByKey: exact dedup]:
   the refs quarantined, pick_survivor per hash, MinHash of all survivors
   at once, bucket records split by bucket shard: one element per shard;
   the survivors themselves are held for the route step (batch/near.py).

Rows cross one GroupByKey before exact dedup, not two: only the id
records go through the repeated-id check (at 1M tasks, one pickling and
unpickling of every task fewer; bench/README.md, "Measured design
choices").

Only Map/FlatMap and keyed GroupByKey are used (no finish_bundle outputs,
no side inputs), so it runs on the DaskRunner too. Memory: no step holds
more than one shard's chunks (shard_count: at most SHARD_TASKS tasks or
1/SHARDS of the pool) in Python objects.
"""

from __future__ import annotations

import numpy as np

from tasksieve.transforms.dedup.exact import pick_survivor
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.near_judge import task_node
from tasksieve.transforms.batch.shards import (
    StringColumn,
    exact_keys,
    shard_of,
    split_by_shard,
    text_bands_sizes_sketches,
)
from tasksieve.transforms.dedup.signatures import sizes_and_sketches
from tasksieve.transforms.dedup.sentences import sentence_matrix
from tasksieve.transforms.normalize import hashed_with_text
from tasksieve.transforms import read as reader  # looked up per call: one reader for both paths
from tasksieve.transforms.same_problem.rules import Rules
from tasksieve.transforms.batch.chunks import Spill, as_chunk, pack, unpack
from tasksieve.transforms.stage import DROPPED, KEPT
from tasksieve.transforms.validate import quarantine_row, repeat_entry, validate_row
from tasksieve.transforms.batch.tags import (
    ROWS,
    QUARANTINE,
    TASKS,
    IDS,
    REPEATS,
    BUCKETS,
    BATCH,
    SEMANTIC,
    SKETCHES,
    TASK_ROWS,
    POOL_ROWS,
)

SHARDS = 32  # id, hash and bucket shards at most: enough for 2-16 workers, 1/32 of a pool per group
# Fewer on a smaller pool (shard_count): each shard costs every stage an
# element, a partly filled chunk and a staged file of its own, whatever
# it holds. One per SHARD_TASKS input tasks, at least MIN_SHARDS: a group
# holds at most max(SHARD_TASKS, pool / SHARDS) tasks (100k pool: 8
# shards: ~4% less time than 32, bench/README.md, "Measured design choices").
SHARD_TASKS, MIN_SHARDS = 12_500, 8
# Near dedup's edge shards (batch/near): a row travels to each edge shard
# holding one of its candidate pairs, and on a templated pool a row's pairs
# grow with the pool, so more shards mean more copies (the 1M bench pool:
# 2.77 million row copies over 32 shards, 1.94 million over 8). An edge
# shard holds its rows, so their number grows with the pool: one per
# EDGE_TASKS input tasks.
EDGE_TASKS, MIN_EDGE_SHARDS = 125_000, 8
POOL_SRC = 1 << 20  # reference-pool row group i is held under POOL_SRC + i; hash shards are below it
POSITION_BITS = 32  # node_ids: the holder above these bits, the row's position in its list below
CHUNK = 2048  # tasks per element: big enough that Beam's per-element cost vanishes
ID_BYTES = 192  # an id record in memory: two tuples and an int (its strings are its task's)
REF_BITS = 40  # read_validated's row refs: the input's index above these bits, the row number below


class IdRecords(list):
    """A chunk of id records (read_validated): a list, whose estimate for
    the memory budget (chunks.Spill.memory_bytes) is ID_BYTES a record,
    not a task's ROW_BYTES: a million of them must not crowd tasks out."""

    @property
    def nbytes(self) -> int:
        return len(self) * ID_BYTES


def _flush(buf: dict, shard: int, chunk: int, spill: Spill | None, tag: str = TASKS, force: bool = False):
    if buf.get(shard) and (force or len(buf[shard]) >= chunk):
        yield tag, (shard, (tag, pack(buf.pop(shard), spill)))


def read_validated(
    item: tuple, max_row_bytes: int, limits: tuple, spill: Spill | None = None, shards: int = SHARDS, chunk: int = CHUNK
):
    """One source file, (its index among the inputs, its path) -> (ROWS, n)
    counts, (QUARANTINE, entry) per bad row, and for the valid tasks both
    (TASKS, (hash shard, (TASKS, [(task, normalised prompt, ref)]))) chunks
    and (IDS, (id shard, (IDS, [((source, task_id), source_file, line,
    hash shard, ref)]))) chunks: the tasks go straight to their content hash's shard,
    and only these small id records to the repeated-id check
    (repeated_ids). `ref` names a row within the run: its input's index
    and its row number. Parsing and validating are per row (each row can
    fail on its own)."""
    index, path = item
    tasks: dict = {}
    ids: dict = {}
    n, base = 0, index << REF_BITS
    for raw in reader.read_source(path, max_row_bytes):
        n += 1
        if n % chunk == 0:
            yield ROWS, chunk
        task, reason = validate_row(raw, *limits)
        if task is None:
            yield QUARANTINE, quarantine_row(raw, reason)
            continue
        task, text = hashed_with_text(task)
        hs = shard_of(task["content_hash"], shards)
        tasks.setdefault(hs, []).append((task, text, base | n))
        yield from _flush(tasks, hs, chunk, spill)
        # The key is the pair, not the joined string: ids may hold \x1f,
        # and ("a", "b\x1fc") and ("a\x1fb", "c") are two ids in one shard.
        key = (task["source"], task["task_id"])
        s = shard_of(f"{key[0]}\x1f{key[1]}", shards)
        ids.setdefault(s, IdRecords()).append((key, task["source_file"], task["line"], hs, base | n))
        yield from _flush(ids, s, chunk, spill, IDS)
    if n % chunk:
        yield ROWS, n % chunk
    for buf, tag in ((tasks, TASKS), (ids, IDS)):
        for s in sorted(buf):
            yield from _flush(buf, s, chunk, spill, tag, force=True)


def repeated_ids(kv):
    """One id shard's id records -> (hash shard, (REPEATS, [(ref, first's
    source_file, first's line)])) for each row whose (source, task_id) an
    earlier row of the delivery has: first_by_position's order, (file,
    line). Those rows are quarantined in their hash shard (exact_and_bands),
    with validate.repeat_entry; the tasks themselves never
    pass through here."""
    records = [r for packed in kv[1] for r in unpack(packed[1])]
    if len(set(r[0] for r in records)) == len(records):  # most shards: no id repeats
        return
    by_key: dict = {}
    for r in records:
        by_key.setdefault(r[0], []).append(r)
    out: dict = {}
    for group in by_key.values():
        if len(group) > 1:
            group.sort(key=lambda r: (r[1], r[2], r[4]))  # (file, line) is unique; the ref only makes the order total
            first = group[0]
            for r in group[1:]:
                out.setdefault(r[3], []).append((r[4], first[1], first[2]))
    for hs in sorted(out):
        yield hs, (REPEATS, out[hs])


def exact_survivors(values: list) -> tuple[list[dict], list[str], list[dict], list[dict]]:
    """(survivors, their normalised prompts, dropped, quarantined) of one
    hash shard's values: chunks of (task, text, ref) (TASKS) and the refs
    of repeated ids (REPEATS, quarantined here: repeat_entry); then
    exact.pick_survivor per hash."""
    repeats = {ref: first for tag, v in values if tag == REPEATS for ref, *first in v}
    by_hash: dict = {}
    quarantined = []
    for tag, packed in values:
        if tag != TASKS:
            continue
        for t, text, ref in unpack(packed):
            if repeats and ref in repeats:
                first_file, first_line = repeats[ref]
                first = {"source": t["source"], "task_id": t["task_id"], "source_file": first_file, "line": first_line}
                quarantined.append(repeat_entry(first, t))
                continue
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
    return kept, texts, dropped, quarantined


def node_ids(src: int, start: int, n: int) -> np.ndarray:
    """Integer ids of rows start..start+n-1 of the one list held under `src`
    (a hash shard, or POOL_SRC + a pool row group): the holder in the high
    bits, the position in the low 32. Near dedup moves these, not the node
    strings, between its shards: where a row is held is read off its id,
    and an edge is two int64s."""
    return node_ids_at(src, np.arange(start, start + n, dtype=np.int64))


def node_ids_at(src: int, positions: np.ndarray) -> np.ndarray:
    """node_ids of the rows at `positions` (int64) of the list held under `src`."""
    return (np.int64(src) << POSITION_BITS) | positions


def holder_of(ids):
    """The holder (`src`) of node ids: an int or an int64 array, as given."""
    return ids >> POSITION_BITS


def position_of(ids):
    """The position in its holder's list of node ids: an int or an int64 array."""
    return ids & ((1 << POSITION_BITS) - 1)


def bucket_records(
    nodes: list[str],
    ids: np.ndarray,
    keys: np.ndarray,
    sizes: np.ndarray,
    spill: Spill | None = None,
    shards: int = SHARDS,
):
    """(BUCKETS, (bucket shard, (keys, nodes, ids, sizes))) per shard: `keys`
    is (n, k) bucket keys of the n `nodes` (node_ids `ids`), `sizes` their
    shingle-set sizes (signatures.signatures_sizes_sketches). The node strings ride along,
    as a shards.StringColumn, for the few buckets too large to pair whole
    (near.bucket_pairs orders their members by node)."""
    k = keys.shape[1]
    flat = (np.repeat(np.arange(len(nodes)), k), np.repeat(ids, k), np.repeat(sizes, k))
    real = keys.reshape(-1) >= 0  # -1 pads rows with fewer keys (sentences.sentence_matrix)
    if not real.all():
        keys, flat = keys.reshape(-1)[real], tuple(f[real] for f in flat)
    for bs, (ks, at, ix, sz) in split_by_shard(keys.reshape(-1), flat[0], shards, *flat[1:]).items():
        ns = StringColumn.of(list(map(nodes.__getitem__, at.tolist())))
        yield BUCKETS, (bs, pack((ks, ns, ix, sz), spill))


def semantic_records(
    nodes: list[str], ids: np.ndarray, texts: list[str], spill: Spill | None = None, shards: int = SHARDS
):
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


def shard_count(configured: int, tasks: int | None, with_pool: bool) -> int:
    """`[dedup] shards`, or for 0 one id, hash and bucket shard per
    SHARD_TASKS input tasks, between MIN_SHARDS and SHARDS; SHARDS when the
    tasks could not be counted, or against a reference pool (its rows'
    bucket records go to the same bucket shards, and a pool may be many
    times the delivery). The decisions are the same for any number."""
    if configured:
        return configured
    if tasks is None or with_pool:
        return SHARDS
    return min(SHARDS, max(MIN_SHARDS, -(-tasks // SHARD_TASKS)))


def edge_shard_count(configured: int, tasks: int | None) -> int:
    """`[dedup] edge_shards`, or for 0 one edge shard per EDGE_TASKS input
    tasks (SHARDS when they could not be counted), at least MIN_EDGE_SHARDS."""
    if configured:
        return configured
    return SHARDS if tasks is None else max(MIN_EDGE_SHARDS, -(-tasks // EDGE_TASKS))


class NearSettings:
    """What near.find_near_duplicates takes, in one picklable object, and the numbers
    of edge shards (edge_shard_count) and of bucket and cluster shards
    (shard_count)."""

    def __init__(
        self,
        p: MinHashParams,
        threshold: float,
        max_bucket_pairs: int = 32,
        within: bool = True,
        min_numbers: float = 0.5,
        guard_below: float = 0.9,
        semantic: bool = False,
        rules: Rules | None = None,
        with_pool: bool = False,
        edge_shards: int = SHARDS,
        shards: int = SHARDS,
        keep_variants: int = 0,
    ):
        self.keep_variants = keep_variants
        self.p, self.threshold, self.max_pairs, self.within = p, threshold, max_bucket_pairs, within
        self.min_numbers, self.guard_below, self.semantic = min_numbers, guard_below, semantic
        self.rules, self.with_pool, self.edge_shards = rules or Rules(), with_pool, edge_shards
        self.shards = shards


def exact_and_bands(kv, near: NearSettings | None, spill: Spill | None = None, chunk: int = CHUNK):
    """One hash shard -> exact-dedup drops, and either kept chunks (no near
    dedup) or the survivors' bucket records (+ semantic texts) and the
    survivors themselves, held for the route step under this shard."""
    src, values = kv
    kept, texts, dropped, quarantined = exact_survivors(values)
    for entry in quarantined:
        yield QUARANTINE, entry
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
    if near is None:
        for i in range(0, len(kept), chunk):
            yield KEPT, as_chunk(kept[i : i + chunk], spill)
        return
    sketched: tuple = ([], [])
    yield from task_records(src, kept, texts, near, spill, sketched)
    yield BATCH, (src, (TASK_ROWS, pack((kept, texts), spill)))
    if kept:
        yield SKETCHES, (src, (SKETCHES, pack(tuple(map(np.concatenate, sketched)), spill)))


def task_records(src, kept: list[dict], texts: list[str], near: NearSettings, spill: Spill | None, sketched: tuple):
    """Bucket (and semantic) records of a shard's survivors, whose normalised
    prompts (minhash.text_of) are `texts`, per chunk so the signature
    matrices stay small. Each chunk's sketches (sketch.py) and content-hash
    codes (exact_keys) are appended to the two lists of `sketched`: held
    under the shard, apart from the rows, for the edge shards' pruning."""
    for i in range(0, len(kept), CHUNK):
        part, part_texts = kept[i : i + CHUNK], texts[i : i + CHUNK]
        nodes, ids = [task_node(t) for t in part], node_ids(src, i, len(part))
        keys, sizes, sketches = text_bands_sizes_sketches(part_texts, near.p)
        if near.within:  # sentence-set buckets (dedup/sentences.py): tasks only
            keys = np.concatenate([keys, sentence_matrix(part_texts)], axis=1)
        codes = exact_keys([t["content_hash"] for t in part])
        sketched[0].append(sketches)
        sketched[1].append(codes)
        if near.with_pool:  # exact copies of pool items (near.task_records)
            keys = np.concatenate([keys, codes[:, None]], axis=1)
        yield from bucket_records(nodes, ids, keys, sizes, spill, near.shards)
        if near.semantic:
            yield from semantic_records(nodes, ids, part_texts, spill, near.shards)


def pool_unit_records(indexed_unit: tuple, near: NearSettings, spill: Spill | None = None):
    """(i, one reference-pool row group) -> its bucket records (precomputed
    bands plus the exact-hash key, as near.pool_records) and the rows, held
    for the route step under POOL_SRC + i."""
    from tasksieve.transforms.dedup.pool_index import read_row_group
    from tasksieve.transforms.batch.shards import bucket_keys

    i, unit = indexed_unit
    rows = list(read_row_group(unit))
    if not rows:
        return
    src = POOL_SRC + i
    nodes, ids, texts = [r["node"] for r in rows], node_ids(src, 0, len(rows)), [r["text"] for r in rows]
    bands = np.array([r["bands"] for r in rows], dtype=np.uint64)
    codes = exact_keys([r["content_hash"] for r in rows])
    keys = np.concatenate([bucket_keys(bands), codes[:, None]], axis=1)
    sizes, sketches = sizes_and_sketches(texts, near.p)
    yield from bucket_records(nodes, ids, keys, sizes, spill, near.shards)
    if near.semantic:
        yield from semantic_records(nodes, ids, texts, spill, near.shards)
    yield BATCH, (src, (POOL_ROWS, pack(rows, spill)))
    yield SKETCHES, (src, (SKETCHES, pack((sketches, codes), spill)))
