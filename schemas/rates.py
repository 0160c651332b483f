"""The rates table: what a minute of expert time, a million tokens, a
GPU-hour and a CPU-hour cost. Every dollar in a run's `costs` comes from
these figures, and the rates a run used are stored with the run.

A rates file is TOML (see `rates.default.toml` beside this module, which is
also the default). It is validated on load: a missing or negative rate, a
unit typo or an unknown key fails with one line naming the field; a model
with no rate fails when the run starts, before anything is sampled.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasksieve.schemas.config import ConfigError
from tasksieve.schemas.toml_files import load_toml_model

DEFAULT_RATES = "rates.default.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExpertRates(_Strict):
    usd_per_hour: float = Field(ge=0, description="used for tasks with expert_minutes but no expert_cost_usd")
    usd_per_hour_by_source: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _non_negative(self):
        for source, rate in self.usd_per_hour_by_source.items():
            if rate < 0:
                raise ValueError(f"expert rate for source {source!r} is negative")
        return self

    def hourly(self, source: str) -> float:
        return self.usd_per_hour_by_source.get(source, self.usd_per_hour)


class ModelRate(_Strict):
    """How one model's generation is priced: by tokens, or by GPU-hours of
    measured engine time."""

    model: str = Field(description="model name (the part of model_id before '@'), or '*' for any other")
    unit: Literal["tokens", "gpu_hour"]
    usd_per_m_input: float | None = Field(None, ge=0)
    usd_per_m_output: float | None = Field(None, ge=0)
    usd_per_gpu_hour: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _complete(self):
        if self.unit == "tokens" and (self.usd_per_m_input is None or self.usd_per_m_output is None):
            raise ValueError(f"model {self.model!r}: unit 'tokens' needs usd_per_m_input and usd_per_m_output")
        if self.unit == "gpu_hour" and self.usd_per_gpu_hour is None:
            raise ValueError(f"model {self.model!r}: unit 'gpu_hour' needs usd_per_gpu_hour")
        return self

    def usd(self, prompt_tokens: int, completion_tokens: int, engine_seconds: float) -> tuple[float, float, str]:
        """(usd, quantity, unit) for one generation."""
        if self.unit == "tokens":
            usd = prompt_tokens / 1e6 * self.usd_per_m_input + completion_tokens / 1e6 * self.usd_per_m_output
            return usd, float(prompt_tokens + completion_tokens), "token"
        return engine_seconds / 3600.0 * self.usd_per_gpu_hour, engine_seconds, "gpu_second"


class VerificationRates(_Strict):
    usd_per_cpu_hour: float = Field(ge=0)


class Rates(_Strict):
    expert: ExpertRates
    generation: list[ModelRate] = Field(min_length=1)
    verification: VerificationRates

    def for_model(self, model_id: str) -> ModelRate:
        name = model_id.split("@", 1)[0]
        exact = [r for r in self.generation if r.model == name]
        wildcard = [r for r in self.generation if r.model == "*"]
        if exact or wildcard:
            return (exact or wildcard)[0]
        known = ", ".join(r.model for r in self.generation)
        raise ConfigError(
            f'rates: no generation rate for model {name!r} (known: {known}); add a [[generation]] entry or model = "*"'
        )

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


def load_rates(path: str | Path | None = None) -> Rates:
    """The rates at `path`; None is the bundled rates.default.toml."""
    p = Path(str(resources.files("tasksieve.schemas").joinpath(DEFAULT_RATES))) if path is None else Path(path)
    return load_toml_model(p, Rates, "rates", ConfigError)
