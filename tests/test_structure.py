"""The shape of the code, checked: no import cycles, no function over 60
lines outside tests, a small top level in transforms/, and every sampling
setting decided as changing what an attempt is (cache key) or not."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tasksieve.schemas.config import SamplingConfig

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"schemas": "tasksieve.schemas", "transforms": "tasksieve.transforms", "pipeline": "tasksieve.pipeline"}
# Run inside the sandbox as scripts that import `sandbox_guard` (and its libraries), never tasksieve.
SANDBOX_PROGRAMS = {"codec.py", "seccomp.py", "guard.py", "attempt.py", "harness.py", "worker.py"}
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


_CLAUSES = ("else", "elif", "except", "finally", "case")


def _statement_lines(src: list[str], node: ast.AST) -> int:
    """A function's length with each statement on one line: the lines that
    start a statement or a clause, and blank and comment lines. The same
    before and after `ruff format`, which wraps one statement over many
    lines (a call's arguments one a line); that wrapping is layout, not size."""
    starts = {sub.lineno for sub in ast.walk(node) if isinstance(sub, ast.stmt)}
    n = 0
    for i in range(node.lineno, node.end_lineno + 1):
        s = src[i - 1].strip()
        if i in starts or not s or s.startswith("#") or s.split(" ")[0].rstrip(":") in _CLAUSES:
            n += 1
    return n


def _long_functions(folders) -> list[str]:
    found = []
    for folder in folders:
        for f in (ROOT / folder).rglob("*.py"):
            src = f.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(src))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = _statement_lines(src, node)
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
    # One statement wrapped over many lines counts once; 60 statements do not fit.
    wrapped = "    x = f(\n" + "".join(f"        {i},\n" for i in range(80)) + "    )\n"
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n{wrapped}")
    assert _long_functions(["pkg"]) == []


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
    "predicted": {"keep_signal": 0.9},
    "schedule": "waves",
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


# --- layers ---------------------------------------------------------------------------------
# schemas/ is the bottom layer, transforms/ the middle, pipeline/ the top: a
# module imports only from its own layer or those below. A private name
# (`_x`) is never imported from another package, nor read off a module of
# another package (`mod._x`): make it public or move it.
LAYERS = {"schemas": 0, "transforms": 1, "pipeline": 2}


def _package_of(module: str, is_init: bool) -> str:
    return module if is_init else module.rpartition(".")[0]


def _layer_violations(root: Path) -> list[str]:
    """Every import that runs up a layer, and every private name taken from
    another package, in the package folders under `root`."""
    found = []
    for folder, layer in LAYERS.items():
        for f in sorted((root / folder).rglob("*.py")):
            rel = f.relative_to(root)
            name = ".".join(("tasksieve", *rel.with_suffix("").parts)).removesuffix(".__init__")
            here = _package_of(name, f.name == "__init__.py")
            tree = ast.parse(f.read_text(encoding="utf-8"))
            modules = {}  # local name -> module it is bound to (import x.y as m / from x import m)
            for node in ast.walk(tree):
                pairs = []
                if isinstance(node, ast.Import):
                    pairs = [(a.name, None, a.asname or a.name.split(".")[0]) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    pairs = [(node.module, a.name, a.asname or a.name) for a in node.names]
                for module, imported, local in pairs:
                    if not module.startswith("tasksieve."):
                        continue
                    top = module.split(".")[1]
                    if LAYERS.get(top, -1) > layer:
                        found.append(f"{rel}:{node.lineno} imports {module} (a higher layer than {folder}/)")
                    if imported is None:
                        modules[local] = module
                        continue
                    if (
                        imported.startswith("_")
                        and not imported.startswith("__")
                        and module != here
                        and module.rpartition(".")[0] != here
                    ):
                        found.append(f"{rel}:{node.lineno} imports private {module}.{imported}")
                    modules[local] = f"{module}.{imported}"
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and node.value.id in modules
                ):
                    target = modules[node.value.id]
                    if _is_module(root, target) and target.rpartition(".")[0] != here and target != here:
                        found.append(f"{rel}:{node.lineno} reads private {target}.{node.attr}")
    return found


