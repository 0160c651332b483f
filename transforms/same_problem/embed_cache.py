"""Sentence embeddings kept across runs, by content hash, in a folder next
to the attempt cache (default OUT/embedding_cache).

Why: embedding is most of what the meaning stage and decontamination cost
(65 of 145 s of a 100,000-task `tasksieve dedup` with the defaults), and a
delivery is run more than once (validated, then deduplicated, then run;
re-run after a threshold changes; earlier training sets read as pools each
time). A vector found here is the one the same encoder computed for the
same text before, so a second run decides as the first.

Trust: the folder may be shared, and a planted vector could hide a
benchmark item (a cosine pushed below the bar). A file is used only when
it is a regular file owned by this user, of the exact size its header
implies, and its HMAC-SHA256 under this user's cache key (the attempt
cache's, transforms/sample/cache_auth.py, kept outside the folder) checks
out over the namespace (encoder, its version, the text cut), the keys and
the vectors: edited, truncated, planted, moved between namespaces or
another user's files are skipped, and their texts are embedded afresh.

Layout: CACHE/folder_name(namespace)/WRITER.emb (the command makes both
folders as real folders, never through a planted link), each file written once (a private temporary
file, then renamed): MAGIC, count (u64), count 16-byte text hashes, count
x DIM float32 vectors, 32-byte MAC. New vectors are written in files of up
to FLUSH_EVERY, and at exit.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import struct
from pathlib import Path

import numpy as np

MAGIC = b"TSEMB\x00\x01\x00"
KEY_BYTES = 16
MAC_BYTES = 32
FLUSH_EVERY = 8192
MAX_LOADED = 400_000  # vectors (~800 MB); past it, older files are left unread
# The encoder's folder in the cache (CACHE/folder_name(namespace)), named by
# the running command for this process and the worker processes it starts.
ENV = "TASKSIEVE_EMBEDDING_CACHE"


def folder_name(namespace: str) -> str:
    """The subfolder of the cache folder that holds one encoder's vectors."""
    return hashlib.blake2b(namespace.encode(), digest_size=8).hexdigest()


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


def _mac(namespace: str, body: bytes) -> bytes:
    from tasksieve.transforms.sample.cache_auth import cache_key

    return hmac.new(cache_key(), namespace.encode() + b"\x00" + body, hashlib.sha256).digest()


def _open_own_file(path: Path) -> int | None:
    """A read-only descriptor of a regular file of this user, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        return None
    return fd


def read_file(path: Path, namespace: str, dim: int, room: int) -> tuple[list[bytes], np.ndarray] | None:
    """(n text hashes, (n, dim) float32 vectors) of a trusted
    file holding at most `room` vectors, else None."""
    fd = _open_own_file(path)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, len(MAGIC) + 8, 0)
        if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
            return None
        (n,) = struct.unpack("<Q", head[len(MAGIC) :])
        if n > room or size != len(head) + n * (KEY_BYTES + 4 * dim) + MAC_BYTES:
            return None
        data = b""
        while len(data) < size:
            chunk = os.pread(fd, size - len(data), len(data))
            if not chunk:
                return None
            data += chunk
    finally:
        os.close(fd)
    body, mac = data[:-MAC_BYTES], data[-MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(namespace, body)):
        return None
    start = len(head)
    keys = [body[start + i * KEY_BYTES : start + (i + 1) * KEY_BYTES] for i in range(n)]
    vecs = np.frombuffer(body, dtype=np.float32, count=n * dim, offset=start + n * KEY_BYTES).reshape(n, dim)
    return keys, vecs


def write_file(folder: Path, namespace: str, keys: list[bytes], vecs: np.ndarray) -> None:
    """One new file of these vectors, all or nothing."""
    body = MAGIC + struct.pack("<Q", len(keys)) + b"".join(keys) + np.ascontiguousarray(vecs, np.float32).tobytes()
    name = f"{os.getpid()}-{secrets.token_hex(8)}"
    tmp = folder / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            view = memoryview(body + _mac(namespace, body))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(tmp, folder / f"{name}.emb")
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


class EmbeddingCache:
    """Vectors of earlier runs (loaded on first use), and this run's new
    ones, written as they accumulate. Not thread-safe: the embedder's lock
    guards it."""

    def __init__(self, folder: str | os.PathLike, namespace: str, dim: int):
        self.root, self.namespace, self.dim = Path(folder), namespace, dim
        self.folder: Path | None = None
        self.known: dict[bytes, np.ndarray] | None = None
        self.fresh: dict[bytes, np.ndarray] = {}
        self.skipped = 0  # files not trusted

    def _open(self) -> None:
        if self.known is not None:
            return
        self.known = {}
        from tasksieve.transforms.sample.cache_auth import CacheKeyError, cache_key

        try:
            cache_key()  # no trusted key: no cache (the attempt cache says why, where it is used)
        except CacheKeyError:
            return
        try:  # a real folder of this process's user, made by the command (preflight: real_subdir)
            st = os.lstat(self.root)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return  # no cache this run: everything is embedded, nothing kept
        self.folder = self.root
        for path in sorted(self.folder.glob("*.emb"), key=_mtime, reverse=True):  # newest first
            got = read_file(path, self.namespace, self.dim, MAX_LOADED - len(self.known))
            if got is None:
                self.skipped += 1
                continue
            for k, v in zip(*got):
                self.known.setdefault(k, v)

    def get(self, key: bytes) -> np.ndarray | None:
        self._open()
        v = self.known.get(key)
        return v if v is not None else self.fresh.get(key)

    def put(self, key: bytes, vec: np.ndarray) -> None:
        self._open()
        if self.folder is None or key in self.known:
            return
        self.fresh[key] = vec
        if len(self.fresh) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self.fresh or self.folder is None:
            return
        keys = list(self.fresh)
        try:
            write_file(self.folder, self.namespace, keys, np.stack([self.fresh[k] for k in keys]))
        except OSError:
            return  # kept in memory; tried again at the next flush
        self.known.update(self.fresh)
        self.fresh = {}
