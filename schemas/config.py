"""The run configuration: one validated model, loaded from a TOML file.

Every field has a documented default, so a run needs no config file at all.
A config that does not validate fails the run before anything is read or
spent, with one line that names the field (see `load_config`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from tasksieve.schemas.config_dedup import DecontamConfig, DedupConfig, Section
from tasksieve.schemas.records import DOMAINS
from tasksieve.schemas.toml_files import load_toml_model

DEFAULT_SYSTEM_PROMPTS = {
    "exact": "Answer the question. End with one line of the form 'Final answer: <answer>'.",
    "code": "You are a careful Python programmer. Answer with one ```python code block that defines the "
    "requested function with exactly the requested name; no tests, no input(), no extra text after the block.",
    "rubric": "You are a helpful, careful assistant. Answer the request completely and precisely.",
}


class LimitsConfig(Section):
    max_row_bytes: int = Field(1_000_000, gt=0, description="a raw row larger than this is quarantined")
    max_field_chars: int = Field(100_000, gt=0, description="a text field longer than this is quarantined")
    max_expert_minutes: float = Field(100_000, gt=0, description="expert_minutes above this is quarantined (absurd)")
    max_expert_cost_usd: float = Field(
        1_000_000, gt=0, description="expert_cost_usd above this is quarantined (absurd)"
    )


class OpenAIConfig(Section):
    """An OpenAI-compatible server (`vllm serve`, SGLang, a hosted API)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="the server's /v1 URL")
    model: str | None = Field(None, description="the served model name (default: the only one the server lists)")
    # The key itself never goes into a config file (configs are stored with runs).
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key, if any")
    concurrency: int = Field(16, gt=0, description="requests in flight at once")
    timeout_s: float = Field(300.0, gt=0, description="per request, including generation")
    max_retries: int = Field(
        5,
        ge=0,
        le=100,
        description="retries on 408/409/425/429/5xx, timeouts, connection "
        "errors and replies that are not chat completions",
    )
    max_reply_mib: float = Field(
        32.0,
        gt=0,
        le=4096,
        description="cap on a reply's size once decompressed; a reply over it is a failed request (never cached)",
    )
    max_completion_chars: int = Field(
        1_000_000, gt=0, description="cap on one completion's length; over it the request fails (never cached)"
    )
    progress_after_s: float = Field(
        60.0,
        gt=0,
        description="a request in flight this long prints a line naming the "
        "server and the wait (and again each such period)",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v):
        from tasksieve.schemas.base_url import check_base_url

        why = check_base_url(v)
        if why:
            raise ValueError(why)
        return v


class ModelConfig(Section):
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
    # GPU engine arguments, passed to vLLM as they are (None: vLLM's default).
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs one model is split over")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="share of each GPU's memory vLLM may take (weights + KV cache); vLLM's default 0.9",
    )
    enable_prefix_caching: bool | None = Field(
        None,
        description="re-use the KV cache of a shared prompt prefix "
        "(the system prompt, a task's k attempts); vLLM's default",
    )
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)
    max_failed_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="a run in which more than this share of requests "
        "to the model failed (rejected, over a cap, not text) stops (exit 5) instead of "
        "finishing",
    )
    replay_paths: list[str] = Field(
        default_factory=list, description="recorded attempts (Parquet/JSONL/datasets) for backend = replay"
    )

    # What reaches vLLM's engine (transforms/backends/vllm.py engine_kwargs).
    ENGINE_FIELDS: ClassVar[tuple] = (
        "dtype",
        "max_model_len",
        "kv_cache_gib",
        "max_num_batched_tokens",
        "max_num_seqs",
        "tensor_parallel_size",
        "gpu_memory_utilization",
        "enable_prefix_caching",
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data):
        """An unknown key (a misspelt engine argument, one tasksieve does not
        pass) is an error naming the close match and what is passed."""
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                import difflib

                close = difflib.get_close_matches(unknown[0], list(cls.model_fields), n=1)
                raise ValueError(
                    f"unknown key {unknown[0]!r}"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + "; the engine arguments tasksieve passes to vLLM are "
                    + ", ".join(cls.ENGINE_FIELDS)
                )
        return data

    @model_validator(mode="after")
    def _replay_has_paths(self):
        if self.backend == "replay" and not self.replay_paths:
            raise ValueError("model.backend = 'replay' needs model.replay_paths (files of recorded attempts)")
        return self


