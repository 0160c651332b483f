"""The run configuration: one validated model, loaded from a TOML file.

Every field has a documented default, so a run needs no config file at all.
A config that does not validate fails the run before anything is read or
spent, with one line that names the field (see `load_config`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasksieve.schemas.toml_files import load_toml_model


class _Section(BaseModel):
    # A typo in a key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid")


class LimitsConfig(_Section):
    max_row_bytes: int = Field(1_000_000, gt=0, description="a raw row larger than this is quarantined")
    max_field_chars: int = Field(100_000, gt=0, description="a text field longer than this is quarantined")


class DedupConfig(_Section):
    """Near dedup (MinHash + LSH, confirmed by exact Jaccard) and dedup
    against earlier stages' pools. Defaults and why: README, "Dedup and
    decontamination"."""

    near: bool = Field(True, description="run the near-duplicate stage (exact dedup always runs)")
    shingle: Literal["char", "word"] = Field("char", description="shingle unit: characters (any script) or words")
    shingle_size: int = Field(5, ge=1, le=64, description="characters (or words) per shingle")
    num_perm: int = Field(100, ge=8, le=1024, description="MinHash permutations")
    bands: int = Field(20, ge=1, description="LSH bands; a pair sharing one band's rows is a candidate")
    rows: int = Field(5, ge=1, description="signature rows per band")
    threshold: float = Field(0.7, gt=0, le=1, description="exact Jaccard of shingle sets that confirms a candidate pair")
    number_overlap: float = Field(0.5, ge=0, le=1, description="a pair less similar than number_guard_below is "
                                  "confirmed only if this share of its numbers agree (multiset Jaccard): in a short "
                                  "prompt, a template refilled with new numbers is a new problem")
    number_guard_below: float = Field(0.9, gt=0, le=1, description="pairs at least this similar are duplicates "
                                      "whatever their numbers (one number edited in a long prompt)")
    seed: int = Field(1, description="MinHash permutation seed (an index is only reusable with the same one)")
    max_bucket_pairs: int = Field(32, ge=2, description="buckets up to this size compare all pairs; larger: star + chain")
    against: list[str] = Field(default_factory=list,
                               description="reference pools (JSONL/Parquet/datasets folders or saved indexes); never modified")
    save_index: str | None = Field(None, description="save the index of `against` here for reuse")

    @model_validator(mode="after")
    def _bands_fit(self):
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"dedup.bands x dedup.rows ({self.bands} x {self.rows}) exceeds dedup.num_perm ({self.num_perm})")
        return self


class DecontamConfig(_Section):
    ngram: int = Field(8, ge=4, description="word n-gram length shared with a benchmark that drops a task "
                                           "(open-r1's 8: prompts are short; see README for 13 and 12)")
    benchmarks: list[str] = Field(
        default_factory=lambda: ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"],
        description="bundled benchmarks to check against",
    )
    extra_paths: list[str] = Field(default_factory=list, description="user benchmark files (JSONL/Parquet/datasets)")
    short_min_words: int = Field(4, ge=1, description="benchmark items shorter than ngram words (but this long) "
                                                      "drop a task that contains their whole word sequence")
    fuzzy: bool = Field(True, description="also catch lightly reworded benchmark items (in-order word coverage)")
    fuzzy_threshold: float = Field(0.6, gt=0, le=1, description="share of a benchmark item's words found in order "
                                                                "in the task that marks it reworded")
    fuzzy_probe: int = Field(3, ge=1, description="word n-gram length used to find fuzzy candidates")
    fuzzy_max_df: int = Field(50, ge=1, description="a probe n-gram in more benchmark items than this is ignored")


class ModelConfig(_Section):
    backend: Literal["vllm"] = "vllm"
    # None means the bundled default, SmolLM2-135M-Instruct, prepared on first use.
    path: str | None = None
    model_id: str | None = Field(None, description="name@revision recorded on attempts; derived from path if unset")
    # "auto": float32 on CPU (bf16/fp16 fall back to slow kernels without
    # AVX-512; measured 5x slower on AVX2), the checkpoint's dtype on GPU.
    dtype: str = "auto"
    max_model_len: int = Field(2048, gt=0)
    kv_cache_gib: float = Field(2.0, gt=0)
    # Large on purpose: vLLM's CPU engine crashes on per-request seeds
    # ("CPU Generator does not use offset") when prompts are chunked.
    max_num_batched_tokens: int = Field(65536, gt=0)
    max_num_seqs: int = Field(256, gt=0)


class SamplingConfig(_Section):
    mode: Literal["sequential", "fixed"] = "sequential"
    k: int = Field(8, ge=1, description="most attempts per task")
    # Wave sizes for `sequential`; they are repeated (last one) until k is reached.
    waves: list[int] = Field(default_factory=lambda: [2, 2, 4])
    temperature: float = Field(0.8, ge=0)
    # 1.0 skips the per-step sort of the whole vocabulary: ~25% faster on CPU.
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(384, gt=0)
    seed: int = 0
    tasks_per_batch: int = Field(128, gt=0, description="tasks sampled together in one engine batch")
    # Groups of tasks sampled independently; each is sampled by one worker.
    # 1 keeps every batch full on one machine; on a cluster, the number of
    # workers (`--dask-workers` sets it).
    groups: int = Field(1, gt=0)
    system_prompt: str = (
        "You are a careful math assistant. Solve the problem step by step, "
        "then give the final answer as \\boxed{answer}."
    )

    @model_validator(mode="after")
    def _waves_positive(self):
        if not self.waves or any(w <= 0 for w in self.waves):
            raise ValueError("sampling.waves must be a non-empty list of positive integers")
        return self


class BandConfig(_Section):
    """Which pass rates count as learnable. The default is DESIGN.md's:
    at least one pass and at least one fail."""

    min_pass_rate: float = Field(0.0, ge=0, le=1)
    max_pass_rate: float = Field(1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_pass_rate > self.max_pass_rate:
            raise ValueError("band.min_pass_rate must not exceed band.max_pass_rate")
        return self


class RunConfig(_Section):
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    decontam: DecontamConfig = Field(default_factory=DecontamConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    band: BandConfig = Field(default_factory=BandConfig)
    # Prices live in their own file (schemas/rates.py); None = the bundled
    # rates.default.toml. `tasksieve run --rates FILE` overrides this.
    rates: str | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


class ConfigError(Exception):
    """A config that cannot be used; the message is one line for a person."""


def load_config(path: str | Path | None) -> RunConfig:
    if path is None:
        return RunConfig()
    return load_toml_model(Path(path), RunConfig, "config", ConfigError)
