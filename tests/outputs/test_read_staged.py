"""finalize.read_staged: staged shards -> one table in SORT_KEYS order.

It reads the shards memory-mapped and builds the sorted table a column at
a time (a million-row run held its results twice otherwise); the table it
returns must be exactly what reading every shard whole and sorting the
concatenation gives, ties and nulls included."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from tasksieve.pipeline.outputs.finalize import SORT_KEYS, read_staged, return_freed_memory
from tasksieve.pipeline.outputs.staging import chunk_table, write_table
from tasksieve.pipeline.run.graph import STAGED


def _reference(folder, name: str, schema: pa.Schema) -> pa.Table:
    """The plain form: each shard read whole, concatenated, sorted."""
    parts = []
    for f in sorted((folder / name).glob("*.arrow")):
        with pa.OSFile(str(f), "rb") as source:
            parts.append(pa.ipc.open_file(source).read_all().cast(schema))
    return pa.concat_tables(parts).sort_by(SORT_KEYS[name])


def _value(field: pa.Field, rng: random.Random):
    if rng.random() < 0.15 and field.nullable:
        return None
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        # Few distinct values, so sort keys tie and the tie order shows.
        return rng.choice(["", "a", "b", "a\x1fb", "é", "z" * 300])
    if pa.types.is_integer(t):
        return rng.randint(0, 3)
    if pa.types.is_floating(t):
        return rng.choice([0.0, 0.5, 1.5])
    if pa.types.is_boolean(t):
        return rng.random() < 0.5
    if pa.types.is_list(t):
        return [rng.choice(["x", "y"]) for _ in range(rng.randint(0, 2))]
    return None


@pytest.mark.parametrize("name", sorted(STAGED))
def test_read_staged_is_the_whole_read_sorted(tmp_path, name):
    schema = STAGED[name]
    rng = random.Random(name)
    row_number = 0
    for shard in range(7):
        rows = []
        for _ in range(rng.randint(0, 300)):
            row = {f.name: _value(f, rng) for f in schema}
            row["row_number_probe"] = row_number  # ignored: not a schema field
            rows.append(row)
            row_number += 1
        write_table(chunk_table(rows, schema), str(tmp_path / name), f"chunk-{shard:03d}")
    got = read_staged(tmp_path, name, schema)
    want = _reference(tmp_path, name, schema)
    assert got.schema == schema
    assert got.num_rows == want.num_rows == row_number
    assert got.equals(want)
    # The columns travel together: every row of the result is one staged row.
    assert sorted(map(str, got.to_pylist())) == sorted(map(str, want.to_pylist()))


def test_read_staged_of_nothing_is_the_empty_table(tmp_path):
    schema = STAGED["results"]
    assert read_staged(tmp_path, "results", schema).equals(schema.empty_table())


def test_read_staged_refuses_a_shard_of_another_schema(tmp_path):
    schema = STAGED["quarantine"]
    write_table(chunk_table([{"source_file": "a", "line": 1}], schema), str(tmp_path / "quarantine"), "good")
    alien = pa.table({"source_file": ["b"], "line": ["not a number"]})
    write_table(alien, str(tmp_path / "quarantine"), "alien")
    with pytest.raises((pa.ArrowInvalid, KeyError, ValueError)):
        read_staged(tmp_path, "quarantine", schema)


def test_returning_freed_memory_keeps_live_data():
    kept = pa.array([str(i) for i in range(50_000)])
    garbage = [bytearray(1 << 16) for _ in range(200)]
    del garbage
    return_freed_memory()
    assert kept[49_999].as_py() == "49999" and len(kept) == 50_000
