"""The attempt cache is authenticated: what another user of a shared cache
folder plants there (a JSONL of "generations", a `_finished` marker, an
edited entry, an entry moved from another task/model/seed, a renamed file)
is ignored with a warning and regenerated; a damaged file is set aside;
the key lives outside the cache, this user's alone."""

import json
import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fakes import ScriptedBackend
from tasksieve.pipeline.run.errors import RunError
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.sample import cache_auth
from tasksieve.transforms.sample.attempt_cache import (
    CACHE_SCHEMA,
    FINISHED_DIR,
    finished_runs,
    read_cache_file,
    settle_run,
    signed,
)


def _entry(**kw):
    rec = {
        "content_hash": "h1",
        "model_id": "m@1",
        "sampler_key": "s",
        "attempt_idx": 0,
        "seed": 7,
        "completion": "\\boxed{4}",
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "finish_reason": "stop",
        "gen_seconds": 0.25,
        "error": None,
        "run_id": "r1",
    }
    return dict(rec, **kw)


def _write_jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def _read(path, model="m@1"):
    return list(read_cache_file(str(path), model, "s"))


# --- entries ---------------------------------------------------------------------------------------


def test_a_signed_entry_is_read_back(tmp_path):
    (rec,) = _read(_write_jsonl(tmp_path / "r1-5.jsonl", [signed(_entry())]))
    assert rec["completion"] == "\\boxed{4}" and rec["run_id"] == "r1"


@pytest.mark.parametrize(
    "planted",
    [
        _entry(),  # no MAC at all
        _entry(mac="0" * 64),  # a made-up MAC
        _entry(mac=None),
        _entry(mac=12),
        _entry(mac="\u00e9" * 64),  # not ASCII
    ],
)
def test_a_planted_entry_is_ignored_with_a_warning(tmp_path, capfd, planted):
    assert _read(_write_jsonl(tmp_path / "r1-5.jsonl", [planted])) == []
    assert "fail the authentication check" in capfd.readouterr().err


@pytest.mark.parametrize(
    "field,value",
    [
        ("completion", "\\boxed{5}"),
        ("content_hash", "h2"),
        ("seed", 8),
        ("attempt_idx", 3),
        ("run_id", "r1"),
        ("prompt_tokens", 0),
        ("gen_seconds", 0.0),
        ("finish_reason", "length"),
    ],
)
def test_an_edited_or_moved_entry_is_ignored(tmp_path, capfd, field, value):
    rec = signed(_entry())
    rec[field] = value if rec[field] != value else value + "x"
    assert _read(_write_jsonl(tmp_path / "r1-5.jsonl", [rec])) == []
    assert "fail the authentication check" in capfd.readouterr().err


def test_an_entry_moved_to_another_model_is_ignored(tmp_path):
    rec = dict(signed(_entry()), model_id="m@2")
    assert _read(_write_jsonl(tmp_path / "r1-5.jsonl", [rec]), model="m@2") == []


def test_a_file_renamed_to_another_run_is_ignored(tmp_path):
    assert _read(_write_jsonl(tmp_path / "r2-5.jsonl", [signed(_entry())])) == []
    path = tmp_path / "r2.parquet"
    pq.write_table(pa.Table.from_pylist([signed(_entry())], schema=CACHE_SCHEMA), path)
    assert _read(path) == []


def test_an_error_is_never_read_back_as_a_generation(tmp_path):
    recs = [
        signed(_entry(error="HTTP 401: bad key", completion="", finish_reason="error")),
        signed(_entry(attempt_idx=1, finish_reason="request_failed", completion="")),
    ]
    assert _read(_write_jsonl(tmp_path / "r1-5.jsonl", recs)) == []


