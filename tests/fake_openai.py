"""A tiny OpenAI-compatible chat server for CLI tests: scripted answers,
an optional gate that holds every request until the test opens it, and
modes for the malformed 200 responses real proxies send."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    """mode: "ok" (a boxed answer: the right one on even seeds), "html" (200
    with an HTML page), "empty" (200 with `choices: []`). `gated`: requests
    wait until the test lets them through, `allow(n)` at a time or all at
    once (`open_gate()`)."""

    def __init__(self, mode: str = "ok", gated: bool = False):
        self.mode = mode
        self.hits = 0
        self.permits = threading.Semaphore(0 if gated else 10**9)
        self.arrived = threading.Event()  # a request has come in
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.hits += 1
                server.arrived.set()
                server.permits.acquire(timeout=120)
                if server.mode == "html":
                    return self._send(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
                if server.mode == "empty":
                    return self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                            "choices": []})
                prompt = req["messages"][-1]["content"]
                nums = [int(x) for x in re.findall(r"\d+", prompt)]
                value = sum(nums) + (0 if req.get("seed", 0) % 2 == 0 else 1)
                self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": f"\\boxed{{{value}}}"}}],
                                 "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def allow(self, n: int):
        self.permits.release(n)

    def open_gate(self):
        self.permits.release(10**6)

    def close(self):
        self.open_gate()
        self.httpd.shutdown()
        self.httpd.server_close()


def run_config(path, url: str, k: int = 4, concurrency: int = 2, max_retries: int = 1) -> str:
    """A run config sampling from the fake server; returns its path."""
    path.write_text(f'[model]\nbackend = "openai"\nmodel_id = "fake@test"\n[model.openai]\nbase_url = "{url}"\n'
                    f'concurrency = {concurrency}\nmax_retries = {max_retries}\ntimeout_s = 60\n'
                    f'[sampling]\nmode = "fixed"\nk = {k}\n')
    return str(path)


def write_tasks(path, n: int) -> str:
    """n math tasks whose answer is the sum of the numbers in the prompt."""
    with open(path, "w") as fh:
        for i in range(n):
            a, b = i + 3, 2 * i + 40
            fh.write(json.dumps({"task_id": f"t{i}", "prompt": f"What is {a} plus {b}?", "answer": str(a + b)}) + "\n")
    return str(path)