# Most attempts per task (`-k`, sampling.k): beyond it a pass rate is no
# better known, and a wave of k attempts per task is built in memory.
MAX_K = 4096


class BayesConfig(Section):
    """`bayes` stopping: a Beta posterior on each task's pass rate."""

    # U-shaped on purpose: most tasks are always or never solved (55% all-pass
    # in the published case), and the prior is what lets a run of passes
    # convince early. Defaults chosen in bench/sampling_policies.py: at k=16
    # they keep ~98% of fixed's decisions for ~0.6x its attempts; at k=8 with
    # waves 2,2,4 they decide exactly like `sequential`.
    prior_a: float = Field(0.1, gt=0, description="Beta prior: pseudo-passes")
    prior_b: float = Field(0.1, gt=0, description="Beta prior: pseudo-fails")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="stop when the decision is at least this probable")


class PredictedConfig(Section):
    """`predicted` stopping: each task's pass rate estimated before its first
    attempt (transforms/sample/difficulty.py, predicted.py)."""

    # Chosen in bench/sampling_policies.py on its dev seeds: asking for 0.97
    # kept >= 0.95 of fixed-k's signal on every seed and pool.
    keep_signal: float = Field(
        0.97,
        gt=0,
        le=1,
        description="share of fixed-k's GRPO signal (sum p(1-p) over the "
        "learnable set) each batch keeps, in expectation under the predictions",
    )
    history: bool = Field(
        True,
        description="learn from earlier runs in OUT/curation.duckdb (any model), besides "
        "the tasks this run decided before",
    )


class SamplingConfig(Section):
    mode: Literal["sequential", "fixed", "bayes", "predicted"] = "sequential"
    k: int = Field(8, ge=1, le=MAX_K, description="most attempts per task")
    # Wave sizes for `sequential`; they are repeated (last one) until k is reached.
    waves: list[int] = Field(default_factory=lambda: [2, 2, 4])
    # How attempts reach the engine (transforms/sample/queued.py): `queue`
    # tops the engine up as each task's attempts come back; `waves` sends a
    # batch's next attempts once the whole wave is back. The same attempts.
    schedule: Literal["queue", "waves"] = "queue"
    temperature: float = Field(0.8, ge=0)
    # 1.0 skips the per-step sort of the whole vocabulary: ~25% faster on CPU.
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(384, gt=0)
    seed: int = 0
    tasks_per_batch: int = Field(128, gt=0, le=1_000_000, description="tasks sampled together in one engine batch")
    # Groups of tasks sampled independently; each is sampled by one worker.
    # 1 keeps every batch full on one machine; on a cluster, the number of
    # workers (`--dask-workers` sets it).
    groups: int = Field(1, gt=0)
    bayes: BayesConfig = Field(default_factory=BayesConfig)
    predicted: PredictedConfig = Field(default_factory=PredictedConfig)
    # The math prompt, and the one for any domain not in system_prompts.
    system_prompt: str = (
        "You are a careful math assistant. Solve the problem step by step, "
        "then give the final answer as \\boxed{answer}."
    )
    # Per-domain system prompts (math uses system_prompt unless named here).
    system_prompts: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SYSTEM_PROMPTS))

    @field_validator("system_prompts")
    @classmethod
    def _over_defaults(cls, v):
        # A config that names one domain keeps the defaults of the others.
        return {**DEFAULT_SYSTEM_PROMPTS, **v}

    @model_validator(mode="after")
    def _waves_positive(self):
        if not self.waves or any(w <= 0 for w in self.waves):
            raise ValueError("sampling.waves must be a non-empty list of positive integers")
        if len(self.waves) > MAX_K or any(w > MAX_K for w in self.waves):
            raise ValueError(f"sampling.waves: at most {MAX_K} waves of at most {MAX_K} attempts")
        unknown = set(self.system_prompts) - set(DOMAINS)
        if unknown:
            raise ValueError(
                f"sampling.system_prompts: unknown domain {sorted(unknown)[0]!r}; expected one of {', '.join(DOMAINS)}"
            )
        return self

    # Every field is in exactly one of these two sets (tests/test_structure.py
    # fails otherwise), so a new field cannot join without a decision. The
    # first set changes what an attempt would be, and only it makes the
    # attempt-cache key: a cached attempt is re-used only under equal values.
    GENERATION_FIELDS: ClassVar[frozenset] = frozenset(
        {"temperature", "top_p", "max_tokens", "seed", "system_prompt", "system_prompts"}
    )
    # How many attempts, in which waves, grouped how: not what one attempt is.
    SCHEDULE_FIELDS: ClassVar[frozenset] = frozenset(
        {"mode", "k", "waves", "schedule", "tasks_per_batch", "groups", "bayes", "predicted"}
    )

    def sampler_key(self) -> str:
        """Hash of everything that changes what an attempt would be."""
        params = {name: getattr(self, name) for name in self.GENERATION_FIELDS}
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


