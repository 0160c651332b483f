"""The shape of the code, checked: no import cycles, no function over 60
lines outside tests, a small top level in transforms/, and every sampling
setting decided as changing what an attempt is (cache key) or not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tasksieve.schemas.config import SamplingConfig

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"schemas": "tasksieve.schemas", "transforms": "tasksieve.transforms", "pipeline": "tasksieve.pipeline"}
# Run inside the sandbox as scripts that import `sandbox_guard`, never tasksieve.
SANDBOX_PROGRAMS = {"guard.py", "attempt.py", "harness.py"}
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    """{dotted name: file} for every module of the package."""
    mods = {"tasksieve": ROOT / "tasksieve" / "__init__.py"}
    for folder, prefix in PACKAGE_DIRS.items():
        for f in (ROOT / folder).rglob("*.py"):
            if f.name in SANDBOX_PROGRAMS and f.parent.name == "sandbox":
                continue
            parts = f.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((prefix, *parts))
            mods[name.removesuffix(".__init__")] = f
    return mods


def _imports(path: Path, name: str, mods: dict) -> set[str]:
    """The package's modules this file imports, at any depth (function-level
    imports included: a lazy import still makes a cycle of meaning)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m in mods and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycle():
    mods = _modules()
    # Importing a.b.c runs a/__init__ and a/b/__init__ too; those are kept
    # empty, so edges into package __init__ files cannot close a cycle.
    graph = {name: _imports(path, name, mods) for name, path in mods.items()}
    assert sum(len(v) for v in graph.values()) > 50  # the walk sees the imports
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _long_functions(folders) -> list[str]:
    found = []
    for folder in folders:
        for f in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        found.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_over_60_lines_outside_tests():
    assert _long_functions(["schemas", "transforms", "pipeline", "tasksieve", "bench"]) == []


def test_the_length_check_sees_a_long_function(tmp_path, monkeypatch):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def long():\n{body}\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _long_functions(["pkg"]) == [f"pkg/m.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_transforms_top_level_is_small_and_grouped():
    top = sorted(f.name for f in (ROOT / "transforms").glob("*.py"))
    assert len([n for n in top if n != "__init__.py"]) <= 8, top
    packages = {d.name for d in (ROOT / "transforms").iterdir() if (d / "__init__.py").exists()}
    assert {"dedup", "decontam", "verify", "backends", "sample"} <= packages


def test_every_sampling_setting_has_a_cache_key_decision():
    """A new [sampling] field must be put in GENERATION_FIELDS (it changes
    what an attempt would be: part of the attempt-cache key) or in
    SCHEDULE_FIELDS (it does not); left out of both, this fails."""
    fields = set(SamplingConfig.model_fields)
    gen, schedule = SamplingConfig.GENERATION_FIELDS, SamplingConfig.SCHEDULE_FIELDS
    assert not gen & schedule
    assert fields == gen | schedule, f"undecided: {sorted(fields - gen - schedule)}"


CHANGED = {
    "temperature": 0.5,
    "top_p": 0.9,
    "max_tokens": 100,
    "seed": 7,
    "system_prompt": "other",
    "system_prompts": {"code": "other"},
    "mode": "fixed",
    "k": 3,
    "waves": [1],
    "tasks_per_batch": 7,
    "groups": 2,
    "bayes": {"prior_a": 1.0},
}


@pytest.mark.parametrize("field", sorted(SamplingConfig.model_fields))
def test_sampler_key_follows_exactly_the_generation_fields(field):
    assert field in CHANGED, f"add a changed value for the new field {field!r}"
    base = SamplingConfig()
    other = SamplingConfig.model_validate({**base.model_dump(), field: CHANGED[field]})
    assert getattr(other, field) != getattr(base, field)
    changed = other.sampler_key() != base.sampler_key()
    assert changed == (field in SamplingConfig.GENERATION_FIELDS)


@pytest.mark.parametrize(
    "shape, schema", [("Task", "TASK_SCHEMA"), ("Result", "RESULT_SCHEMA"), ("Attempt", "ATTEMPT_SCHEMA")]
)
def test_typed_row_shapes_mirror_the_arrow_contract(shape, schema):
    from tasksieve.schemas import records, rows

    assert set(getattr(rows, shape).__annotations__) | _inherited(getattr(rows, shape)) == set(
        getattr(records, schema).names
    )


def _inherited(cls) -> set[str]:
    return {k for base in cls.__mro__[1:] for k in getattr(base, "__annotations__", {})}


def test_readme_fits_and_links_every_design_note():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 350
    for note in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{note.name}" in readme, f"README does not link docs/{note.name}"
    assert "bench/README.md" in readme
