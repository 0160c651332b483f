"""Damaged and lying input files (tests/hostile_files.py) and special
files: each is refused whole with one reason, or read as the rows it
really holds, never a crash, never unbounded work, and the count and the
reader agree (the run's row accounting).

The reading runs in a forked child, so a file that crashes the process
(SIGSEGV, as damaged Arrow files once did) fails its test instead of
killing pytest."""

import json
import os
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hostile_files
from tasksieve.transforms import read
from tasksieve.transforms.read import InputError, expand_inputs

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def in_child(fn, *args):
    """fn(*args) in a forked child: ('ok', value), ('raised', text) or
    ('signal', number) if the child died."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(r)
        try:
            out = ("ok", fn(*args))
        except BaseException as e:
            out = ("raised", f"{type(e).__name__}: {e}")
        with os.fdopen(w, "wb") as fh:
            pickle.dump(out, fh)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "signal", os.WTERMSIG(status)
    return pickle.loads(data)


def count_and_read(path: str):
    got = list(read.read_source(path, 1_000_000))
    return read.count_rows(path, 1_000_000), [(r["line"], r["error"]) for r in got]


@pytest.mark.parametrize("case", hostile_files.CASES, ids=lambda c: c.__name__)
def test_each_lying_file_is_refused_whole_or_read_as_it_is(case, tmp_path):
    name, expected = case(tmp_path)
    kind, got = in_child(count_and_read, str(tmp_path / name))
    assert kind == "ok", (kind, got)
    counted, rows = got
    assert counted == len(rows)  # the accounting check's two sides agree
    if expected[0] == "refused":
        assert len(rows) == 1, rows[:3]
        line, error = rows[0]
        assert line == 0 and error and expected[1] in error, error
        assert len(error) <= 300
    else:
        _, n, bad, reason = expected
        errors = [e for _, e in rows if e]
        assert len(rows) == n and len(errors) == bad, rows[:3]
        assert all(reason in e for e in errors)


def _damaged_copies(data: bytes, seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        how = rng.randrange(3)
        if how == 0:  # a block of garbage
            pos, size = rng.randrange(len(data)), rng.choice([8, 64, 4096])
            yield (data[:pos] + rng.randbytes(size) + data[pos + size :])[: len(data)]
        elif how == 1:  # bytes flipped
            b = bytearray(data)
            for _ in range(rng.randint(1, 20)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            yield bytes(b)
        else:
            yield data[: rng.randrange(len(data))]


def _accounted(path: str):
    counted, rows = count_and_read(path)
    return counted == len(rows), len(rows)


@pytest.mark.slow
def test_randomly_damaged_arrow_files_never_crash_the_reader(tmp_path):
    """Garbage blocks, flipped bytes, truncation: on the old reader some of
    these died with SIGSEGV (datasets memory-maps the file, to_pylist
    trusted its offsets)."""
    folder = hostile_files._datasets(tmp_path / "ds", pa.Table.from_pylist(hostile_files.rows(3000)))
    data = (folder / hostile_files.ARROW).read_bytes()
    for i, damaged in enumerate(_damaged_copies(data, 7, 40)):
        (folder / hostile_files.ARROW).write_bytes(damaged)
        kind, got = in_child(_accounted, str(folder))
        assert kind == "ok" and got[0], (i, kind, got)


def test_randomly_damaged_parquet_files_never_crash_the_reader(tmp_path):
    table = pa.Table.from_pylist([dict(r, tags=["a", "b"][: i % 3]) for i, r in enumerate(hostile_files.rows(2000))])
    data = hostile_files._parquet_bytes(table, row_group_size=500)
    path = tmp_path / "d.parquet"
    for i, damaged in enumerate(_damaged_copies(data, 8, 30)):
        path.write_bytes(damaged)
        kind, got = in_child(_accounted, str(path))
        assert kind == "ok" and got[0], (i, kind, got)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "/proc/self/status", "/proc/self/environ", "fifo"])
def test_devices_and_endless_inputs_given_directly_are_refused_in_one_line(target, tmp_path):
    if target == "fifo":
        target = str(tmp_path / "pipe.jsonl")
        os.mkfifo(target)
    link = tmp_path / "input.jsonl"
    os.symlink(target, link)
    for given in (target, str(link)):
        with pytest.raises(InputError) as e:
            expand_inputs([given])
        assert "\n" not in str(e.value) and "is not read" in str(e.value), str(e.value)


def test_a_link_into_proc_inside_a_folder_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "good.jsonl").write_text(json.dumps(hostile_files.rows(1)[0]) + "\n")
    os.symlink("/proc/self/status", tmp_path / "status.jsonl")
    warnings = []
    assert expand_inputs([str(tmp_path)], warn=warnings.append) == [str(tmp_path / "good.jsonl")]
    assert any("status.jsonl: a link to /proc/" in w and "outside the input folder" in w for w in warnings), warnings


def test_links_out_of_an_input_folder_are_not_followed(tmp_path):
    """A delivery is untrusted: a link in it to the host's files (a folder
    of credentials, /etc) would have their lines read as rows and kept in
    quarantine.parquet's `raw`. Links inside the folder are followed; what
    is outside is read only when named as an input."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "credentials.json").write_text('{"api_key": "sk-HOST-SECRET"}\n')
    (host / "notes.jsonl").write_text(json.dumps(hostile_files.rows(1)[0]) + "\n")
    d = tmp_path / "delivery"
    (d / "sub").mkdir(parents=True)
    (d / "good.jsonl").write_text(json.dumps(hostile_files.rows(1)[0]) + "\n")
    os.symlink(host, d / "sub" / "linked_folder")
    os.symlink(host / "notes.jsonl", d / "linked_file.jsonl")
    os.symlink("../good.jsonl", d / "sub" / "inside.jsonl")  # a second name for a file inside: read once
    os.symlink(d / "sub", d / "sub_again")  # a link to a folder inside: followed (already read)
    warnings = []
    found = expand_inputs([str(d)], warn=warnings.append)
    assert found == [str(d / "good.jsonl")], found
    outside = [w for w in warnings if "outside the input folder" in w]
    assert len(outside) == 2 and all(str(host) in w for w in outside), warnings
    assert expand_inputs([str(host / "notes.jsonl")]) == [str(host / "notes.jsonl")]
    # A folder given as an input through a link is read: the link is the user's own.
    os.symlink(d, tmp_path / "via_link")
    assert expand_inputs([str(tmp_path / "via_link")], warn=lambda m: None) == [
        str(tmp_path / "via_link" / "good.jsonl")
    ]


