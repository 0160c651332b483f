"""The plain-data codec the two sandboxed processes talk in, and the pipe
messages that carry it. Standard library only: run inside the sandbox as
module `sandbox_codec` (see runner.py), like guard.py.

The codec (`encode` / `decode`) is the only way values cross between the
attempt's process and the test harness: None, bool, int, float, str, bytes
and lists, tuples, dicts, sets and frozensets of those, tagged by exact type.
The harness rebuilds fresh built-in objects from it, so an attempt's custom
`__eq__`, an `int` subclass or a patched builtin has nothing to act on.
"""

import base64
import json
import os
import re

MAX_DEPTH = 100
MAX_NODES = 1_000_000


class NotPlainData(Exception):
    """A value that is not plain data crossed (or tried to cross) the boundary."""


def encode(value):
    """A JSON-able tagged tree of `value`; NotPlainData for anything that is
    not exactly one of the plain types (subclasses included: `type(x) is int`)."""
    budget = [MAX_NODES]

    def enc(x, depth):
        budget[0] -= 1
        if depth > MAX_DEPTH or budget[0] < 0:
            raise NotPlainData("too deep or too large")
        t = type(x)
        if x is None:
            return ["n"]
        if t is bool:
            return ["b", 1 if x else 0]
        if t is int:
            return ["i", hex(x)]
        if t is float:
            return ["f", x.hex()]
        if t is str:
            return ["s", x]
        if t is bytes:
            return ["y", base64.b64encode(x).decode("ascii")]
        if t is list or t is tuple:
            return ["l" if t is list else "t", [enc(v, depth + 1) for v in x]]
        if t is dict:
            return ["d", [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]]
        if t is set or t is frozenset:
            return ["S" if t is set else "F", [enc(v, depth + 1) for v in x]]
        raise NotPlainData(safe_name(t.__name__))

    return enc(value, 0)


_INT = re.compile(r"-?0x[0-9a-f]+\Z")
_SEQ = {"l": list, "t": tuple, "S": set, "F": frozenset}


def decode(tree):
    """Fresh built-in objects from a tagged tree; NotPlainData for anything
    malformed. Never runs code from the tree."""
    budget = [MAX_NODES]

    def dec(node, depth):
        budget[0] -= 1
        if depth > MAX_DEPTH or budget[0] < 0:
            raise NotPlainData("too deep or too large")
        if type(node) is not list or not node or type(node[0]) is not str:
            raise NotPlainData("malformed")
        tag, rest = node[0], node[1:]
        if tag == "n" and not rest:
            return None
        if len(rest) != 1:
            raise NotPlainData("malformed")
        v = rest[0]
        if tag == "b" and v in (0, 1) and type(v) is int:
            return v == 1
        if tag == "i" and type(v) is str and len(v) < 100_000 and _INT.match(v):
            return int(v, 16)
        if tag == "f" and type(v) is str and len(v) < 64:
            try:
                return float.fromhex(v)
            except ValueError:
                raise NotPlainData("malformed float") from None
        if tag == "s" and type(v) is str:
            return str(v)
        if tag == "y" and type(v) is str:
            try:
                return base64.b64decode(v.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise NotPlainData("malformed bytes") from None
        if tag in _SEQ and type(v) is list:
            items = [dec(x, depth + 1) for x in v]
            try:
                return _SEQ[tag](items)
            except TypeError:  # an unhashable member of a set
                raise NotPlainData("unhashable set member") from None
        if tag == "d" and type(v) is list:
            out = {}
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise NotPlainData("malformed")
                k = dec(pair[0], depth + 1)
                try:
                    out[k] = dec(pair[1], depth + 1)
                except TypeError:
                    raise NotPlainData("unhashable dict key") from None
            return out
        raise NotPlainData("malformed")

    return dec(tree, 0)


def safe_name(name, limit=40):
    """A type or exception name reduced to identifier characters: the only
    attempt-chosen text that ever reaches a verdict."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]", "", str(name))[:limit]
    return cleaned or "unnamed"


def send(fd, obj):
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class LineReader:
    """Reads newline-terminated JSON messages from a pipe, at most `cap`
    bytes each."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.buf = fd, cap, b""

    def read(self):
        """The next message, or None at end of file. NotPlainData for an
        oversized or malformed one."""
        while b"\n" not in self.buf:
            if len(self.buf) > self.cap:
                raise NotPlainData("message too large")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            return json.loads(line.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            raise NotPlainData("malformed message") from None
