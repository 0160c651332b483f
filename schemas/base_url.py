"""Whether a string can be a model server's base URL: checked when the config
is read (`[model.openai] base_url`) and for `--base-url`, before any request
(the transport is transforms/backends/http_transport.py)."""

from __future__ import annotations

from urllib.parse import urlsplit


def check_base_url(url: str) -> str | None:
    """Why `url` cannot be a server's base URL, or None when it can."""
    if not isinstance(url, str) or not url:
        return "the base URL is empty"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return f"the base URL {url[:80]!r} holds whitespace or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a port that is not a number in range
    except ValueError as e:
        return f"the base URL {url[:80]!r} cannot be parsed ({e})"
    if parts.scheme not in ("http", "https"):
        return f"the base URL {url[:80]!r} is not http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
    if not parts.hostname:
        return f"the base URL {url[:80]!r} names no host (e.g. http://127.0.0.1:8000/v1)"
    if port == 0:
        return f"the base URL {url[:80]!r} has port 0"
    return None
