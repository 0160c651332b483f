"""The batch path's chunks (transforms/batch/chunks.py: spilled and held
values), its text normalization and its progress lines, against their
plain forms."""

import dataclasses
import hashlib
import hmac
import os
import pickle
import random
import re
import stat
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from tasksieve.transforms.batch import chunks
from tasksieve.transforms.normalize import normalize_text

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


_WS, _BEFORE, _AFTER = re.compile(r"\s+"), re.compile(r"\s+([.,;:!?%)\]}])"), re.compile(r"([(\[{])\s+")


def _regex_normal_form(text):
    """normalize_text as it was written before issue 14; content hashes saved
    in reference-pool indexes depend on the two agreeing exactly."""
    if not text:
        return ""
    t = _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return _AFTER.sub(r"\1", _BEFORE.sub(r"\1", t))


def test_whitespace_is_unprintable_but_the_space():
    # normalize_text's single-spaced shortcut rests on this.
    assert [c for c in range(sys.maxunicode + 1) if chr(c).isspace() and chr(c).isprintable()] == [32]


def test_normalize_text_equals_its_regex_form_on_hostile_text():
    spaces = [chr(c) for c in range(0x3000 + 1) if chr(c).isspace()] + ["\u200b", "\ufeff", "\u2028", "\u3000"]
    alphabet = list("ab1 .,;:!?%)]}([{") + spaces + ["ﬁ", "Ⅻ", "ß", "İ", "（", "）", "．", "︵", "\u0345", "Σ", "¼"]
    rng = random.Random(7)
    for _ in range(40_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert normalize_text(s) == _regex_normal_form(s), repr(s)


def test_spilled_chunks_round_trip_and_a_planted_file_is_refused(tmp_path):
    with chunks.spill_folder(str(tmp_path)) as spill:
        assert stat.S_IMODE(os.stat(spill.folder).st_mode) == 0o700  # private to the user running it
        rows = [{"task_id": "t1", "prompt": "p"}, {"task_id": "t2", "prompt": "q"}]
        n, packed = chunks.as_chunk(rows, spill)
        assert n == 2 and chunks.rows_of((n, packed)) == rows
        second = chunks.pack(["another"], spill)
        path, offset, _ = packed
        assert second[0] == path and second[1] > offset  # one appended file per writing thread
        assert chunks.unpack(second) == ["another"] and chunks.rows_of((n, packed)) == rows
        data = Path(path).read_bytes()
        # The format: blob length, HMAC-SHA256 of "file:offset:" + blob under the run's key, blob.
        blob = data[second[1] + 40 :]
        assert data[second[1] : second[1] + 8] == len(blob).to_bytes(8, "little")
        where = f"{os.path.basename(path)}:{second[1]}:".encode()
        assert data[second[1] + 8 : second[1] + 40] == hmac.new(spill.key, where + blob, hashlib.sha256).digest()
        Path(path).write_bytes(data[second[1] :] + data)  # the second blob copied to offset 0
        with pytest.raises(chunks.SpillTampered):  # its HMAC names the offset it was written at
            chunks.unpack((path, 0, spill))
        Path(path).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit of the second blob changed
        with pytest.raises(chunks.SpillTampered):
            chunks.unpack(second)
        assert chunks.rows_of((n, packed)) == rows  # the first blob is untouched
        for at in (len(data), len(data) + 7, 3):  # past the end, a torn header, inside a blob
            with pytest.raises(chunks.SpillTampered):
                chunks.unpack((path, at, spill))
        planted = Path(spill.folder) / "planted.pkl"  # a pickle that would run code
        body = b"cos\nsystem\n(S'touch /tmp/pwned'\ntR."
        planted.write_bytes(len(body).to_bytes(8, "little") + b"\0" * 32 + body)
        with pytest.raises(chunks.SpillTampered):
            chunks.unpack((str(planted), 0, spill))
        with pytest.raises(FileExistsError):  # a file name is never reused
            open(path, "xb")
    assert not Path(spill.folder).exists()
    assert chunks.rows_of(chunks.as_chunk(rows)) == rows  # no spill: bytes in memory


def test_held_values_are_the_objects_handed_out_once_within_the_budget(tmp_path):
    rows = [{"task_id": f"t{i}", "prompt": "p" * 10} for i in range(10)]
    budget = 15 * chunks.ROW_BYTES
    with chunks.spill_folder(str(tmp_path), memory_bytes=budget) as spill:
        n, held = chunks.as_chunk(rows, spill)
        assert isinstance(held, chunks.Held)
        # Over the budget with the first still held: pickled to the spill file.
        spilled = chunks.pack(rows[:6], spill)
        assert isinstance(spilled, tuple) and spilled[2] is spill
        assert chunks.rows_of((n, held)) is rows  # the object itself: nothing pickled
        with pytest.raises(RuntimeError, match="read twice"):  # taken by the first read
            chunks.rows_of((n, held))
        again = chunks.pack(rows[:6], spill)  # the budget is free again
        assert isinstance(again, chunks.Held)
        # Beam's coders pickle the handle between stages: it still finds its value.
        assert chunks.unpack(pickle.loads(pickle.dumps(again))) == rows[:6]
        assert chunks.unpack(spilled) == rows[:6]
        # A chunk passed on unchanged after it was read: held anew, or the same file blob.
        n, held = chunks.as_chunk(rows, spill)
        passed = chunks.unchanged((n, held), chunks.rows_of((n, held)), spill)
        assert chunks.rows_of(passed) is rows
        n, blob = chunks.as_chunk(rows, dataclasses.replace(spill, memory_bytes=0))
        assert chunks.unchanged((n, blob), chunks.rows_of((n, blob)), spill) == (n, blob)
        # Arrays (cheap to pickle) take at most half the budget; rows the whole.
        array = np.zeros(budget * 6 // 10 // 8, dtype=np.int64)
        assert isinstance(chunks.pack((array, array[:1]), spill), tuple)
        as_rows = chunks.pack(rows[:9], spill)
        assert isinstance(as_rows, chunks.Held)
        chunks.unpack(as_rows)
        small = chunks.pack(array[: budget // 4 // 8], spill)
        assert isinstance(small, chunks.Held) and chunks.unpack(small).shape == (budget // 4 // 8,)
        left = chunks.pack(["still held"], spill)
    with pytest.raises(RuntimeError):  # the run's table went with its folder
        chunks.unpack(left)


def test_progress_rates_a_burst_over_the_run_and_a_stream_over_itself(monkeypatch, capsys):
    """A step whose elements all come at once (kept rows, once near dedup
    has decided) showed millions of rows/s when rated from its first
    element; it is rated over the run so far. A step that streams keeps
    its own pace (its ETA depends on it)."""
    from tasksieve.transforms import progress

    import types

    now = [100.0]  # the graph is built
    # progress's own clock only: patching the time module itself would hand the
    # fake to anything that binds `from time import time` meanwhile (tqdm did,
    # when first imported here, and later bars in the same worker read 500.0).
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(time=lambda: now[0]))

    def done_line(arrivals):
        step = progress.Progress("dedup: kept", total=None)
        step.setup()
        for at, rows in arrivals:
            now[0] = at
            assert list(step.process((rows, "packed"))) == [(rows, "packed")]  # passed on unchanged
        now[0] = 500.0  # teardown comes when the whole pipeline ends: not the step's rate
        step.teardown()
        return capsys.readouterr().err.splitlines()[-1].strip()

    assert done_line([(110.0, 600), (110.000001, 400)]) == "dedup: kept (done): 1,000 rows, 100 rows/s"
    assert done_line([(110.0, 600), (115.0, 400)]) == "dedup: kept (done): 1,000 rows, 200 rows/s"
