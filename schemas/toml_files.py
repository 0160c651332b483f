"""Reading a TOML file into one of the pydantic contracts (run config,
rates, acceptance profile), with every failure turned into one line a
person can act on: which file, which key, what is wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def load_toml_model(path: Path, model: type[M], what: str, error: type[Exception]) -> M:
    """`what` names the file in messages ("config", "rates", "profile");
    `error` is the exception the caller's users catch."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"cannot read {what} file {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{what} {path} is not valid TOML: {e}") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise error(f"{what} {path}: {where}: {first['msg']}{more}") from None
