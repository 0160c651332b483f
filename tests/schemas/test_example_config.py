"""tasksieve.example.toml lists every config key with its default, and
nothing else: compared with the schema (schemas/config.py) both ways.

A key whose default is unset (None) cannot be written in TOML; the example
shows it as a commented-out line (`# key = ...`) in its section, and that
is what is required of it. Everything else must be a live key holding
exactly the schema's default, so the example loads to the default config.
"""

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel

from tasksieve.schemas.config import RunConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "tasksieve.example.toml"

_SECTION = re.compile(r"^\[([A-Za-z0-9_.]+)\]")
_COMMENTED_KEY = re.compile(r"^#\s*([A-Za-z_][A-Za-z0-9_]*)\s*=")


def schema_defaults(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Every key of the schema, dotted ("dedup.semantic"), with its default;
    nested sections are walked, not listed as keys of their own."""
    keys = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.update(schema_defaults(annotation, path + "."))
        else:
            keys[path] = field.get_default(call_default_factory=True)
    return keys


def example_keys(data: dict, prefix: str = "") -> dict[str, object]:
    """The live keys of the parsed example, dotted; a table is a section
    unless the schema holds it as one value (a dict field)."""
    keys = {}
    for name, value in data.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and not _is_dict_field(path):
            keys.update(example_keys(value, path + "."))
        else:
            keys[path] = value
    return keys


def _is_dict_field(path: str) -> bool:
    model: type[BaseModel] = RunConfig
    *sections, last = path.split(".")
    for name in sections:
        field = model.model_fields.get(name)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return False
        model = field.annotation
    field = model.model_fields.get(last)
    return field is not None and getattr(field.annotation, "__origin__", None) is dict


def commented_keys(text: str) -> set[str]:
    """`# key = ...` lines, dotted with the section they sit in."""
    section, keys = "", set()
    for line in text.splitlines():
        line = line.strip()
        if m := _SECTION.match(line):
            section = m.group(1) + "."
        elif m := _COMMENTED_KEY.match(line):
            keys.add(section + m.group(1))
    return keys


def _compare(text: str) -> list[str]:
    """What is wrong with an example text, one line per key."""
    live = example_keys(tomllib.loads(text))
    commented = commented_keys(text)
    problems = []
    for key, default in schema_defaults(RunConfig).items():
        if default is None:
            if key in live:
                problems.append(f"{key}: the default is unset; show it as a commented line, not {live[key]!r}")
            elif key not in commented:
                problems.append(f"{key}: missing (default unset: expected a line '# {key.rsplit('.', 1)[-1]} = ...')")
        elif key not in live:
            problems.append(f"{key}: missing (default {default!r})")
        elif live[key] != default:
            problems.append(f"{key}: the example says {live[key]!r}, the default is {default!r}")
    known = set(schema_defaults(RunConfig))
    problems += [f"{key}: not a config key" for key in sorted((set(live) | commented) - known)]
    return problems


def test_example_lists_every_key_with_its_default_and_nothing_else():
    assert _compare(EXAMPLE.read_text()) == []


def test_example_loads_to_the_default_config():
    assert RunConfig.model_validate(tomllib.loads(EXAMPLE.read_text())) == RunConfig()


def test_a_key_left_out_or_changed_or_unknown_is_named():
    text = EXAMPLE.read_text()
    without = re.sub(r"(?m)^semantic_min = 0\.8 .*\n", "", text, count=1)
    assert without != text
    assert _compare(without) == ["dedup.semantic_min: missing (default 0.8)"]
    changed = text.replace("\nk = 8 ", "\nk = 9 ", 1)
    assert _compare(changed) == ["sampling.k: the example says 9, the default is 8"]
    unset = re.sub(r"(?m)^# save_index = .*\n", "", text, count=1)
    assert [p.split(":")[0] for p in _compare(unset)] == ["dedup.save_index"]
    extra = text.replace("[band]", "[band]\nmax_pass_rat = 1.0", 1)
    assert _compare(extra) == ["band.max_pass_rat: not a config key"]
