"""The cheap stages on batches: read -> validate -> normalise+hash -> exact
dedup -> near dedup (+ against reference pools), with Beam elements that
are lists of tasks and numpy arrays, not single rows.

Why: the row path (read.py, validate.py, exact.py, near.py) moves every
task through ~10 Beam steps and ~20 band records per task through a
GroupByKey, one Python element at a time; at 100k tasks that per-element
cost is most of the run. Here each element is a chunk of up to `CHUNK`
tasks, or one shard's bucket records as arrays, so Beam handles
thousands of elements per run instead of millions.

The decisions are the row path's, by construction (tests/test_batch_dedup.py
compares results.parquet of both): the same validate_row, first_by_position,
content_hash, pick_survivor, band keys (shards.py reproduces them
bit for bit), bucket_pairs, ComponentsFn and resolve_component. Only the
plumbing between them changes:

1. read+validate per source file; valid tasks leave in chunks keyed by a
   shard of (source, task_id)            [GroupByKey #1: repeated ids]
2. first of each id; content hash; chunks keyed by a shard of the hash
                                          [GroupByKey #2: exact dedup]
3. per hash shard: pick_survivor per hash, MinHash of all survivors at
   once, bucket records split by bucket shard: one element per shard
                                          [GroupByKey #3: buckets]
4. per bucket shard: collisions found with one sort; candidate edges, and
   for each node in an edge the hash shard that holds it ("where")
5. edges -> components (one combiner, as near.py); roots joined with
   "where" by node, then sent to their hash shard  [GroupByKey #4, #5]
6. per hash shard: tasks in a component go to its root, the rest leave
   as a kept chunk                        [GroupByKey #6: route]
7. per component: resolve_component       [GroupByKey #7: components]

Only Map/FlatMap and keyed GroupByKey are used (no finish_bundle outputs,
no multi-output ParDo, no side inputs), so it runs on the DaskRunner too.
Memory: no step holds more than one shard's chunks (a 1/SHARDS share of
the pool) in Python objects; the runner's shuffle buffers hold the rest.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from tasksieve.transforms.dedup.exact import pick_survivor
from tasksieve.transforms.dedup.minhash import MinHashParams, text_of
from tasksieve.transforms.dedup.near import (ComponentsFn, bucket_pairs, component_messages, resolve_component,
                                              task_node)
from tasksieve.transforms.dedup.shards import buckets, exact_keys, shard_of, split_by_shard, text_bands
from tasksieve.transforms.normalize import with_hash
from tasksieve.transforms.read import read_source
from tasksieve.transforms.same_problem.rules import Rules
from tasksieve.transforms.stage import split_tagged
from tasksieve.transforms.validate import first_by_position, quarantine_row, repeat_entry, validate_row

SHARDS = 32  # id, hash and bucket shards: enough for 2-16 workers, 1/32 of a pool per group
CHUNK = 2048  # tasks per element: big enough that Beam's per-element cost vanishes
ROWS, QUARANTINE, TASKS, DROPPED, KEPT = "rows", "quarantine", "tasks", "dropped", "kept"
BUCKETS, BATCH, SEMANTIC, EDGE, WHERE = "buckets", "batch", "semantic", "edge", "where"


def _flush(buf: dict, shard: int, chunk: int, force: bool = False):
    if buf.get(shard) and (force or len(buf[shard]) >= chunk):
        yield TASKS, (shard, buf.pop(shard))


def read_validated(path: str, max_row_bytes: int, limits: tuple, shards: int = SHARDS, chunk: int = CHUNK):
    """One source file -> (ROWS, n) counts, (QUARANTINE, entry) per bad row,
    (TASKS, (id shard, [tasks])) chunks. Parsing and validating are per row
    (each row can fail on its own); everything after is per chunk."""
    buf: dict = {}
    n = 0
    for raw in read_source(path, max_row_bytes):
        n += 1
        if n % chunk == 0:
            yield ROWS, chunk
        task, reason = validate_row(raw, *limits)
        if task is None:
            yield QUARANTINE, quarantine_row(raw, reason)
            continue
        s = shard_of(f"{task['source']}\x1f{task['task_id']}", shards)
        buf.setdefault(s, []).append(task)
        yield from _flush(buf, s, chunk)
    if n % chunk:
        yield ROWS, n % chunk
    for s in sorted(buf):
        yield from _flush(buf, s, chunk, force=True)


def first_and_hash(kv, shards: int = SHARDS, chunk: int = CHUNK):
    """One id shard -> the first row of each (source, task_id) (later ones
    quarantined, as validate.ValidateRows), hashed, in hash-shard chunks."""
    by_id: dict = {}
    for tasks in kv[1]:
        for t in tasks:
            by_id.setdefault((t["source"], t["task_id"]), []).append(t)
    buf: dict = {}
    for group in by_id.values():
        first, rest = first_by_position(group)
        for t in rest:
            yield QUARANTINE, repeat_entry(first, t)
        first = with_hash(first)
        s = shard_of(first["content_hash"], shards)
        buf.setdefault(s, []).append(first)
        yield from _flush(buf, s, chunk)
    for s in sorted(buf):
        yield from _flush(buf, s, chunk, force=True)


def exact_survivors(chunks) -> tuple[list[dict], list[dict]]:
    """(survivors, dropped) of one hash shard: exact.pick_survivor per hash."""
    by_hash: dict = {}
    for tasks in chunks:
        for t in tasks:
            by_hash.setdefault(t["content_hash"], []).append(t)
    kept, dropped = [], []
    for group in by_hash.values():
        keep, drop = pick_survivor(group)
        kept.append(keep)
        dropped.extend(drop)
    return kept, dropped


def bucket_records(src, nodes: list[str], keys: np.ndarray, shards: int = SHARDS):
    """(BUCKETS, (bucket shard, (src, keys, nodes))) per shard: `keys` is
    (n, k) bucket keys of the n `nodes`; `src` names the shard holding them."""
    flat_nodes = np.repeat(np.array(nodes, dtype=object), keys.shape[1])
    for bs, (ks, ns) in split_by_shard(keys.reshape(-1), flat_nodes, shards).items():
        yield BUCKETS, (bs, (src, ks, ns))


def semantic_records(src, nodes: list[str], texts: list[str]):
    """(SEMANTIC, (quantity key, [(node, text, src)])): one per key per chunk.
    Quantity groups are many and small, so this stays a per-group record."""
    from tasksieve.transforms.dedup.semantic import quantity_key

    groups: dict = {}
    for n, t in zip(nodes, texts):
        groups.setdefault(quantity_key(t), []).append((n, t, src))
    for key, members in groups.items():
        yield SEMANTIC, (key, members)


class NearSettings:
    """What near.NearDedup takes, in one picklable object."""

    def __init__(self, p: MinHashParams, threshold: float, max_bucket_pairs: int = 32, within: bool = True,
                 min_numbers: float = 0.5, guard_below: float = 0.9, semantic: bool = False,
                 rules: Rules | None = None, with_pool: bool = False):
        self.p, self.threshold, self.max_pairs, self.within = p, threshold, max_bucket_pairs, within
        self.min_numbers, self.guard_below, self.semantic = min_numbers, guard_below, semantic
        self.rules, self.with_pool = rules or Rules(), with_pool


def exact_and_bands(kv, near: NearSettings | None, chunk: int = CHUNK):
    """One hash shard -> exact-dedup drops, and either kept chunks (no near
    dedup) or the survivors' bucket records (+ semantic texts) and the
    survivors themselves, held for the route step under this shard."""
    src, chunks = kv
    kept, dropped = exact_survivors(chunks)
    for d in dropped:
        yield DROPPED, d
    if near is None:
        for i in range(0, len(kept), chunk):
            yield KEPT, kept[i : i + chunk]
        return
    yield from task_records(src, kept, near)
    yield BATCH, (src, ("task", kept))


def task_records(src, kept: list[dict], near: NearSettings):
    """Bucket (and semantic) records of a shard's survivors, per chunk so the
    signature matrices stay small."""
    for i in range(0, len(kept), CHUNK):
        part = kept[i : i + CHUNK]
        nodes = [task_node(t) for t in part]
        texts = [text_of(t) for t in part]
        keys = text_bands(texts, near.p)
        if near.with_pool:  # exact copies of pool items (near.task_records)
            keys = np.concatenate([keys, exact_keys([t["content_hash"] for t in part])[:, None]], axis=1)
        yield from bucket_records(src, nodes, keys)
        if near.semantic:
            yield from semantic_records(src, nodes, texts)


def pool_unit_records(unit, near: NearSettings):
    """One reference-pool row group -> its bucket records (precomputed bands
    plus the exact-hash key, as near.pool_records) and the rows, held for
    the route step under ("pool", file, row group)."""
    from tasksieve.transforms.dedup.pool_index import read_row_group

    rows = list(read_row_group(unit))
    if not rows:
        return
    src = ("pool", *unit)
    nodes = [r["node"] for r in rows]
    bands = np.array([r["bands"] for r in rows], dtype=np.uint64)
    from tasksieve.transforms.dedup.shards import bucket_keys

    keys = np.concatenate([bucket_keys(bands), exact_keys([r["content_hash"] for r in rows])[:, None]], axis=1)
    yield from bucket_records(src, nodes, keys)
    if near.semantic:
        yield from semantic_records(src, nodes, [r["text"] for r in rows])
    yield BATCH, (src, ("pool", rows))


def band_shard_edges(kv, near: NearSettings):
    """One bucket shard -> (EDGE, edge) for each candidate edge and (WHERE,
    (node, src)) for each node in one: the shard the route step finds it in."""
    parts = list(kv[1])
    keys = np.concatenate([ks for _, ks, _ in parts])
    nodes = np.concatenate([ns for _, _, ns in parts])
    srcs = np.concatenate([np.full(ks.shape[0], i) for i, (_, ks, _) in enumerate(parts)])
    where: dict = {}
    for idx in buckets(keys):
        edges = list(bucket_pairs(nodes[idx].tolist(), near.max_pairs, near.within))
        in_edge = {x for e in edges for x in e}
        for i in idx:
            if nodes[i] in in_edge:
                where[nodes[i]] = parts[srcs[i]][0]
        for e in edges:
            yield EDGE, e
    for node, src in where.items():
        yield WHERE, (node, src)


def semantic_group_edges(kv, near: NearSettings):
    """One quantity group -> semantic.semantic_edges, plus WHERE records."""
    from tasksieve.transforms.dedup.semantic import semantic_edges

    members = [m for ms in kv[1] for m in ms]
    src_of = {n: s for n, _, s in members}
    edges = semantic_edges([(n, t) for n, t, _ in members], kv[0], near.p, near.threshold, near.rules, near.within)
    for e in edges:
        yield EDGE, e
    for n in sorted({x for e in edges for x in e[:2]}):
        yield WHERE, (n, src_of[n])


def roots_to_shards(kv):
    """node -> [('root', r), ('where', src)...] => (src, (node, root))."""
    root, srcs = None, set()
    for kind, v in kv[1]:
        if kind == "root":
            root = v
        else:
            srcs.add(v)
    if root is not None:
        for s in srcs:
            yield s, ("root", (kv[0], root))


def route(kv, chunk: int = CHUNK):
    """One shard's held rows and its nodes' roots -> ('cluster', (root,
    (kind, row))) for rows in a component, KEPT chunks of the other tasks
    (pool rows outside every component are done with)."""
    roots, held = {}, []
    for v in kv[1]:
        if v[0] in ("task", "pool"):
            held.append(v)
        else:
            roots[v[1][0]] = v[1][1]
    rest = []
    for kind, rows in held:
        for r in rows:
            n = task_node(r) if kind == "task" else r["node"]
            if n in roots:
                yield "cluster", (roots[n], (kind, r))
            elif kind == "task":
                rest.append(r)
    for i in range(0, len(rest), chunk):
        yield KEPT, rest[i : i + chunk]


def resolve(kv, near: NearSettings):
    """One component -> near.resolve_component, as NearDedup's Resolve step."""
    tasks_, pool_, edges_ = [], [], []
    for kind, v in kv[1]:
        if kind == "task":
            tasks_.append(v)
        elif kind == "pool":
            pool_.append(v)
        else:
            edges_ = v
    for tag, t in resolve_component(tasks_, pool_, edges_, near.p, near.threshold, near.min_numbers,
                                    near.guard_below, near.rules):
        yield (KEPT, [t]) if tag == KEPT else (DROPPED, t)


