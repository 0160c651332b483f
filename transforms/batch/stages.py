"""The cheap segment of the graph (read .. decontaminate), the batch engine:
graph.build calls `batch_cheap_stages` and gets back clean, dropped and
quarantined tasks and the row counts, with tasks in chunks.
Design and memory budget: docs/scaling.md."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam

from tasksieve.transforms.batch.chunks import Spill
from tasksieve.transforms.batch.decontam import DecontaminateChunks
from tasksieve.transforms.decontam.index import index_spec
from tasksieve.transforms.batch.dedup import (
    SHARDS,
    NearSettings,
    edge_shard_count,
    exact_and_bands,
    pool_unit_records,
    read_validated,
    repeated_ids,
    shard_count,
)
from tasksieve.transforms.batch.clusters import ClustersFn, cluster_messages, resolve_clusters, route_clusters
from tasksieve.transforms.batch.candidates import band_shard_found, semantic_shard_found
from tasksieve.transforms.batch.near import edge_shard_found, judge_shard, prune_shard, route_candidates, send_sketches
from tasksieve.transforms.dedup.minhash import params_from_config
from tasksieve.transforms.dedup.pool_index import index_row_groups
from tasksieve.transforms.progress import Progress
from tasksieve.transforms.read import CountInputRows, count_rows
from tasksieve.transforms.dedup.near_rule import near_options
from tasksieve.transforms.stage import DROPPED, KEPT, split_tagged, write_count
from tasksieve.transforms.batch.tags import (
    ROWS,
    QUARANTINE,
    TASKS,
    IDS,
    BUCKETS,
    BATCH,
    SEMANTIC,
    SKETCHES,
    NEEDS,
    EDGES,
    EDGE_ROWS,
    PENDING,
    ASKS,
    MEMBERS,
)


def near_settings(cfg, with_pool: bool, tasks: int | None = None, shards: int = SHARDS) -> NearSettings | None:
    """find_near_duplicates' arguments (near_rule.near_options), the edge shards
    for `tasks` input tasks and the bucket and cluster shards (`shards`,
    the hash shards' number); None when the near stage does not run."""
    if not (cfg.dedup.near or with_pool):
        return None
    return NearSettings(
        params_from_config(cfg.dedup),
        cfg.dedup.threshold,
        with_pool=with_pool,
        edge_shards=edge_shard_count(cfg.dedup.edge_shards, tasks),
        shards=shards,
        **near_options(cfg.dedup, cfg.decontam),
    )


def _input_rows(paths: list[str], max_row_bytes: int) -> int | None:
    """Rows in the inputs (count_rows): the progress ETA's bound, the edge
    shards' number and the accounting check's count (None if any cannot
    be counted: then the pipeline counts them itself)."""
    try:
        return sum(count_rows(p, max_row_bytes) for p in paths)
    except Exception:  # the pipeline reports unreadable inputs itself
        return None


def _shards(label: str, shards: int = SHARDS) -> beam.ParDo:
    """Progress of a step that takes one shard per element (after a GroupByKey)."""
    return beam.ParDo(Progress(label, shards, chunks=False, unit="shards"))


def _kind(kind: str):
    return lambda kv: kv[1][0] == kind


def near_stage(p: beam.Pipeline, out: dict, near: NearSettings, units: list, spill: Spill | None):
    """(kept chunks, dropped chunks) of near dedup (transforms/batch/near.py)."""
    buckets, semantic, held, sketches = [out[BUCKETS]], [out[SEMANTIC]], [out[BATCH]], [out[SKETCHES]]
    if units:
        pool = split_tagged(
            p
            | "PoolUnits" >> beam.Create(list(enumerate(units)))
            | "PoolRecords" >> beam.FlatMap(pool_unit_records, near, spill),
            "PoolSplit",
            (BUCKETS, SEMANTIC, BATCH, SKETCHES),
        )
        buckets.append(pool[BUCKETS])
        semantic.append(pool[SEMANTIC])
        held.append(pool[BATCH])
        sketches.append(pool[SKETCHES])
    found = [
        tuple(buckets)
        | "AllBuckets" >> beam.Flatten()
        | "GroupBuckets" >> beam.GroupByKey()
        | "BucketProgress" >> _shards("near dedup: bucket shards", near.shards)
        | "BucketEdges" >> beam.FlatMap(band_shard_found, near, spill)
    ]
    if near.semantic:
        found.append(
            tuple(semantic)
            | "AllSemantic" >> beam.Flatten()
            | "GroupQuantities" >> beam.GroupByKey()
            | "SemanticProgress" >> _shards("near dedup: meaning key shards", near.shards)
            | "SemanticEdges" >> beam.FlatMap(semantic_shard_found, near, spill)
        )
    candidates = (
        tuple(found)
        | "AllFound" >> beam.Flatten()
        | "GroupEdges" >> beam.GroupByKey()
        | "EdgeShards" >> beam.FlatMap(edge_shard_found, spill)
    )
    # Sketches first (transforms/batch/sketch.py): the edges they rule out
    # never move a row.
    asks = candidates | "Asks" >> beam.Filter(_kind(ASKS))
    sent = (
        (*sketches, asks)
        | "SketchesAndAsks" >> beam.Flatten()
        | "GroupSketches" >> beam.GroupByKey()
        | "SendSketches" >> beam.FlatMap(send_sketches, spill)
    )
    pruned = (
        (candidates | "Candidates" >> beam.Filter(_kind(EDGES)), sent)
        | "EdgesAndSketches" >> beam.Flatten()
        | "GroupPrune" >> beam.GroupByKey()
        | "PruneProgress" >> _shards("near dedup: edge shards pruned", near.edge_shards)
        | "Prune" >> beam.FlatMap(prune_shard, near, spill)
    )
    needs = pruned | "Needs" >> beam.Filter(_kind(NEEDS))
    routed = split_tagged(
        (*held, needs)
        | "HeldAndNeeds" >> beam.Flatten()
        | "GroupHeld" >> beam.GroupByKey()
        | "RouteCandidates" >> beam.FlatMap(route_candidates, spill),
        "RouteSplit",
        (KEPT, EDGE_ROWS, PENDING),
    )
    edges = pruned | "Edges" >> beam.Filter(_kind(EDGES))
    clusters = (
        (routed[EDGE_ROWS], edges)
        | "RowsAndEdges" >> beam.Flatten()
        | "GroupEdgeShards" >> beam.GroupByKey()
        | "JudgeProgress" >> _shards("near dedup: edge shards judged", near.edge_shards)
        | "Judge" >> beam.FlatMap(judge_shard, near, spill)
        # Without defaults: with them, Beam hands the one output on
        # as a side input, and its state cache measures every object
        # in it (objsize) each time it is read: the whole cluster map.
        # No confirmed edge, no output, no message: the same result.
        | "Clusters" >> beam.CombineGlobally(ClustersFn()).without_defaults()
        | "ClusterMessages" >> beam.FlatMap(cluster_messages, spill)
    )
    members = split_tagged(
        (routed[PENDING], clusters)
        | "PendingAndClusters" >> beam.Flatten()
        | "GroupPending" >> beam.GroupByKey()
        | "RouteClusters" >> beam.FlatMap(route_clusters, spill, near.shards),
        "MemberSplit",
        (KEPT, MEMBERS),
    )
    resolved = split_tagged(
        members[MEMBERS]
        | "GroupClusters" >> beam.GroupByKey()
        | "ResolveProgress" >> _shards("near dedup: cluster shards decided", near.shards)
        | "Resolve" >> beam.FlatMap(resolve_clusters, near, spill),
        "ResolveSplit",
        (KEPT, DROPPED),
    )
    kept = (routed[KEPT], members[KEPT], resolved[KEPT]) | "NearKept" >> beam.Flatten()
    return kept, resolved[DROPPED]


def batch_cheap_stages(p: beam.Pipeline, spec, rows_counted_file: str, rows_read_file: str):
    """(chunks of clean tasks, [chunks of dropped tasks], quarantined rows,
    row counts), with tasks in lists."""
    cfg, lim, staging, spill = spec.config, spec.config.limits, Path(spec.staging_dir), spec.spill
    limits = (lim.max_field_chars, lim.max_expert_minutes, lim.max_expert_cost_usd)
    units = [u for path in spec.pool_indexes for u in index_row_groups(path)]
    total = _input_rows(spec.inputs, lim.max_row_bytes)  # every stage sees at most this many
    shards = shard_count(cfg.dedup.shards, total, bool(units))
    near = near_settings(cfg, bool(units), total, shards)
    read = split_tagged(
        p
        | "Paths" >> beam.Create(list(enumerate(spec.inputs)))
        | "Spread" >> beam.Reshuffle()
        | "ReadValidate" >> beam.FlatMap(read_validated, lim.max_row_bytes, limits, spill, shards),
        "ReadSplit",
        (ROWS, QUARANTINE, TASKS, IDS),
    )
    # Only the id records go to the id shards; the tasks go straight to
    # their hash shards, where the repeated ids found are quarantined.
    repeats = read[IDS] | "GroupIds" >> beam.GroupByKey() | "RepeatedIds" >> beam.FlatMap(repeated_ids)
    out = split_tagged(
        (read[TASKS], repeats)
        | "TasksAndRepeats" >> beam.Flatten()
        | "GroupHashes" >> beam.GroupByKey()
        | "HashProgress" >> _shards("exact dedup + signatures: hash shards", shards)
        | "ExactAndBands" >> beam.FlatMap(exact_and_bands, near, spill),
        "ExactSplit",
        (QUARANTINE, DROPPED, KEPT, BUCKETS, SEMANTIC, BATCH, SKETCHES),
    )
    quarantined = (read[QUARANTINE], out[QUARANTINE]) | "AllQuarantine" >> beam.Flatten()
    kept, dropped = out[KEPT], [out[DROPPED]]
    if near is not None:
        near_kept, near_dropped = near_stage(p, out, near, units, spill)
        kept = (kept, near_kept) | "AllKept" >> beam.Flatten()
        dropped.append(near_dropped)
    kept = kept | "DedupProgress" >> beam.ParDo(Progress("dedup: kept", total))
    clean, contaminated = kept | "Decontaminate" >> DecontaminateChunks(*index_spec(cfg.decontam), spill)
    clean = clean | "CleanProgress" >> beam.ParDo(Progress("decontaminate: clean", total))
    # The accounting check's independent count is the one the ETA was
    # given (count_rows, the same function), not a second pass over the
    # inputs: ~0.6 s a million rows.
    counted = (
        p | "InputsCounted" >> beam.Create([total])
        if total is not None
        else p | "CountInputs" >> CountInputRows(spec.inputs, lim.max_row_bytes)
    )
    rows_counted = counted | "WriteRowsCounted" >> beam.Map(write_count, str(staging / rows_counted_file))
    rows_read = (
        read[ROWS]
        | "ReadProgress" >> beam.ParDo(Progress("read+validate", total, count=True))
        | "SumRead" >> beam.CombineGlobally(sum)
        | "WriteRowsRead" >> beam.Map(write_count, str(staging / rows_read_file))
    )
    counts = (rows_counted, rows_read) | "BothCounts" >> beam.Flatten()
    return clean, [*dropped, contaminated], quarantined, counts
