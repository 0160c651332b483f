"""Sentence embeddings kept across runs (transforms/same_problem/embed_cache.py):
a second run finds the first run's vectors, bit for bit, and embeds
nothing again; a file it cannot trust (edited, truncated, forged under
another key, moved to another encoder's folder, another user's, a link,
a FIFO, garbage) is skipped, its texts embedded afresh, and never crashes
or stalls a run."""

import os
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve.transforms.same_problem import embed, embed_cache
from tasksieve.transforms.same_problem.embed import DIM, NAMESPACE, Embedder
from tasksieve.transforms.sample import cache_auth

TEXTS = [f"Tomasz buys {i} apples and gives {i % 7 + 2} to each of his friends. How many are left?" for i in range(40)]


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    """A cache key of this test's own (cache_auth keeps one per process)."""
    monkeypatch.setenv("TASKSIEVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cache_auth, "_KEY", {})


class Counting(Embedder):
    """An embedder that counts the texts it really encodes."""

    def __init__(self, folder, make=True):
        super().__init__()
        self.encoded = []
        if make:  # as the command does (preflight), before any run
            Path(folder).mkdir(parents=True, exist_ok=True)
        self.use_cache(str(folder))

    def _encode(self, texts):
        self.encoded += texts
        return super()._encode(texts)


def _files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.emb"))


def _warm(folder: Path) -> np.ndarray:
    first = Counting(folder)
    vecs = first.encode(TEXTS)
    first.flush()
    assert len(first.encoded) == len(TEXTS) and len(_files(folder)) == 1
    return vecs


def test_a_second_embedder_finds_the_first_ones_vectors_bit_for_bit(tmp_path):
    vecs = _warm(tmp_path / "c")
    second = Counting(tmp_path / "c")
    again = second.encode(TEXTS[::-1])
    assert second.encoded == [] and np.array_equal(again, vecs[::-1])
    # New texts are embedded and kept beside the old ones.
    second.encode(TEXTS + ["A new question about 3 pears?"])
    second.flush()
    assert second.encoded == ["A new question about 3 pears?"] and len(_files(tmp_path / "c")) == 2


def _tamper(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "vector":
        data[-embed_cache.MAC_BYTES - 7] ^= 0x40  # one bit of the last vector
    elif how == "key":
        data[len(embed_cache.MAGIC) + 8] ^= 0x01  # a text hash: a vector moved to another text
    elif how == "truncated":
        del data[-100:]
    elif how == "count":
        data[len(embed_cache.MAGIC)] = 0xFF  # a count the size does not back
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["vector", "key", "truncated", "count"])
def test_an_edited_file_is_skipped_and_its_texts_embedded_afresh(tmp_path, how):
    vecs = _warm(tmp_path / "c")
    _tamper(_files(tmp_path / "c")[0], how)
    second = Counting(tmp_path / "c")
    again = second.encode(TEXTS)
    assert len(second.encoded) == len(TEXTS) and np.array_equal(again, vecs)
    assert second.disk.skipped == 1


def test_a_file_forged_under_another_key_or_moved_to_another_encoder_is_skipped(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    forged = np.zeros((len(TEXTS), DIM), dtype=np.float32)
    forged[:, 0] = 1.0  # every text "means" the same
    ns_folder = folder
    ns_folder.mkdir(parents=True)
    monkeypatch.setenv("TASKSIEVE_HOME", str(tmp_path / "attacker"))
    monkeypatch.setattr(cache_auth, "_KEY", {})
    embed_cache.write_file(ns_folder, NAMESPACE, [embed_cache.text_key(t) for t in TEXTS], forged)
    # Under the user's key, but written for another encoder version: moved here.
    monkeypatch.setenv("TASKSIEVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cache_auth, "_KEY", {})
    embed_cache.write_file(ns_folder, NAMESPACE + " other", [embed_cache.text_key(t) for t in TEXTS], forged)
    e = Counting(folder)
    vecs = e.encode(TEXTS)
    assert len(e.encoded) == len(TEXTS) and not np.array_equal(vecs, forged)
    assert e.disk.skipped == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_is_skipped_even_with_a_valid_mac(tmp_path):
    vecs = _warm(tmp_path / "c")
    os.chown(_files(tmp_path / "c")[0], 65534, 65534)  # nobody: could have planted it
    second = Counting(tmp_path / "c")
    assert np.array_equal(second.encode(TEXTS), vecs) and len(second.encoded) == len(TEXTS)


def test_links_fifos_and_garbage_are_skipped_without_stalling(tmp_path):
    vecs = _warm(tmp_path / "c")
    good = _files(tmp_path / "c")[0]
    ns = good.parent
    (ns / "link.emb").symlink_to(good)  # a link to a trusted file: still not read through
    os.mkfifo(ns / "fifo.emb")  # opening it for reading must not wait for a writer
    (ns / "garbage.emb").write_bytes(os.urandom(3000))
    (ns / "empty.emb").write_bytes(b"")
    (ns / "folder.emb").mkdir()
    good.unlink()
    second = Counting(tmp_path / "c")
    assert np.array_equal(second.encode(TEXTS), vecs) and len(second.encoded) == len(TEXTS)
    assert second.disk.skipped == 5


def test_a_link_as_the_encoders_folder_is_not_written_through(tmp_path):
    """The command replaces such a link before the run (tests/run/test_planted_links.py);
    one planted during the run is not used."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "c").symlink_to(target)
    e = Counting(tmp_path / "c", make=False)
    e.encode(TEXTS)
    e.flush()
    assert list(target.iterdir()) == [] and e.disk.folder is None


def test_an_unusable_folder_costs_speed_not_the_run(tmp_path):
    (tmp_path / "c").write_text("a file where the folder should be")
    e = Counting(tmp_path / "c", make=False)
    assert e.encode(TEXTS).shape == (len(TEXTS), DIM)
    e.flush()
    assert len(e.encoded) == len(TEXTS)


def test_a_second_dedup_into_the_same_folder_embeds_nothing_and_decides_the_same(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from dedup import make_pool

    from tasksieve.pipeline.cli import main

    make_pool(600, tmp_path / "pool", seed=5)
    encoded = []
    real = Embedder._encode
    monkeypatch.setattr(Embedder, "_encode", lambda self, texts: encoded.extend(texts) or real(self, texts))
    results = []
    for out in ("a", "a", "b"):
        encoded.clear()
        monkeypatch.setattr(embed, "_MODEL", None)  # a fresh process: nothing kept in memory
        assert main(["dedup", "--input", str(tmp_path / "pool"), "--out", str(tmp_path / out)]) == 0
        results.append((len(encoded), pq.read_table(tmp_path / out / "results.parquet").drop_columns(["run_id"])))
    (first, a1), (second, a2), (cold, b) = results
    assert first > 0 and second == 0 and cold == first  # "b" has its own cache, empty
    assert a1.equals(a2) and a1.equals(b)
    assert os.environ.get(embed_cache.ENV) is None  # named for the run only
    assert _files(tmp_path / "a" / "embedding_cache") and _files(tmp_path / "b" / "embedding_cache")


def test_a_key_that_cannot_be_trusted_means_no_cache_not_a_failed_run(tmp_path):
    key = cache_auth.key_path()
    key.parent.mkdir(parents=True)
    key.write_text("00" * cache_auth.KEY_BYTES + "\n")
    key.chmod(0o644)  # readable by others: refused
    e = Counting(tmp_path / "c")
    assert e.encode(TEXTS).shape == (len(TEXTS), DIM)
    e.flush()
    assert e.disk.folder is None and _files(tmp_path / "c") == []


def test_a_write_that_fails_leaves_no_file_and_the_vectors_in_memory(tmp_path, monkeypatch):
    e = Counting(tmp_path / "c")
    vecs = e.encode(TEXTS)
    real = os.write
    monkeypatch.setattr(embed_cache.os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(28, "No space")))
    e.flush()
    assert list((tmp_path / "c").iterdir()) == [] and len(e.disk.fresh) == len(TEXTS)
    monkeypatch.setattr(embed_cache.os, "write", real)
    e.flush()  # the next flush keeps them
    again = Counting(tmp_path / "c")
    assert np.array_equal(again.encode(TEXTS), vecs) and again.encoded == []