class VerifyConfig(Section):
    """How attempts are verified (transforms/verify/verifiers.py, verify/sandbox/)."""

    parallel: int = Field(
        default_factory=lambda: os.cpu_count() or 2,
        gt=0,
        description="verifications at once (default: one per core): pooled sandboxes and math-verify workers",
    )
    math_timeout_s: float = Field(
        5.0, gt=0, description="math-verify deadline per attempt, enforced by killing its worker"
    )
    # auto: bubblewrap when usable, else the rlimit fallback (with a warning) when it can run attempts
    # as a non-root user under Landlock and its isolation probe sees nothing of the host, else none:
    # code tasks are dropped (no_safe_sandbox). "unsafe-root" runs the
    # fallback even as root, and is never chosen for you (README, "The code sandbox").
    sandbox: Literal["auto", "bwrap", "rlimit", "unsafe-root"] = "auto"
    code_cpu_seconds: int = Field(5, gt=0, description="CPU seconds per code attempt")
    code_wall_seconds: float = Field(10.0, gt=0, description="wall-clock seconds per code attempt")
    code_memory_mb: int = Field(512, ge=64, description="address space of the sandboxed process")
    code_output_kb: int = Field(64, gt=0, description="largest stdout, stderr or file a code attempt may write")
    rubric_pass_threshold: float = Field(0.7, ge=0, le=1, description="share of rubric criteria met for a pass")
    judge_max_chars: int = Field(
        8000, gt=0, description="an attempt is cut to this many characters in the judge prompt"
    )


class JudgeConfig(Section):
    """The rubric judge (transforms/verify/judge/, docs/verification.md,
    "The rubric judge"): by default the sampling engine itself."""

    backend: Literal["vllm", "openai"] | None = Field(
        None,
        description="vllm: a local model (`path`, else the "
        "sampler's engine); openai: a server ([judge.openai]); unset: "
        "`path` if set, else the sampler's engine",
    )
    path: str | None = Field(
        None, description="a Hugging Face model folder for the judge; unset = the sampler's engine"
    )
    model_id: str | None = Field(None, description="name@revision of the judge, priced from the rates file")
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)
    temperature: float | None = Field(None, ge=0, description="the judge's sampling temperature; unset = [sampling]'s")
    # Landis & Koch (1977), "The measurement of observer agreement for
    # categorical data", Biometrics 33:159-174: 0.61-0.80 is "substantial".
    min_kappa: float = Field(
        0.6,
        ge=-1,
        le=1,
        description="a rubric task whose judge agrees with its graded "
        "attempts less than this (Cohen's kappa) is dropped before sampling (judge_unreliable)",
    )
    require_calibration: bool = Field(
        False, description="drop rubric tasks without graded_attempts instead of judging them with agreement unmeasured"
    )
    probes: bool = Field(True, description="run the judge probes per rubric task before sampling (judge_hackable)")
    bootstrap: int = Field(1000, ge=0, le=100_000, description="bootstrap resamples for kappa's 95% interval")
    min_labels_for_interval: int = Field(20, ge=2, description="fewest (response, criterion) labels for an interval")
    graded: str | None = Field(
        None,
        description="a file of graded attempts keyed by task_id (JSON object or JSONL "
        "rows with task_id, graded_attempts); `tasksieve run --graded FILE` sets it",
    )


