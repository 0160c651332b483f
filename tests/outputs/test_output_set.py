"""The output set's commit, in process and fast: at every write step the
folder (copied as a kill at that instant would leave it) shows the old
set or the new one, whole, through its user-facing names; a folder of an
earlier version (plain files) is adopted without a mix; a failure leaves
the old set current and nothing unfinished."""

import os
import shutil

import pytest

from tasksieve.pipeline.outputs import finalize as outputs
from tasksieve.pipeline.outputs import output_set, safe_fs
from tasksieve.pipeline.outputs.output_set import SET_FILES, OutputSet, current_set

NAMES = [n for n in SET_FILES if n != "selected.parquet"]


def _shown(out):
    return {n: (out / n).read_text() if (out / n).exists() else None for n in SET_FILES}


def _snapshots(monkeypatch, out, dest):
    """Copy `out` at every step (before the step's write)."""
    taken = []

    def snap(name):
        taken.append((name, shutil.copytree(out, dest / str(len(taken)), symlinks=True)))

    for module in (output_set, outputs, safe_fs):
        monkeypatch.setattr(module, "step", snap)
    return taken


def _write_set(out, set_id, text, names=NAMES):
    with OutputSet(out, set_id) as s:
        for n in names:
            safe_fs.write_text_atomic(s.path(n), f"{text} {n}")
        s.commit()


def test_every_step_shows_the_old_set_or_the_new_one(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    _write_set(out, "run-a", "A")
    old = _shown(out)
    assert old["results.parquet"] == "A results.parquet" and old["selected.parquet"] is None
    taken = _snapshots(monkeypatch, out, tmp_path / "snap")
    _write_set(out, "run-b", "B", NAMES[:3] + ["selected.parquet"])  # drops some names, adds one
    new = _shown(out)
    assert new["results.parquet"] == "B results.parquet" and new["selected.parquet"] == "B selected.parquet"
    assert new["costs.parquet"] == "A costs.parquet"  # carried from the previous set, not rewritten
    states = []
    for name, snap in taken:
        shown = _shown(snap)
        assert shown in (old, new), (name, shown)
        states.append("old" if shown == old else "new")
    swap = [n for n, _ in taken].index("link current") + 1
    assert states == ["old"] * swap + ["new"] * (len(taken) - swap), list(zip([n for n, _ in taken], states))
    assert [p.name for p in (out / "runs").iterdir() if p.name.endswith(".unfinished")] == []


def test_a_folder_of_plain_files_is_adopted_without_a_mix(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    for n in NAMES:
        (out / n).write_text(f"plain {n}")
    old = _shown(out)
    taken = _snapshots(monkeypatch, out, tmp_path / "snap")
    _write_set(out, "run-b", "B", NAMES[:2])
    for name, snap in taken:
        assert _shown(snap) in (old, _shown(out)), name
    assert all(os.readlink(out / n) == f"current/{n}" for n in NAMES)
    assert _shown(out)["attempts.parquet"] == "plain attempts.parquet"


def test_a_failure_leaves_the_old_set_current_and_nothing_unfinished(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _write_set(out, "run-a", "A")
    old, cur = _shown(out), current_set(out)
    with pytest.raises(RuntimeError):
        with OutputSet(out, "run-b") as s:
            safe_fs.write_text_atomic(s.path("results.parquet"), "B")
            raise RuntimeError("disk gone")
    assert _shown(out) == old and current_set(out) == cur
    assert sorted(p.name for p in (out / "runs").iterdir()) == [cur.name]


def test_a_killed_sets_leftovers_are_removed_by_the_next_command(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _write_set(out, "run-a", "A")
    (out / "runs" / "run-b.x1.unfinished").mkdir()
    (out / "runs" / "run-b.x1.unfinished" / "results.parquet").write_text("half")
    _write_set(out, "run-c", "C")
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["run-a", "run-c"]
    _write_set(out, "run-d", "D")
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["run-c", "run-d"]  # the replaced set is kept


@pytest.mark.parametrize("planted", ["file", "folder", "dangling"])
def test_a_planted_current_or_runs_link_is_replaced_not_followed(tmp_path, planted):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "target"
    if planted == "file":
        target.write_text("keep")
    elif planted == "folder":
        (target / "sub").mkdir(parents=True)
        (target / "sub" / "f").write_text("keep")
    for name in ("current", "runs", *NAMES):
        os.symlink(target, out / name)
    _write_set(out, "run-a", "A")
    assert _shown(out)["results.parquet"] == "A results.parquet"
    if planted == "file":
        assert target.read_text() == "keep"
    elif planted == "folder":
        assert (
            sorted(p.name for p in target.rglob("*")) == ["f", "sub"] and (target / "sub" / "f").read_text() == "keep"
        )
    else:
        assert not os.path.lexists(target)
