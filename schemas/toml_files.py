"""Reading a TOML file into one of the pydantic contracts (run config,
rates, acceptance profile), with every failure turned into one line a
person can act on: which file, which key, what is wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from tasksieve.schemas.regular_file import SourceRefused, open_regular

M = TypeVar("M", bound=BaseModel)


MAX_TOML_BYTES = 10 << 20  # no config, rates or profile is this large


def _read_small(path: Path) -> bytes:
    """A regular file's bytes, at most MAX_TOML_BYTES: /dev/zero, a FIFO or
    an endless file given as a config is an error, not a hang or MemoryError."""
    try:
        with open_regular(str(path)) as fh:
            data = fh.read(MAX_TOML_BYTES + 1)
    except SourceRefused as e:
        raise OSError(str(e)) from None
    if len(data) > MAX_TOML_BYTES:
        raise OSError(f"over {MAX_TOML_BYTES:,} bytes")
    return data


def load_toml_model(path: Path, model: type[M], what: str, error: type[Exception]) -> M:
    """`what` names the file in messages ("config", "rates", "profile");
    `error` is the exception the caller's users catch."""
    try:
        data = tomllib.loads(_read_small(path).decode("utf-8"))
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