def test_an_over_long_line_and_garbage_are_skipped(tmp_path, monkeypatch):
    from tasksieve.transforms.sample import attempt_cache

    monkeypatch.setattr(attempt_cache, "MAX_LINE_BYTES", 100)
    path = tmp_path / "r1-5.jsonl"
    good = (json.dumps(signed(_entry(completion="ok"))) + "\n").encode()
    path.write_bytes(b"x" * 1000 + b"\n\xff\xfe garbage\n[[[[\n" + b"[" * 50 + b"\n")
    assert _read(path) == []
    monkeypatch.setattr(attempt_cache, "MAX_LINE_BYTES", 10_000)
    path.write_bytes(b"x" * 20_000 + b"\n" + good)
    assert [r["completion"] for r in _read(path)] == ["ok"]  # the line after an over-long one is read


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_parquet_file_is_set_aside_with_a_warning(tmp_path, capfd, damage):
    path = tmp_path / "r1.parquet"
    pq.write_table(pa.Table.from_pylist([signed(_entry())], schema=CACHE_SCHEMA), path)
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"PAR1" + os.urandom(300), "empty": b""}[damage])
    assert _read(path) == []
    assert not path.exists()
    (aside,) = tmp_path.glob("r1.parquet.damaged-*")
    err = capfd.readouterr().err
    assert "cannot be read" in err and aside.name in err and "\n" not in err.strip()


# --- markers ------------------------------------------------------------------------------------------


def test_only_markers_this_user_wrote_count_as_finished(tmp_path, capfd):
    attempts = pa.Table.from_pylist([dict(_entry(), passed=True, reused_from_run=None)])
    settle_run(str(tmp_path), "r1", attempts, frozenset())
    (tmp_path / FINISHED_DIR / "evil").touch()  # planted, empty
    (tmp_path / FINISHED_DIR / "evil2").write_text("0" * 64)  # planted, a made-up MAC
    (tmp_path / FINISHED_DIR / "r9").write_bytes((tmp_path / FINISHED_DIR / "r1").read_bytes())  # copied
    assert finished_runs(str(tmp_path)) == frozenset({"r1"})
    assert "3 marker(s)" in capfd.readouterr().err
    # The settled file is signed: read back whole.
    (rec,) = _read(tmp_path / "r1.parquet")
    assert rec["completion"] == "\\boxed{4}"


# --- the key --------------------------------------------------------------------------------------------


@pytest.fixture
def own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TASKSIEVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cache_auth, "_KEY", {})
    return tmp_path / "home"


