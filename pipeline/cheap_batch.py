"""The cheap segment of the graph (read .. decontaminate) on the batch path,
chosen by `[dedup] batch = true`: graph.dedup_stages calls `batch_dedup_stages`
and gets back what its row path returns, so everything after it is unchanged.
Design and memory budget: docs/scaling.md, "The batch path"."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam

from tasksieve.pipeline.staging import write_count
from tasksieve.transforms.decontam.batch import DecontaminateChunks
from tasksieve.transforms.decontam.stage import index_options, rules_from_config
from tasksieve.transforms.dedup.batch import DROPPED, KEPT, QUARANTINE, ROWS, BatchDedup, NearSettings
from tasksieve.transforms.dedup.minhash import params_from_config
from tasksieve.transforms.dedup.pool_index import index_row_groups
from tasksieve.transforms.progress import Progress
from tasksieve.transforms.read import CountInputRows, count_rows


def near_settings(cfg, with_pool: bool) -> NearSettings | None:
    """NearDedup's arguments as graph.dedup_stages passes them; None when
    the near stage does not run at all."""
    if not (cfg.dedup.near or with_pool):
        return None
    return NearSettings(params_from_config(cfg.dedup), cfg.dedup.threshold, cfg.dedup.max_bucket_pairs,
                        within=cfg.dedup.near, min_numbers=cfg.dedup.number_overlap,
                        guard_below=cfg.dedup.number_guard_below, semantic=cfg.dedup.semantic,
                        rules=rules_from_config(cfg.decontam, cfg.dedup), with_pool=with_pool)


def _input_rows(paths: list[str], max_row_bytes: int) -> int | None:
    """Rows in the inputs, for the progress ETA only (None if any cannot be counted)."""
    try:
        return sum(count_rows(p, max_row_bytes) for p in paths)
    except Exception:  # the pipeline reports unreadable inputs itself
        return None


def batch_dedup_stages(p: beam.Pipeline, spec, rows_counted_file: str, rows_read_file: str):
    """(clean tasks, [dropped tasks], quarantined rows, rows-read counts), as graph.dedup_stages."""
    cfg, lim = spec.config, spec.config.limits
    total = _input_rows(spec.inputs, lim.max_row_bytes)
    rows_counted = (p | "CountInputs" >> CountInputRows(spec.inputs, lim.max_row_bytes)
                    | "WriteRowsCounted" >> beam.Map(write_count, str(Path(spec.staging_dir) / rows_counted_file)))
    units = [u for path in spec.pool_indexes for u in index_row_groups(path)]
    out = p | "BatchDedup" >> BatchDedup(
        spec.inputs, lim.max_row_bytes, (lim.max_field_chars, lim.max_expert_minutes, lim.max_expert_cost_usd),
        near_settings(cfg, bool(units)), units)
    rows_read = (out[ROWS] | "ReadProgress" >> beam.ParDo(Progress("read+validate", total, chunks=False, count=True))
                 | "SumRead" >> beam.CombineGlobally(sum)
                 | "WriteRowsRead" >> beam.Map(write_count, str(Path(spec.staging_dir) / rows_read_file)))
    rows_read = (rows_counted, rows_read) | "BothCounts" >> beam.Flatten()
    quarantined = out[QUARANTINE] | "StampRun" >> beam.Map(lambda q, run_id: dict(q, run_id=run_id), spec.run_id)
    kept = out[KEPT] | "DedupProgress" >> beam.ParDo(Progress("kept after dedup", None))
    clean, contaminated = kept | "Decontaminate" >> DecontaminateChunks(
        cfg.decontam.ngram, cfg.decontam.benchmarks, cfg.decontam.extra_paths, index_options(cfg.decontam))
    clean = (clean | "CleanProgress" >> beam.ParDo(Progress("clean after decontaminate", None))
             | "CleanRows" >> beam.FlatMap(lambda chunk: chunk))
    return clean, [out[DROPPED], contaminated], quarantined, rows_read