class BandConfig(Section):
    """Which pass rates count as learnable. The default is docs/design.md's:
    at least one pass and at least one fail."""

    min_pass_rate: float = Field(0.0, ge=0, le=1)
    max_pass_rate: float = Field(1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_pass_rate > self.max_pass_rate:
            raise ValueError("band.min_pass_rate must not exceed band.max_pass_rate")
        return self


class SelectConfig(Section):
    """`tasksieve select`: choosing a training set from the learnable pool
    (transforms/select/, docs/selection.md)."""

    value: str = Field(
        "p * (1 - p)",
        description="a task's expected training signal, over p (pass rate shrunk "
        "toward the pool's mean), p_raw, n, n_pass, m (pool mean), G (group size)",
    )
    prior_strength: float = Field(
        4.0,
        ge=0,
        description="pseudo-attempts at the pool's mean pass rate that "
        "shrink a task's measured pass rate (0: no shrinkage)",
    )
    group_size: int | None = Field(
        None, ge=1, description="rollouts per task at training, for the price and G; unset = the run's k"
    )
    diversity: bool = Field(True, description="embed prompts, cluster them and discount tasks like chosen ones")
    # Upper bounds: a config file must not make `select` hang or fill memory
    # (k-means holds tasks x clusters scores; each random draw is a pass over the pool).
    clusters: int = Field(0, ge=0, le=1024, description="k-means clusters; 0 = sqrt(tasks / 2), at most 64")
    redundancy: float = Field(
        0.5,
        ge=0,
        le=1,
        description="lambda: share of a task's value lost per unit of cosine likeness to the nearest chosen task",
    )
    max_cluster_share: float = Field(0.5, gt=0, le=1, description="most of the budget one cluster may take")
    max_source_share: float = Field(1.0, gt=0, le=1, description="most of the budget one source may take")
    max_domain_share: float = Field(1.0, gt=0, le=1, description="most of the budget one domain may take")
    representatives: int = Field(3, ge=1, le=20, description="prompts shown per cluster")
    random_draws: int = Field(200, ge=1, le=10_000, description="random subsets the selection is compared with")
    seed: int = Field(0, description="k-means seeding and the random subsets")

    @field_validator("value")
    @classmethod
    def _formula(cls, v):
        from tasksieve.schemas.value_formula import check_formula

        check_formula(v)
        return v


class RunConfig(Section):
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    decontam: DecontamConfig = Field(default_factory=DecontamConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    band: BandConfig = Field(default_factory=BandConfig)
    # Where finished attempts persist as they complete, keyed by (content_hash,
    # model_id, sampler_key, attempt_idx); None = OUT/attempt_cache. Point
    # several output folders at one cache to share attempts between them.
    attempt_cache: str | None = None
    # Where sentence embeddings persist across runs, by content hash
    # (transforms/same_problem/embed_cache.py); None = OUT/embedding_cache,
    # "off" = kept for no run.
    embedding_cache: str | None = None
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    select: SelectConfig = Field(default_factory=SelectConfig)
    # Prices live in their own file (schemas/rates.py); None = the bundled
    # rates.default.toml. `tasksieve run --rates FILE` overrides this.
    rates: str | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


def config_warnings(cfg: RunConfig, bwrap_works=None) -> list[str]:
    """Settings that validate but defeat a check without a word: one line
    each. `run` and `dedup` print them and record them in the run's row of
    the `runs` table (column `warnings`). `bwrap_works`, a callable, says
    whether the full sandbox is usable here (asked only when the config
    names a weaker one)."""
    out = []
    if cfg.verify.rubric_pass_threshold <= 0:
        out.append(
            f"verify.rubric_pass_threshold = {cfg.verify.rubric_pass_threshold:g}: every rubric attempt "
            "passes (a score of 0 meets it), so no rubric task can be judged learnable or all_fail"
        )
    if cfg.verify.sandbox in ("rlimit", "unsafe-root") and bwrap_works is not None and bwrap_works():
        out.append(
            f"verify.sandbox = {cfg.verify.sandbox!r} while bubblewrap works here: model-written code runs "
            "with less isolation than available (no filesystem isolation); use 'auto' or 'bwrap'"
        )
    return out


class ConfigError(Exception):
    """A config that cannot be used; the message is one line for a person."""


def load_config(path: str | Path | None) -> RunConfig:
    if path is None:
        return RunConfig()
    return load_toml_model(Path(path), RunConfig, "config", ConfigError)