def _is_module(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    return (root.joinpath(*parts).with_suffix(".py")).is_file() or (root.joinpath(*parts) / "__init__.py").is_file()


def test_layers_hold():
    assert _layer_violations(ROOT) == []


def _copy_packages(tmp_path: Path) -> Path:
    import shutil

    for folder in LAYERS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize(
    "module, line, expected",
    [
        ("schemas/records.py", "from tasksieve.transforms.stage import KEPT", "a higher layer than schemas/"),
        ("schemas/records.py", "import tasksieve.pipeline.cli", "a higher layer than schemas/"),
        (
            "transforms/stage.py",
            "from tasksieve.pipeline.outputs.staging import SUFFIX",
            "higher layer than transforms/",
        ),
        ("pipeline/cli.py", "from tasksieve.transforms.dedup.near_judge import _pair", "imports private"),
        (
            "pipeline/cli.py",
            "from tasksieve.transforms.dedup import near_judge as nj\nX = nj._pair",
            "reads private tasksieve.transforms.dedup.near_judge._pair",
        ),
    ],
)
def test_the_layer_check_sees_a_planted_violation(tmp_path, module, line, expected):
    root = _copy_packages(tmp_path)
    assert _layer_violations(root) == []
    with open(root / module, "a", encoding="utf-8") as fh:
        fh.write(f"\n{line}\n")
    found = _layer_violations(root)
    assert len(found) == 1 and expected in found[0] and found[0].startswith(module), found


def test_a_private_name_within_its_package_is_allowed(tmp_path):
    root = _copy_packages(tmp_path)
    with open(root / "transforms/dedup/near.py", "a", encoding="utf-8") as fh:
        fh.write("\nfrom tasksieve.transforms.dedup.near_judge import _pair\n")
    assert _layer_violations(root) == []


# --- size -----------------------------------------------------------------------------------
MAX_MODULE_LINES = 500
MAX_PIPELINE_TOP_MODULES = 6


def _python_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / f
        for f in out
        if not Path(f).parts[0] == "tasksieve" or f == "tasksieve/__init__.py" or f.startswith("tasksieve/rewards")
    ]


def _long_modules(files, limit: int = MAX_MODULE_LINES) -> list[str]:
    found = []
    for f in files:
        if not f.exists():
            continue
        n = len(f.read_text(encoding="utf-8").splitlines())
        rel = f.relative_to(ROOT).as_posix() if f.is_relative_to(ROOT) else f.name
        if n > limit:
            found.append(f"{rel} ({n} lines)")
    return found


def test_no_module_over_500_lines():
    assert _long_modules(_python_files()) == []


def test_the_module_length_check_sees_a_long_module(tmp_path):
    f = tmp_path / "long.py"
    f.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _long_modules([f]) == [f"long.py ({MAX_MODULE_LINES + 1} lines)"]
    f.write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _long_modules([f]) == []


def test_pipeline_top_level_is_small():
    top = sorted(f.name for f in (ROOT / "pipeline").glob("*.py"))
    assert len(top) <= MAX_PIPELINE_TOP_MODULES, top
    packages = {d.name for d in (ROOT / "pipeline").iterdir() if (d / "__init__.py").exists()}
    assert {"run", "validate", "select", "report", "export", "setup", "outputs"} <= packages


def test_every_package_says_what_it_holds():
    for init in sorted(ROOT.glob("*/**/__init__.py")):
        if init.parts[len(ROOT.parts)] not in LAYERS:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} has no docstring saying what it holds"


# A bench measurement is cited by what it measured (bench/README.md keeps
# today's numbers only), never by the "round" of work that produced it.
BENCH_ROUND = re.compile(r"bench\S*[^\n]{0,60}\bround\s+[0-9]|\bround\s+[0-9]+\b[^\n]{0,60}bench", re.IGNORECASE)


def _round_citations(files) -> list[str]:
    hits = []
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if BENCH_ROUND.search(line):
                hits.append(f"{f.name}:{i}")
    return hits


def test_no_comment_or_doc_cites_a_bench_round():
    docs = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert _round_citations([*_python_files(), *docs]) == []


def test_the_round_check_sees_a_citation(tmp_path):
    f = tmp_path / "m.py"
    cited = "# 12% faster (bench/README.md, round" + " 7)"
    unrelated = "x = 1  # Round 42.5 down."
    f.write_text(f"{cited}\n{unrelated}\n")
    assert _round_citations([f]) == ["m.py:1"]


# --- ruff -----------------------------------------------------------------------------------
def _ruff(*args: str) -> subprocess.CompletedProcess:
    try:
        import ruff  # noqa: F401  (pinned in requirements.lock, installed by scripts/setup.sh)
    except ImportError:
        pytest.fail("ruff is not installed: run scripts/setup.sh (it is pinned in requirements.lock)")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check_passes():
    r = _ruff("check")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_format_check_passes():
    r = _ruff("format", "--check")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
