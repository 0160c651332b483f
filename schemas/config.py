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


class DecontamConfig(_Section):
    ngram: int = Field(13, ge=4, description="word n-gram length shared with a benchmark that drops a task")
    benchmarks: list[str] = Field(
        default_factory=lambda: ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"],
        description="bundled benchmarks to check against",
    )
    extra_paths: list[str] = Field(default_factory=list, description="user benchmark files (JSONL/Parquet/datasets)")


class OpenAIConfig(_Section):
    """An OpenAI-compatible server (`vllm serve`, SGLang, a hosted API)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="the server's /v1 URL")
    model: str | None = Field(None, description="the served model name (default: the only one the server lists)")
    # The key itself never goes into a config file (configs are stored with runs).
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key, if any")
    concurrency: int = Field(16, gt=0, description="requests in flight at once")
    timeout_s: float = Field(300.0, gt=0, description="per request, including generation")
    max_retries: int = Field(5, ge=0, description="retries on 408/409/429/5xx, timeouts and connection errors")


class ModelConfig(_Section):
    backend: Literal["vllm", "openai", "replay"] = "vllm"
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
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)
    replay_paths: list[str] = Field(default_factory=list,
                                    description="recorded attempts (Parquet/JSONL/datasets) for backend = replay")

    @model_validator(mode="after")
    def _replay_has_paths(self):
        if self.backend == "replay" and not self.replay_paths:
            raise ValueError("model.backend = 'replay' needs model.replay_paths (files of recorded attempts)")
        return self


class BayesConfig(_Section):
    """`bayes` stopping: a Beta posterior on each task's pass rate."""

    # U-shaped on purpose: most tasks are always or never solved (55% all-pass
    # in the published case), and the prior is what lets a run of passes
    # convince early. Defaults chosen in bench/sampling_policies.py: at k=16
    # they keep ~98% of fixed's decisions for ~0.6x its attempts; at k=8 with
    # waves 2,2,4 they decide exactly like `sequential`.
    prior_a: float = Field(0.1, gt=0, description="Beta prior: pseudo-passes")
    prior_b: float = Field(0.1, gt=0, description="Beta prior: pseudo-fails")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="stop when the decision is at least this probable")


class SamplingConfig(_Section):
    mode: Literal["sequential", "fixed", "bayes"] = "sequential"
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
    bayes: BayesConfig = Field(default_factory=BayesConfig)
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
    decontam: DecontamConfig = Field(default_factory=DecontamConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    band: BandConfig = Field(default_factory=BandConfig)
    # Where finished attempts persist as they complete, keyed by (content_hash,
    # model_id, sampler_key, attempt_idx); None = OUT/attempt_cache. Point
    # several output folders at one cache to share attempts between them.
    attempt_cache: str | None = None
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
