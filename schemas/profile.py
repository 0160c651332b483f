"""The acceptance profile of `tasksieve validate`: the thresholds a delivery
must meet, loaded from a small TOML file into a validated model.

Same rules as the run config (schemas/config.py): every key has a
documented default (schemas/profiles/default.toml is the documentation), a
typo is an error, and a profile that does not validate is one line for a
person (ProfileError), raised before anything is read.
"""

from __future__ import annotations

from datetime import date
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasksieve.schemas.config import DecontamConfig, DedupConfig
from tasksieve.schemas.records import DOMAINS
from tasksieve.schemas.toml_files import load_toml_model


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Thresholds(_Section):
    max_schema_failures: int = Field(0, ge=0)
    max_duplicate_rate: float = Field(0.02, ge=0, le=1)
    max_pool_overlap_rate: float = Field(0.02, ge=0, le=1)
    max_contaminated: int = Field(0, ge=0)
    max_broken_verifiers: int = Field(0, ge=0)
    min_learnable_share: float = Field(0.2, ge=0, le=1)


class Fields(_Section):
    allowed_domains: list[str] = Field(default_factory=lambda: list(DOMAINS))
    allowed_licenses: list[str] = Field(
        default_factory=lambda: ["CC-BY-4.0", "CC-BY-SA-4.0", "CC0-1.0", "MIT", "Apache-2.0"]
    )
    require_license: bool = True
    min_prompt_chars: int = Field(10, ge=1)
    max_prompt_chars: int = Field(20_000, gt=0)
    max_field_chars: int = Field(100_000, gt=0)
    max_row_bytes: int = Field(1_000_000, gt=0)
    expert_minutes_min: float = Field(0.5, ge=0)
    expert_minutes_max: float = Field(600, gt=0)
    expert_cost_usd_min: float = Field(0.0, ge=0)
    expert_cost_usd_max: float = Field(2000, gt=0)
    earliest_created_at: date = date(2000, 1, 1)

    @model_validator(mode="after")
    def _consistent(self):
        unknown = sorted(set(self.allowed_domains) - set(DOMAINS))
        if unknown:
            raise ValueError(f"fields.allowed_domains: unknown domain(s) {unknown}; known: {', '.join(DOMAINS)}")
        for lo, hi in (
            ("min_prompt_chars", "max_prompt_chars"),
            ("expert_minutes_min", "expert_minutes_max"),
            ("expert_cost_usd_min", "expert_cost_usd_max"),
        ):
            if getattr(self, lo) > getattr(self, hi):
                raise ValueError(f"fields.{lo} must not exceed fields.{hi}")
        return self


class Profile(_Section):
    thresholds: Thresholds = Field(default_factory=Thresholds)
    fields: Fields = Field(default_factory=Fields)
    # The run config's own sections, so validate judges duplicates and
    # contamination exactly as `run` and `dedup` do (one home per setting).
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    decontam: DecontamConfig = Field(default_factory=DecontamConfig)


class ProfileError(Exception):
    """A profile that cannot be used; the message is one line for a person."""


def default_profile_path() -> Path:
    return Path(str(resources.files("tasksieve.schemas").joinpath("profiles", "default.toml")))


def load_profile(path: str | Path | None) -> Profile:
    """The profile at `path`; None or "default" is the bundled default."""
    p = default_profile_path() if path in (None, "default") else Path(path)
    return load_toml_model(p, Profile, "profile", ProfileError)
