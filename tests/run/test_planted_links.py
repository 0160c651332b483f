"""Links planted in a shared or pre-created output folder are never
followed (issues 49.4, 48.4): for every name each command writes, replaces
or deletes (run, dedup, select, report, validate, sample-data), a link to a
file, to a folder and to nowhere is planted, the command runs as root, and
every target is untouched (the file's bytes, the folder's tree, nothing
created where the dangling link points). Each name gets each kind across
the three rotations; the `inner` layout plants links inside the folders
tasksieve keeps (staging, runs, caches, data docs, deliveries)."""

import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks

from tasksieve.transforms.same_problem.embed import CACHE_FOLDER

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
KINDS = ("file", "folder", "dangling")

# The embedding cache's folder for the bundled encoder (embed_cache.py).
EMBEDDINGS = CACHE_FOLDER
SET_NAMES = [
    "learnable.parquet",
    "results.parquet",
    "attempts.parquet",
    "quarantine.parquet",
    "costs.parquet",
    "selected.parquet",
    "curation.duckdb",
    "curation.duckdb.wal",
]
OUTER = {
    "run": [".tasksieve.lock", "_staging", "runs", "current", "attempt_cache", "embedding_cache", *SET_NAMES],
    "dedup": [".tasksieve.lock", "_staging", "runs", "current", "embedding_cache", *SET_NAMES],
    "select": [".tasksieve.lock", "select_cache", *SET_NAMES],
    "report": ["report.html"],
    "validate": ["summary.json", "report.html", "data_docs"],
    "sample-data": ["deliveries"],
}
# Inside folders tasksieve keeps: (folder, names); each name gets a kind of its own.
INNER = {
    "run": [
        ("_staging", ["dead-a", "dead-b", "dead-c"]),
        ("_staging/dead-run", [".lock"]),
        ("runs", ["x.1.unfinished", "x.2.unfinished", "old-set"]),
        ("attempt_cache", ["_finished"]),
        ("embedding_cache", [EMBEDDINGS]),
    ],
    "dedup": [
        ("_staging", ["dead-a", "dead-b", "dead-c"]),
        ("_staging/dead-run", [".lock"]),
        ("runs", ["x.1.unfinished", "x.2.unfinished", "old-set"]),
        ("embedding_cache", [EMBEDDINGS]),
    ],
    "select": [("select_cache", ["embeddings.npz"]), ("runs", ["x.1.unfinished", "x.2.unfinished", "old-set"])],
    "report": [],
    "validate": [("data_docs", ["index.html", "static", "validations"])],
    "sample-data": [("deliveries", ["vendor_a.jsonl", "vendor_b.parquet", "vendor_c"])],
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    server = FakeOpenAI()
    cfg = run_config(root / "run.toml", server.url, k=4)
    tasks = write_tasks(root / "tasks.jsonl", 6)
    finished = root / "finished"
    proc = subprocess.run(
        [*TASKSIEVE, "run", "--input", tasks, "--out", str(finished), "--config", cfg],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield {"cfg": cfg, "tasks": tasks, "finished": finished}
    server.close()


class Targets:
    """Link targets outside OUT, and the proof that each is untouched."""

    def __init__(self, root):
        self.root = root
        root.mkdir()
        self.made = []

    def new(self, kind: str):
        path = self.root / f"{kind}-{len(self.made)}"
        if kind == "file":
            path.write_bytes(b"precious bytes\n")
        elif kind == "folder":
            (path / "sub").mkdir(parents=True)
            (path / "sub" / "kept.txt").write_text("precious")
            (path / "top.txt").write_text("precious")
        self.made.append((kind, path))
        return path

    def check(self):
        for kind, path in self.made:
            if kind == "file":
                assert path.read_bytes() == b"precious bytes\n", path
            elif kind == "folder":
                tree = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
                assert tree == ["sub", "sub/kept.txt", "top.txt"], (path, tree)
                assert (path / "sub" / "kept.txt").read_text() == (path / "top.txt").read_text() == "precious"
            else:
                assert not os.path.lexists(path), f"something was created at the dangling link's target {path}"


def _plant(out, command: str, layout, targets: Targets) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if layout == "inner":
        n = 0
        for folder, names in INNER[command]:
            (out / folder).mkdir(parents=True, exist_ok=True)
            for name in names:
                path = out / folder / name
                if os.path.lexists(path):
                    os.unlink(path)
                os.symlink(targets.new(KINDS[n % 3]), path)
                n += 1
        return
    for i, name in enumerate(OUTER[command]):
        path = out / name
        if os.path.lexists(path):
            os.unlink(path) if not os.path.isdir(path) or os.path.islink(path) else shutil.rmtree(path)
        os.symlink(targets.new(KINDS[(i + layout) % 3]), path)


def _command(command: str, world, out, tmp_path) -> list[str]:
    if command == "run":
        return ["run", "--input", world["tasks"], "--out", str(out), "--config", world["cfg"]]
    if command == "dedup":
        return ["dedup", "--input", world["tasks"], "--out", str(out)]
    if command == "select":
        return ["select", str(out), "--budget-tasks", "2"]
    if command == "report":
        return ["report", str(out)]
    if command == "validate":
        return ["validate", world["tasks"], "--out", str(out)]
    return ["sample-data", str(out)]


CASES = [(c, layout) for c in OUTER for layout in (0, 1, 2, "inner") if layout != "inner" or INNER[c]]


@pytest.mark.parametrize("command,layout", CASES)
def test_planted_links_are_never_followed(world, tmp_path, command, layout):
    out = tmp_path / "out"
    if command in ("select", "report"):  # they work on a finished run's folder
        shutil.copytree(world["finished"], out, symlinks=True)
    targets = Targets(tmp_path / "targets")
    _plant(out, command, layout, targets)
    proc = subprocess.run(
        [*TASKSIEVE, *_command(command, world, out, tmp_path)], capture_output=True, text=True, env=ENV, timeout=900
    )
    targets.check()
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    expected = 1 if command == "validate" else 0  # the six tasks have no license: not acceptable, judged
    assert proc.returncode == expected, proc.stderr[-3000:]
    if command in ("run", "dedup", "select"):
        assert pq.read_table(out / "results.parquet").num_rows == 6
        assert not os.path.islink(out / "curation.duckdb.wal")  # DuckDB would write its WAL through it
    if command == "select":
        assert 1 <= pq.read_table(out / "selected.parquet").num_rows <= 2
    if command in ("report", "validate"):
        assert not (out / "report.html").is_symlink() and "<html" in (out / "report.html").read_text()[:2000].lower()
    if command == "sample-data":
        assert (out / "deliveries" / "vendor_a.jsonl").is_file() and not (out / "deliveries").is_symlink()
