"""A tiny OpenAI-compatible chat server for CLI tests: scripted answers,
an optional gate that holds every request until the test opens it, and
modes for the faults real servers and proxies show.

Modes of a chat request (`mode`, or one per request from `script`):
    ok          a boxed answer: the right one on even seeds
    html        200 with an HTML page
    empty       200 with `choices: []`
    status:NNN  that status with a JSON error body (any code)
    drip        a good reply sent one byte every `drip_s` seconds
    slow_headers  the status line and headers sent one byte every `drip_s` seconds
    stall       headers and half the body, then silence until the client leaves
    break_off   a Content-Length longer than the body, then the connection closes
    gzip_bomb   a gzip-encoded completion of `bomb_bytes` once unpacked
    surrogate   a completion holding a lone surrogate escape ("\\ud800")
    malformed   200 with JSON that breaks off mid-object
    nontext     200 whose message content is a list, not text
    deep        200 with JSON nested 100,000 levels deep
`models_mode` does the same for GET /models (ok or status:NNN).
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _completion(content) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


def gzip_bomb(n: int) -> bytes:
    """A gzip member holding a chat completion whose text is n bytes of 'a'."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head, tail = json.dumps(_completion("@")).split("@")
    parts = [z.compress(head.encode())]
    block = b"a" * 2**20
    for _ in range(n // len(block)):
        parts.append(z.compress(block))
    parts += [z.compress(tail.encode()), z.flush()]
    return b"".join(parts)


class FakeOpenAI:
    """See the module's docstring for `mode`. `gated`: requests wait until
    the test lets them through, `allow(n)` at a time or all at once
    (`open_gate()`)."""

    def __init__(self, mode: str = "ok", gated: bool = False, drip_s: float = 0.5, bomb_bytes: int = 64 * 2**20):
        self.mode = mode
        self.models_mode = "ok"
        self.script: list[str] = []  # modes of the next requests, in order; then `mode`
        self.hits = 0
        self.drip_s = drip_s
        self.bomb_bytes = bomb_bytes
        self._bomb: bytes | None = None
        self.permits = threading.Semaphore(0 if gated else 10**9)
        self.arrived = threading.Event()  # a request has come in
        self.closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, body, ctype="application/json", extra=()):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _status(self, mode) -> bool:
                if not mode.startswith("status:"):
                    return False
                code = int(mode.split(":", 1)[1])
                self._send(code, {"error": {"message": f"scripted {code}", "code": code}})
                return True

            def do_GET(self):
                if not self._status(server.models_mode):
                    self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.hits += 1
                server.arrived.set()
                server.permits.acquire(timeout=120)
                mode = server.script.pop(0) if server.script else server.mode  # read once let through
                if self._status(mode):
                    return
                if mode == "slow_headers":  # the status line and headers, a byte at a time, without end
                    head = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 10_000
                    for i in range(len(head)):
                        if server.closing.is_set():
                            return
                        try:
                            self.wfile.write(head[i : i + 1])
                            self.wfile.flush()
                        except OSError:
                            return
                        time.sleep(server.drip_s)
                    return
                if mode == "html":
                    return self._send(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
                if mode == "empty":
                    return self._send(
                        200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
                    )
                if mode == "surrogate":
                    return self._send(
                        200, json.dumps(_completion("\\boxed{5}")).replace("\\\\boxed", "\\ud800\\\\boxed").encode()
                    )
                if mode == "malformed":
                    return self._send(200, json.dumps(_completion("x")).encode()[:40])
                if mode == "nontext":
                    return self._send(200, _completion([{"type": "text", "text": "\\boxed{5}"}]))
                if mode == "deep":
                    return self._send(200, b"[" * 100_000 + b"]" * 100_000)
                if mode == "gzip_bomb":
                    if server._bomb is None:
                        server._bomb = gzip_bomb(server.bomb_bytes)
                    return self._send(200, server._bomb, extra=[("Content-Encoding", "gzip")])
                prompt = req["messages"][-1]["content"]
                nums = [int(x) for x in re.findall(r"\d+", prompt)]
                value = sum(nums) + (0 if req.get("seed", 0) % 2 == 0 else 1)
                data = json.dumps(_completion(f"\\boxed{{{value}}}")).encode()
                if mode in ("drip", "stall", "break_off"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data) + (100 if mode == "break_off" else 0)))
                    self.end_headers()
                    self.wfile.flush()
                    if mode == "break_off":
                        self.wfile.write(data)
                        self.close_connection = True
                        return
                    if mode == "stall":
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        server.closing.wait(120)
                        return
                    for i in range(len(data)):
                        if server.closing.is_set():
                            return
                        try:
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                        except OSError:
                            return  # the client gave up
                        time.sleep(server.drip_s)
                    return
                self._send(200, _completion(f"\\boxed{{{value}}}"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def allow(self, n: int):
        self.permits.release(n)

    def open_gate(self):
        self.permits.release(10**6)

    def close(self):
        self.closing.set()
        self.open_gate()
        self.httpd.shutdown()
        self.httpd.server_close()


def run_config(
    path,
    url: str,
    k: int = 4,
    concurrency: int = 2,
    max_retries: int = 1,
    extra: str = "",
    model: str | None = None,
    timeout_s: float = 60,
    model_extra: str = "",
) -> str:
    """A run config sampling from the fake server; returns its path. `extra`:
    more lines for [model.openai]; `model_extra`: for [model]; `model`: the
    served name to ask for (unset: the one /models lists)."""
    named = f'model = "{model}"\n' if model else ""
    path.write_text(
        f'[model]\nbackend = "openai"\nmodel_id = "fake@test"\n{model_extra}[model.openai]\n'
        f'base_url = "{url}"\nconcurrency = {concurrency}\nmax_retries = {max_retries}\n'
        f'timeout_s = {timeout_s}\n{named}{extra}[sampling]\nmode = "fixed"\nk = {k}\n'
    )
    return str(path)


def write_tasks(path, n: int) -> str:
    """n math tasks whose answer is the sum of the numbers in the prompt."""
    with open(path, "w") as fh:
        for i in range(n):
            a, b = i + 3, 2 * i + 40
            fh.write(json.dumps({"task_id": f"t{i}", "prompt": f"What is {a} plus {b}?", "answer": str(a + b)}) + "\n")
    return str(path)
