"""The `[dedup]` and `[decontam]` sections of the run configuration
(schemas/config.py assembles them into RunConfig), and `Section`, the base
of every section: a key it does not know is an error, never ignored."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    # A typo in a key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid")


class DedupConfig(Section):
    """Near dedup (MinHash + LSH, confirmed by exact Jaccard) and dedup
    against earlier stages' pools. Defaults and why: README, "Dedup and
    decontamination"."""

    near: bool = Field(True, description="run the near-duplicate stage (exact dedup always runs)")
    shingle: Literal["char", "word"] = Field("char", description="shingle unit: characters (any script) or words")
    shingle_size: int = Field(5, ge=1, le=64, description="characters (or words) per shingle")
    num_perm: int = Field(100, ge=8, le=1024, description="MinHash permutations")
    bands: int = Field(20, ge=1, description="LSH bands; a pair sharing one band's rows is a candidate")
    rows: int = Field(5, ge=1, description="signature rows per band")
    threshold: float = Field(
        0.7, gt=0, le=1, description="exact Jaccard of shingle sets that confirms a candidate pair"
    )
    number_overlap: float = Field(
        0.5,
        ge=0,
        le=1,
        description="a pair less similar than number_guard_below is "
        "confirmed only if this share of its numbers agree (multiset Jaccard): in a short "
        "prompt, a template refilled with new numbers is a new problem",
    )
    number_guard_below: float = Field(
        0.9,
        gt=0,
        le=1,
        description="pairs at least this similar are duplicates "
        "whatever their numbers (one number edited in a long prompt)",
    )
    seed: int = Field(1, description="MinHash permutation seed (an index is only reusable with the same one)")
    max_bucket_pairs: int = Field(
        32, ge=2, description="buckets up to this size compare all pairs; larger: star + chain"
    )
    semantic: bool = Field(
        True,
        description="also find paraphrases: tasks stating the same quantities whose "
        "meaning is close (sentence embeddings), confirmed by the same-problem rules",
    )
    semantic_min: float = Field(
        0.8,
        ge=-1,
        le=1,
        description="cosine at which two tasks with the same quantities (and agreeing answers) are the same problem",
    )
    semantic_alone_min: float = Field(0.93, ge=-1, le=1, description="cosine for two tasks without any number")
    keep_variants: int = Field(
        0,
        ge=0,
        description="variants (the same text with a quantity edited, see "
        "docs/same_problem.md) kept per original; the rest drop as near_variant. 0: a "
        "variant is padding, the buyer pays an expert for a solved problem",
    )
    edge_shards: int = Field(
        0,
        ge=0,
        le=4096,
        description="batch path: the shards where near dedup's candidate "
        "pairs meet their two rows to be judged. A row goes to every shard holding one of its "
        "pairs, so fewer shards send each row fewer times; more spread the judging over more "
        "workers and hold fewer rows each. 0: one per 125,000 input tasks, at least 8. The "
        "decisions are the same for any number",
    )
    shards: int = Field(
        0,
        ge=0,
        le=1024,
        description="batch path: the shards of ids, content hashes and LSH "
        "buckets, each grouped on its own. 0: one per 12,500 input tasks, 8 to 32 (32 against a "
        "reference pool). The decisions are the same for any number",
    )
    memory_mib: int = Field(
        1536,
        ge=0,
        description="on the in-process runner, MiB of tasks (estimated) the batch "
        "path hands between its stages as objects instead of pickling them to a spill file: "
        "faster; past it, values spill to disk, so memory stays bounded. 0: always spill",
    )
    against: list[str] = Field(
        default_factory=list,
        description="reference pools (JSONL/Parquet/datasets folders or saved indexes); never modified",
    )
    save_index: str | None = Field(None, description="save the index of `against` here for reuse")

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data):
        """`batch` chose between the batch engine and a row-at-a-time graph,
        which is gone: a config that still sets it is told so, not just that
        the key is unknown."""
        if isinstance(data, dict) and "batch" in data:
            raise ValueError(
                "key 'batch' was removed: read .. decontaminate always run on chunks of tasks "
                "(the batch engine, docs/scaling.md); delete the line"
            )
        return data

    @model_validator(mode="after")
    def _bands_fit(self):
        if self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"dedup.bands x dedup.rows ({self.bands} x {self.rows}) exceeds dedup.num_perm ({self.num_perm})"
            )
        return self


class DecontamConfig(Section):
    ngram: int = Field(
        8,
        ge=4,
        description="word n-gram length shared with a benchmark that drops a task "
        "(open-r1's 8: prompts are short; see README for 13 and 12)",
    )
    benchmarks: list[str] = Field(
        default_factory=lambda: ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"],
        description="bundled benchmarks to check against",
    )
    extra_paths: list[str] = Field(default_factory=list, description="user benchmark files (JSONL/Parquet/datasets)")
    short_min_words: int = Field(
        4,
        ge=1,
        description="benchmark items shorter than ngram words (but this long) "
        "drop a task that contains their whole word sequence",
    )
    fuzzy: bool = Field(True, description="also catch lightly reworded benchmark items (in-order word coverage)")
    fuzzy_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="share of a benchmark item's words found in order in the task that marks it reworded",
    )
    fuzzy_probe: int = Field(3, ge=1, description="word n-gram length used to find fuzzy candidates")
    fuzzy_max_df: int = Field(50, ge=1, description="a probe n-gram in more benchmark items than this is ignored")
    # Same-problem confirmation (transforms/same_problem/rules.py, docs/same_problem.md).
    confirm: bool = Field(
        True,
        description="confirm each candidate on what makes a problem (numbers, reference "
        "answer, code behaviour, boilerplate-weighted text); off: any candidate drops",
    )
    semantic: bool = Field(
        True,
        description="also propose items whose quantities the task states and whose meaning "
        "is close (sentence embeddings): catches rewordings that keep few words",
    )
    numbers_min: float = Field(
        0.75,
        gt=0,
        le=1,
        description="share of a benchmark item's quantities the task must state to be that item (answers unknown)",
    )
    semantic_min: float = Field(0.6, ge=-1, le=1, description="cosine that makes a quantity-sharing item a candidate")
    text_min: float = Field(
        0.6,
        gt=0,
        le=1,
        description="IDF-weighted in-order word coverage that confirms an item with too few numbers to judge by",
    )
    run_code: bool = Field(
        True, description="run a code item's own tests against the task's reference solution (in the sandbox)"
    )
    background_paths: list[str] = Field(
        default_factory=list,
        description="clean tasks whose phrases count as boilerplate (IDF) when matching; JSONL/Parquet/datasets",
    )
