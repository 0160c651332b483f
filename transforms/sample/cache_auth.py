"""Authentication of the attempt cache: a cached generation is re-used only
if this user's tasksieve wrote it.

Why: the cache folder may be shared (several output folders, several
users). Anyone who can write there could otherwise plant a JSONL of
"generations" plus a `_finished/<run>` marker and replace the model's
answers at the next run (an all_fail task made learnable, priced at $0).

Every cache entry and every `_finished` marker carries an HMAC-SHA256 under
a key kept outside the cache folder: `$TASKSIEVE_HOME/keys/attempt_cache.key`
(default `~/.cache/tasksieve`), 32 random bytes, mode 0600, created on first
use (O_EXCL, O_NOFOLLOW, then linked into place, so two processes starting
at once agree on one key). The MAC covers every field of the entry,
`content_hash`, `model_id`, `sampler_key`, `attempt_idx`, `seed` and
`run_id` included: an entry edited, planted, or moved to another task,
model, sampler, seed or run fails it. A key file that another user could
read or write, or that is not a plain file of this user, is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from pathlib import Path

KEY_BYTES = 32
# The marker's MAC is over this prefix and the run id.
MARKER_CONTEXT = "tasksieve-finished:"

_KEY: dict[str, bytes] = {}
_KEY_LOCK = threading.Lock()


class CacheKeyError(Exception):
    """The key cannot be made or trusted; the message is one line for a person."""


def key_path() -> Path:
    home = Path(os.environ.get("TASKSIEVE_HOME") or Path.home() / ".cache" / "tasksieve")
    return home / "keys" / "attempt_cache.key"


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise CacheKeyError(
            f"the attempt-cache key {path} cannot be opened ({e.strerror}); it must be a plain "
            "file of this user, mode 0600"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise CacheKeyError(
                f"the attempt-cache key {path} is not a plain file owned by this user; remove it "
                "(a new key is made; cached attempts are then regenerated)"
            )
        if st.st_mode & 0o077:
            raise CacheKeyError(
                f"the attempt-cache key {path} is readable or writable by others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}); run chmod 600 on it, or remove it"
            )
        data = os.read(fd, 4 * KEY_BYTES + 1)
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise CacheKeyError(
            f"the attempt-cache key {path} is damaged; remove it (a new key is made; cached "
            "attempts are then regenerated)"
        )
    return key


def _make_key(path: Path) -> None:
    """Create the key unless it exists, atomically: written to a private
    temporary file, then linked to its name (link never replaces a file)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES).hex().encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process made it first: use theirs
    finally:
        tmp.unlink()


def cache_key() -> bytes:
    """This user's key, made on first use; CacheKeyError if it cannot be trusted."""
    path = key_path()
    with _KEY_LOCK:
        if str(path) not in _KEY:
            if not os.path.lexists(path):
                try:
                    _make_key(path)
                except OSError as e:
                    raise CacheKeyError(f"the attempt-cache key {path} cannot be made ({e.strerror})") from None
            _KEY[str(path)] = _read_key(path)
        return _KEY[str(path)]


def entry_mac(rec: dict, fields: list[str]) -> str:
    """HMAC-SHA256 of the entry's fields (in schema order), hex."""
    payload = json.dumps([rec.get(name) for name in fields], ensure_ascii=True, separators=(",", ":"))
    return hmac.new(cache_key(), payload.encode("ascii"), hashlib.sha256).hexdigest()


def entry_ok(rec: dict, fields: list[str]) -> bool:
    mac = rec.get("mac")
    if not isinstance(mac, str):
        return False
    try:
        return hmac.compare_digest(mac, entry_mac(rec, fields))
    except (TypeError, ValueError):  # a value JSON cannot hold, or a MAC that is not ASCII
        return False


def marker_mac(run_id: str) -> str:
    return hmac.new(
        cache_key(), (MARKER_CONTEXT + run_id).encode("utf-8", "surrogateescape"), hashlib.sha256
    ).hexdigest()


def marker_ok(run_id: str, content: bytes) -> bool:
    try:
        return hmac.compare_digest(content.strip(), marker_mac(run_id).encode())
    except (TypeError, ValueError):
        return False