def test_the_key_is_made_once_private_to_the_user(own_home):
    keys = []
    threads = [threading.Thread(target=lambda: keys.append(cache_auth.cache_key())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and len(keys[0]) == cache_auth.KEY_BYTES
    path = cache_auth.key_path()
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_key_others_can_read_or_write_is_refused(own_home):
    cache_auth.cache_key()
    os.chmod(cache_auth.key_path(), 0o644)
    cache_auth._KEY.clear()
    with pytest.raises(cache_auth.CacheKeyError, match="chmod 600"):
        cache_auth.cache_key()


def test_a_key_that_is_a_link_is_refused(own_home, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("ab" * 32)
    os.chmod(target, 0o600)
    cache_auth.key_path().parent.mkdir(parents=True)
    cache_auth.key_path().symlink_to(target)
    with pytest.raises(cache_auth.CacheKeyError, match="plain file"):
        cache_auth.cache_key()


def test_an_untrusted_key_stops_the_run_before_any_work_in_one_line(own_home, sample_dir, tmp_path):
    cache_auth.cache_key()
    os.chmod(cache_auth.key_path(), 0o666)
    cache_auth._KEY.clear()

    def factory():
        return ScriptedBackend()

    factory.model_id = ScriptedBackend.model_id
    with pytest.raises(RunError, match="readable or writable by others"):
        run([str(sample_dir)], str(tmp_path / "out"), RunConfig(), None, [], backend_factory=factory)


# --- a whole run over a cache an attacker wrote to ---------------------------------------------------------


def _factory(backend):
    def factory():
        return backend

    factory.model_id = backend.model_id
    return factory


def _statuses(out):
    return {(r["source"], r["task_id"]): r["status"] for r in pq.read_table(out / "results.parquet").to_pylist()}


@pytest.mark.slow
def test_planted_edited_moved_and_renamed_entries_change_no_verdict_and_cost(sample_dir, tmp_path, capfd):
    cache = tmp_path / "shared_cache"
    cfg = RunConfig.model_validate({"attempt_cache": str(cache)})
    clean = run([str(sample_dir)], str(tmp_path / "clean"), cfg, None, [], backend_factory=_factory(ScriptedBackend()))
    before = _statuses(tmp_path / "clean")
    results = pq.read_table(tmp_path / "clean" / "results.parquet").to_pylist()
    fails = [r for r in results if r["status"] == "all_fail" and r["domain"] == "math"]
    assert len(fails) >= 3
    (genuine,) = cache.glob("*.parquet")
    rows = pq.read_table(genuine).to_pylist()
    by_hash = {}
    for r in rows:
        by_hash.setdefault(r["content_hash"], []).append(r)

    def right(task, rec):
        return dict(rec, completion=f"The answer is \\boxed{{{task['answer']}}}.")

    # 1. A planted JSONL with right answers for an all_fail task, and a planted marker for it.
    a = fails[0]
    planted = [dict(right(a, r), run_id="evil", mac="0" * 64) for r in by_hash[a["content_hash"]]]
    _write_jsonl(cache / "evil-1.jsonl", planted)
    (cache / FINISHED_DIR / "evil").write_text("0" * 64)
    # 2. The genuine file edited in place: right answers for a second all_fail task, MACs kept.
    b = fails[1]
    edited = [right(b, r) if r["content_hash"] == b["content_hash"] else r for r in rows]
    # 3. Signed entries of another task moved onto a third all_fail task.
    c = fails[2]
    donor = next(h for h in by_hash if h not in (a["content_hash"], b["content_hash"], c["content_hash"]))
    moved = [dict(r, content_hash=c["content_hash"], completion=f"\\boxed{{{c['answer']}}}") for r in by_hash[donor]]
    kept = [r for r in edited if r["content_hash"] != c["content_hash"]]
    pq.write_table(pa.Table.from_pylist(kept + moved, schema=CACHE_SCHEMA), genuine)
    # 4. The genuine file, as it was, renamed to a run that never existed.
    pq.write_table(pa.Table.from_pylist(rows, schema=CACHE_SCHEMA), cache / "renamed.parquet")
    capfd.readouterr()

    run([str(sample_dir)], str(tmp_path / "again"), cfg, None, [], backend_factory=_factory(ScriptedBackend()))
    err = capfd.readouterr().err
    assert _statuses(tmp_path / "again") == before  # no verdict moved
    attempts = pq.read_table(tmp_path / "again" / "attempts.parquet").to_pylist()
    assert {a_["reused_from_run"] for a_ in attempts} <= {clean["run_id"], None}
    regenerated = {x["content_hash"] for x in attempts if x["reused_from_run"] is None}
    # Exactly the tasks whose genuine entries were edited or replaced were generated again;
    # the planted file changed nothing (the genuine entries of its task were re-used).
    assert regenerated == {b["content_hash"], c["content_hash"]}
    assert "marker(s)" in err and "evil-1.jsonl" in err and "renamed.parquet" in err and genuine.name in err


@pytest.mark.slow
def test_a_truncated_cache_file_is_set_aside_and_the_run_goes_on(sample_dir, tmp_path, capfd):
    cache = tmp_path / "shared_cache"
    cfg = RunConfig.model_validate({"attempt_cache": str(cache)})
    run([str(sample_dir)], str(tmp_path / "clean"), cfg, None, [], backend_factory=_factory(ScriptedBackend()))
    (genuine,) = cache.glob("*.parquet")
    genuine.write_bytes(genuine.read_bytes()[:1000])
    again = run([str(sample_dir)], str(tmp_path / "again"), cfg, None, [], backend_factory=_factory(ScriptedBackend()))
    assert again["attempts_reused"] == 0 and again["attempts_generated"] == again["attempts"]
    assert _statuses(tmp_path / "again") == _statuses(tmp_path / "clean")
    assert list(cache.glob(f"{genuine.name}.damaged-*")) and "cannot be read" in capfd.readouterr().err
    third = run([str(sample_dir)], str(tmp_path / "third"), cfg, None, [], backend_factory=_factory(ScriptedBackend()))
    assert third["attempts_generated"] == 0  # the next run is not stuck on it
