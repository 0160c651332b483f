"""One HTTP request to a model server, bounded in every way a server can
misbehave: the `openai` backend's transport.

Why not the `openai` client: its timeout is per socket read, so a server
that trickles its body (a byte every 2 s) is never timed out, and it
decompresses a gzip reply whole, with no cap (a 0.4 MB reply became
400 MB). Here:

- a wall-clock deadline covers the whole exchange (connect, send, headers,
  body): a watchdog shuts the socket down when it passes, so a slow drip or
  a server that stops mid-body ends at the deadline, whatever it sends;
- the reply body is decompressed (gzip, deflate) while it is read and
  refused as soon as it passes `max_bytes` decompressed;
- every failure is a `ReplyError` with a kind the caller decides on
  (retry, stop the run, or fail this one request); nothing else escapes.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.request
import zlib
from dataclasses import dataclass
from urllib.parse import urlsplit

# Kinds of ReplyError.
CONNECT = "connect"  # no connection, or it broke
TIMEOUT = "timeout"  # the deadline passed
STATUS = "status"  # an HTTP status other than 2xx
TOO_LARGE = "too_large"  # the reply passed the size cap
MALFORMED = "malformed"  # a reply that cannot be read (encoding, framing)

READ_CHUNK = 64 * 1024
# The body of an error status is read only for its message.
ERROR_BODY_BYTES = 64 * 1024


class ReplyError(Exception):
    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


@dataclass
class Reply:
    status: int
    body: bytes


class _Decoder:
    """Content-Encoding undone as the body arrives, under a cap."""

    def __init__(self, encoding: str, max_bytes: int):
        enc = (encoding or "identity").strip().lower()
        if enc in ("identity", ""):
            self._z = None
        elif enc in ("gzip", "x-gzip"):
            self._z, self._wbits = zlib.decompressobj(16 + zlib.MAX_WBITS), 16 + zlib.MAX_WBITS
        elif enc == "deflate":
            self._z, self._wbits = zlib.decompressobj(32 + zlib.MAX_WBITS), 32 + zlib.MAX_WBITS
        else:
            raise ReplyError(MALFORMED, f"a reply in an encoding that is not read ({enc[:40]!r})")
        self.max_bytes = max_bytes
        self.out = bytearray()

    def _room(self) -> int:
        # One byte more than the cap is enough to know it was passed.
        return self.max_bytes - len(self.out) + 1

    def _add(self, data: bytes) -> None:
        self.out += data
        if len(self.out) > self.max_bytes:
            raise ReplyError(TOO_LARGE, f"a reply over the {self.max_bytes:,}-byte cap (decompressed)")

    def feed(self, chunk: bytes) -> None:
        if self._z is None:
            self._add(chunk)
            return
        data = chunk
        while data:
            try:
                self._add(self._z.decompress(data, self._room()))
                data = self._z.unconsumed_tail
                if self._z.eof and self._z.unused_data:  # a second gzip member
                    data = self._z.unused_data
                    self._z = zlib.decompressobj(self._wbits)
            except zlib.error as e:
                raise ReplyError(MALFORMED, f"a compressed reply that does not decompress ({e})") from None

    def finish(self) -> bytes:
        return bytes(self.out)


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 1e6 else None


def _connection(parts, timeout_s: float):
    """(connection, request path) for the URL, through the proxy the
    environment names (HTTP_PROXY/HTTPS_PROXY, NO_PROXY), as the `openai`
    client did: an https URL is tunnelled (CONNECT), an http one is asked
    of the proxy by its full URL."""
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    https = parts.scheme == "https"
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        p = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        if p.hostname:
            if https:
                conn = http.client.HTTPSConnection(p.hostname, p.port or 3128, timeout=timeout_s)
                conn.set_tunnel(parts.hostname, parts.port or 443)
                return conn, path
            return http.client.HTTPConnection(p.hostname, p.port or 3128, timeout=timeout_s), parts.geturl()
    conn_type = http.client.HTTPSConnection if https else http.client.HTTPConnection
    return conn_type(parts.hostname, parts.port, timeout=timeout_s), path


def request(method: str, url: str, body: dict | None, headers: dict, timeout_s: float, max_bytes: int) -> Reply:
    """One exchange, done within `timeout_s` of wall-clock time, with a
    2xx status and a body of at most `max_bytes` decompressed; else ReplyError."""
    parts = urlsplit(url)
    conn, path = _connection(parts, timeout_s)
    data = json.dumps(body, ensure_ascii=True).encode() if body is not None else None
    expired = threading.Event()

    def watchdog() -> None:
        # The one thing that bounds every blocking read, however the server
        # paces its bytes: the socket is shut, the read returns at once.
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(timeout_s, watchdog)
    timer.daemon = True
    timer.start()
    try:
        return _exchange(conn, method, path, data, headers, max_bytes, expired, timeout_s)
    except ReplyError:
        raise
    except Exception as e:  # the socket shut by the watchdog, a reset, a framing error
        if expired.is_set():
            raise ReplyError(TIMEOUT, f"no complete reply within the {timeout_s:g} s deadline") from None
        if isinstance(e, (TimeoutError, socket.timeout)):
            raise ReplyError(TIMEOUT, f"no complete reply within the {timeout_s:g} s deadline") from None
        if isinstance(e, (http.client.HTTPException, ValueError)):
            raise ReplyError(MALFORMED, f"a reply that is not valid HTTP ({type(e).__name__}: {str(e)[:80]})") from None
        raise ReplyError(CONNECT, f"{type(e).__name__}: {str(e)[:120]}") from None
    finally:
        timer.cancel()
        conn.close()


def _exchange(conn, method, path, data, headers, max_bytes, expired, timeout_s) -> Reply:
    hdrs = {"Accept": "application/json", "Accept-Encoding": "gzip, deflate", **headers}
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    status = resp.status
    ok = 200 <= status < 300
    decoder = _Decoder(resp.getheader("Content-Encoding", "identity"), max_bytes if ok else ERROR_BODY_BYTES)
    try:
        while True:
            if expired.is_set():
                raise ReplyError(TIMEOUT, f"no complete reply within the {timeout_s:g} s deadline")
            chunk = resp.read1(READ_CHUNK)  # one socket read at most: the deadline is checked between them
            if not chunk:
                break
            decoder.feed(chunk)
    except ReplyError as e:
        if ok or e.kind == TIMEOUT:
            raise
        # An error status whose body is too big or unreadable: the status says enough.
    if expired.is_set():
        raise ReplyError(TIMEOUT, f"no complete reply within the {timeout_s:g} s deadline")
    if ok and resp.length:  # Content-Length promised more than came: the server stopped mid-body
        raise ReplyError(MALFORMED, f"a reply that broke off {resp.length:,} bytes before its stated length")
    if not ok:
        raise ReplyError(
            STATUS,
            f"HTTP {status}: {_error_message(decoder.finish())}",
            status,
            _retry_after(resp.getheader("Retry-After")),
        )
    return Reply(status, decoder.finish())


def _error_message(body: bytes) -> str:
    """The server's own words for an error status, in one short line."""
    text = body.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        msg = err.get("message", err) if isinstance(err, dict) else err
        text = msg if isinstance(msg, str) else json.dumps(msg)[:200]
    except (ValueError, RecursionError):
        pass
    text = " ".join(text.split())
    text = text.encode("utf-8", "replace").decode("utf-8")  # no lone surrogate in a message
    return text[:200] or "(no message)"