class BatchDedup(beam.PTransform):
    """Source paths in; {ROWS: counts, QUARANTINE: entries, DROPPED: rows,
    KEPT: chunks of surviving tasks} out. `near` None: exact dedup only;
    `pool_units` (file, row group) of saved reference-pool indexes."""

    def __init__(self, paths: list[str], max_row_bytes: int, limits: tuple, near: NearSettings | None,
                 pool_units: list | None = None):
        super().__init__()
        self.paths, self.max_row_bytes, self.limits = paths, max_row_bytes, limits
        self.near, self.pool_units = near, pool_units or []

    def expand(self, pbegin):
        read = split_tagged(
            pbegin | "Paths" >> beam.Create(self.paths) | "Spread" >> beam.Reshuffle()
            | "ReadValidate" >> beam.FlatMap(read_validated, self.max_row_bytes, self.limits),
            "ReadSplit", (ROWS, QUARANTINE, TASKS))
        ided = split_tagged(
            read[TASKS] | "GroupIds" >> beam.GroupByKey() | "FirstAndHash" >> beam.FlatMap(first_and_hash),
            "IdSplit", (QUARANTINE, TASKS))
        quarantine = (read[QUARANTINE], ided[QUARANTINE]) | "AllQuarantine" >> beam.Flatten()
        out = split_tagged(
            ided[TASKS] | "GroupHashes" >> beam.GroupByKey()
            | "ExactAndBands" >> beam.FlatMap(exact_and_bands, self.near),
            "ExactSplit", (DROPPED, KEPT, BUCKETS, SEMANTIC, BATCH))
        dropped, kept = [out[DROPPED]], [out[KEPT]]
        if self.near is not None:
            near_kept, near_dropped = self._near(pbegin, out)
            kept.append(near_kept)
            dropped.append(near_dropped)
        return {ROWS: read[ROWS], QUARANTINE: quarantine,
                DROPPED: tuple(dropped) | "AllDropped" >> beam.Flatten(),
                KEPT: tuple(kept) | "AllKept" >> beam.Flatten()}

    def _near(self, pbegin, out):
        near = self.near
        buckets_, semantic, held = [out[BUCKETS]], [out[SEMANTIC]], [out[BATCH]]
        if self.pool_units:
            pool = split_tagged(
                pbegin | "PoolUnits" >> beam.Create(self.pool_units)
                | "PoolRecords" >> beam.FlatMap(pool_unit_records, near),
                "PoolSplit", (BUCKETS, SEMANTIC, BATCH))
            buckets_.append(pool[BUCKETS])
            semantic.append(pool[SEMANTIC])
            held.append(pool[BATCH])
        found = [tuple(buckets_) | "AllBuckets" >> beam.Flatten() | "GroupBuckets" >> beam.GroupByKey()
                 | "BucketEdges" >> beam.FlatMap(band_shard_edges, near)]
        if near.semantic:
            found.append(tuple(semantic) | "AllSemantic" >> beam.Flatten() | "GroupQuantities" >> beam.GroupByKey()
                         | "SemanticEdges" >> beam.FlatMap(semantic_group_edges, near))
        found = split_tagged(tuple(found) | "AllFound" >> beam.Flatten(), "FoundSplit", (EDGE, WHERE))
        messages = (found[EDGE] | "DistinctEdges" >> beam.Distinct()
                    | "Components" >> beam.CombineGlobally(ComponentsFn())
                    | "ComponentMessages" >> beam.FlatMap(component_messages))
        roots = (messages | "Roots" >> beam.Filter(lambda kv: kv[1][0] == "root"),
                 found[WHERE] | "WhereMsg" >> beam.Map(lambda nw: (nw[0], ("where", nw[1]))))
        to_shards = roots | "RootsAndWhere" >> beam.Flatten() | "GroupNodes" >> beam.GroupByKey() \
            | "RootsToShards" >> beam.FlatMap(roots_to_shards)
        routed = split_tagged(
            (*held, to_shards) | "HeldAndRoots" >> beam.Flatten() | "GroupShards" >> beam.GroupByKey()
            | "Route" >> beam.FlatMap(route), "RouteSplit", (KEPT, "cluster"))
        comp_edges = messages | "Edges" >> beam.Filter(lambda kv: kv[1][0] == "edges")
        resolved = split_tagged(
            (routed["cluster"], comp_edges) | "JoinComponents" >> beam.Flatten()
            | "GroupComponents" >> beam.GroupByKey() | "Resolve" >> beam.FlatMap(resolve, near),
            "ResolveSplit", (KEPT, DROPPED))
        kept = (routed[KEPT], resolved[KEPT]) | "NearKept" >> beam.Flatten()
        return kept, resolved[DROPPED]
