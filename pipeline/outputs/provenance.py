"""Provenance inside every Parquet file tasksieve writes for others
(learnable.parquet, results.parquet, selected.parquet): key-value metadata
saying how its pass rates were measured, so a file copied to a training
cluster keeps its meaning without curation.duckdb.

Keys (all text, prefixed `tasksieve.`): `run_id`, `model_id`, `k` (most
attempts per task), `sampling_policy` (`sampling_mode` and its sampler
key), `system_prompt_sha256` (JSON: domain -> SHA-256 of the system
prompt the attempts were sampled with), `verifier_versions` (JSON:
domain -> what judged it), `tasksieve_version`; `selection_id` on
selected.parquet. Read them with
`pyarrow.parquet.read_schema(path).metadata` (docs/outputs.md).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata as _md

import pyarrow as pa

from tasksieve import __version__

PREFIX = "tasksieve."


def _dist_version(name: str) -> str:
    try:
        return _md.version(name)
    except _md.PackageNotFoundError:
        return "not installed"


def system_prompts_of(config_json: str | None) -> dict[str, str]:
    """domain -> system prompt, as the run's recorded config had them."""
    from tasksieve.schemas.config import RunConfig
    from tasksieve.schemas.records import DOMAINS

    try:
        sampling = RunConfig.model_validate(json.loads(config_json or "{}")).sampling
    except Exception:  # an older or odd config: the defaults, as that run would have had them
        sampling = RunConfig().sampling
    return {d: sampling.system_prompts.get(d, sampling.system_prompt) for d in DOMAINS}


def system_prompt_hashes(config_json: str | None) -> dict[str, str]:
    """domain -> SHA-256 of its system prompt, as the run's config had them."""
    return {d: hashlib.sha256(p.encode("utf-8")).hexdigest() for d, p in system_prompts_of(config_json).items()}


def verifier_versions(config_json: str | None) -> dict[str, str]:
    """What judged each domain's attempts, with its version."""
    try:
        cfg = json.loads(config_json or "{}")
    except ValueError:
        cfg = {}
    judge = cfg.get("judge") or {}
    judge_model = judge.get("path") or (judge.get("openai") or {}).get("model") or "the sampling model"
    ours = f"tasksieve {__version__}"
    return {
        "math": f"math-verify {_dist_version('math-verify')} ({ours})",
        "exact": ours,
        "code": f"{ours} sandbox {(cfg.get('verify') or {}).get('sandbox', 'auto')}",
        "rubric": f"{ours} judge {judge_model}",
    }


def run_metadata(run_row: dict) -> dict[str, str]:
    """The metadata of a run's files, from its `runs` row."""
    config = run_row.get("config")
    sampler = run_row.get("sampler_key") or ""
    policy = run_row.get("sampling_mode") or ""
    return {
        "run_id": str(run_row.get("run_id") or ""),
        "model_id": str(run_row.get("model_id") or ""),
        "k": str(run_row.get("k") or 0),
        "sampling_policy": f"{policy} ({sampler})" if sampler else policy,
        "system_prompt_sha256": json.dumps(system_prompt_hashes(config), sort_keys=True),
        "verifier_versions": json.dumps(verifier_versions(config), sort_keys=True),
        "tasksieve_version": __version__,
    }


def stamped(table: pa.Table, meta: dict[str, str]) -> pa.Table:
    """`table` with `meta` (keys prefixed) added to its schema's metadata."""
    merged = dict(table.schema.metadata or {})
    merged.update({f"{PREFIX}{k}".encode(): str(v).encode() for k, v in meta.items()})
    return table.replace_schema_metadata(merged)


def read(path) -> dict[str, str]:
    """The tasksieve metadata of a Parquet file (prefix removed)."""
    import pyarrow.parquet as pq

    raw = pq.read_schema(path).metadata or {}
    return {k.decode()[len(PREFIX) :]: v.decode() for k, v in raw.items() if k.decode().startswith(PREFIX)}