def test_files_on_a_ram_disk_under_dev_shm_are_read(tmp_path):
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        path = Path(d) / "d.jsonl"
        path.write_text(json.dumps(hostile_files.rows(1)[0]) + "\n")
        assert expand_inputs([str(path)]) == [str(path)]
        assert [r["error"] for r in read.read_source(str(path), 10**6)] == [None]


def test_a_file_that_grows_while_read_is_not_read_past_its_size(tmp_path):
    path = tmp_path / "grow.jsonl"
    line = (json.dumps(hostile_files.rows(1)[0]) + "\n").encode()
    path.write_bytes(line * 3)
    fh = read._open_jsonl(str(path))
    with open(path, "ab") as more:  # an endless writer appends while it is read
        more.write(line * 1000)
    with pytest.raises(read.SourceRefused, match="grew past its"), fh:
        list(read.physical_lines(fh, 10**6))


@pytest.mark.slow
def test_config_files_that_are_devices_are_one_line_errors(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps(hostile_files.rows(1)[0]) + "\n")
    proc = subprocess.run(
        [
            *TASKSIEVE,
            "dedup",
            "--input",
            str(tmp_path / "d.jsonl"),
            "--out",
            str(tmp_path / "o"),
            "--config",
            "/dev/zero",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("tasksieve: error:"), proc.stderr[-2000:]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lying")
    inputs = root / "in"
    expected = hostile_files.write_all(inputs)
    (inputs / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hostile_files.rows(20, 5000)))
    dedup = subprocess.run(
        [*TASKSIEVE, "dedup", "--input", str(inputs), "--out", str(root / "out")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    validate = subprocess.run(
        [*TASKSIEVE, "validate", str(inputs), "--out", str(root / "validation"), "--no-data-docs"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return root, expected, dedup, validate


def _total_rows(expected: dict) -> int:
    return 20 + sum(1 if e[0] == "refused" else e[1] for e in expected.values())


@pytest.mark.slow
def test_dedup_quarantines_each_lying_file_in_one_line(cli_runs):
    root, expected, proc, _ = cli_runs
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    m = re.search(r"row accounting: rows_in (\d+) == kept (\d+) \+ dropped (\d+) \+ quarantined (\d+)  OK", proc.stdout)
    assert m, proc.stdout[-2000:]
    assert int(m.group(1)) == _total_rows(expected)
    quarantine = pq.read_table(root / "out" / "quarantine.parquet").to_pylist()
    for name, e in expected.items():
        mine = [q for q in quarantine if Path(q["source_file"]).name.split("#")[0] == name]
        if e[0] == "refused":
            assert len(mine) == 1 and mine[0]["line"] == 0 and e[1] in mine[0]["reason"], (name, mine[:3])
        else:
            assert len(mine) == e[2], (name, mine[:3])


@pytest.mark.slow
def test_validate_names_each_lying_file_once(cli_runs):
    root, expected, _, proc = cli_runs
    assert proc.returncode == 1, proc.stderr[-3000:]  # not acceptable; no crash
    assert "Traceback" not in proc.stderr
    summary = json.loads((root / "validation" / "summary.json").read_text())
    assert summary["delivery"]["rows_read"] == _total_rows(expected)
    flagged = [o["where"] for c in summary["checks"] for o in c["offenders"] if o.get("stage") == "read"]
    for name, e in expected.items():
        if e[0] == "refused":
            assert sum(Path(w.rsplit(":", 1)[0]).name == name for w in flagged) == 1, (name, flagged)


def test_deeply_nested_delivery_folders_are_scanned_without_recursion_error(tmp_path):
    top = tmp_path / "in"
    top.mkdir()
    (top / "top.jsonl").write_text(json.dumps({"task_id": "t", "prompt": "p", "answer": "1"}) + "\n")
    deep = str(top)
    for _ in range(1100):  # past Python's default recursion limit of 1,000 (os.makedirs recurses too)
        deep += "/a"
        os.mkdir(deep)
    deep = top.joinpath(*["a"] * 1100)
    (deep / "bottom.jsonl").write_text(json.dumps({"task_id": "b", "prompt": "q", "answer": "2"}) + "\n")
    try:
        found = expand_inputs([str(top)], warn=lambda m: None)
        assert [os.path.basename(p) for p in found] == ["bottom.jsonl", "top.jsonl"]
    finally:  # pytest's own clean-up (shutil.rmtree) recurses too: undo the nesting here
        os.remove(deep / "bottom.jsonl")
        for _ in range(1100):
            os.rmdir(deep)
            deep = deep.parent
