"""The test harness: runs a task's tests and decides pass or fail. It never
runs attempt code.

Started by runner.py in a sandbox of its own (the tests are delivery code
and may be hostile too), with `sandbox_guard` loaded as a module. The
function under test is a proxy: each call sends its arguments as plain data
to the attempt's process and rebuilds the answer as fresh built-in objects
(sandbox_codec.decode). So an object with an always-true `__eq__`, an `int`
subclass, a patched builtin or a forged verdict in the attempt's process has
nothing to act on here, and the hidden tests never leave this process.

Mutation and identity: the tests hold their own argument objects, and an
in-process function would act on those. So the attempt's reply carries the
arguments as the call left them (`after`) and where its return value is
an argument's own list, dict or set (`alias`); the harness changes the
tests' objects in place to match (nested lists and dicts keep their
identity) and returns the tests' own object where the attempt returned an
argument. A test that keeps `orig = list(xs)` and asserts `xs == orig`
after the call, or asserts `out is not xs`, then fails a mutating or
argument-returning attempt exactly as in process; a test that expects an
in-place change sees it. Forged `after`/`alias` gain nothing: they only
say what the attempt could have done for real.

Helper functions the tests use besides the entry point (HumanEval's `poly`,
`encode_cyclic`) come from the task's reference solution, run here first,
never from the attempt.

The verdict goes to the parent on a pipe that only this process holds:
`{"passed": bool, "error": code-or-None, "calls": n}`. Error codes are the
harness's own words (README, "Verifiers"): `wrong_answer (tests line N:
...)`, `timeout`, `crash: TypeName`, `not_plain_data: TypeName`,
`exited_early`, `no_entry_point`, `memory`, `blocked: network`, ...
"""

import builtins
import json
import signal
import sys
import traceback

import sandbox_codec as codec
import sandbox_guard as guard

# Exceptions of the attempt that the tests may legitimately expect, rebuilt
# here as fresh instances of the built-in class. Anything else (StopIteration,
# which would end a `map()` early; SystemExit; custom classes) becomes a
# CandidateError.
RAISABLE = (
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "ZeroDivisionError",
    "ArithmeticError",
    "OverflowError",
    "RuntimeError",
    "RecursionError",
    "NotImplementedError",
    "AttributeError",
    "LookupError",
    "AssertionError",
    "UnicodeError",
    "FloatingPointError",
    "NameError",
    "OSError",
    "Exception",
)


class CandidateError(Exception):
    """The attempt raised something the harness does not rebuild."""


class Abort(BaseException):
    """The call cannot go on (the boundary was broken); a BaseException so a
    test's `except Exception` does not swallow it, and sticky besides."""


class CaseTimeout(BaseException):
    pass


def _tests_line(tb, source):
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == "<tests>":
            found = lineno
    if found is None:
        return ""
    lines = source.splitlines()
    text = lines[found - 1].strip()[:120] if 0 < found <= len(lines) else ""
    return f" (tests line {found}: {text})"


MUTABLE = (list, dict, set)
MAX_ALIASES = 1000


def _sync(orig, new):
    """Make `orig` (a tests' object) equal `new` in place, keeping the
    identity of nested lists, dicts and sets; False when `orig` cannot
    change in place (an int, a str, a tuple: the caller replaces it)."""
    t = type(orig)
    if t is not type(new) or t not in (list, dict, set, tuple):
        return False
    if t is set:
        orig.clear()
        orig.update(new)
    elif t is list:
        for i in range(min(len(orig), len(new))):
            if not _sync(orig[i], new[i]):
                orig[i] = new[i]
        del orig[len(new) :]
        orig.extend(new[len(orig) :])
    elif t is dict:
        for k in [k for k in orig if k not in new]:
            del orig[k]
        for k, v in new.items():
            if not (k in orig and _sync(orig[k], v)):
                orig[k] = v
    else:  # a tuple cannot change; the lists inside it can
        if len(orig) != len(new):
            return False
        for a, b in zip(orig, new):
            _sync(a, b)
    return True


def _child(node, i):
    if type(i) is not int or isinstance(i, bool):
        raise codec.NotPlainData("malformed alias")
    if type(node) in (list, tuple) and 0 <= i < len(node):
        return node[i]
    if type(node) is dict and 0 <= i < len(node):
        return list(node.values())[i]
    raise codec.NotPlainData("malformed alias")


def _put(node, path, target):
    """`node` with the value at `path` replaced by `target`."""
    if not path:
        return target
    i = path[0]
    inner = _put(_child(node, i), path[1:], target)
    if type(node) is list:
        node[i] = inner
    elif type(node) is dict:
        node[list(node)[i]] = inner
    else:
        node = tuple(inner if j == i else v for j, v in enumerate(node))
    return node


class Harness:
    def __init__(self, req):
        self.to_attempt, self.result_fd = req["fd_to"], req["fd_result"]
        self.reader = codec.LineReader(req["fd_from"], req["message_cap"])
        self.entry, self.tests, self.support = req["entry_point"], req["tests"], req.get("support") or ""
        self.call_check, self.wall = req["call_check"], req["limits"]["case_wall"]
        self.sticky = None  # the first boundary failure: decides the verdict whatever the tests do
        self.calls = 0

    def fail(self, why):
        if self.sticky is None:
            self.sticky = why
        raise Abort(why)

    def on_alarm(self, signum, frame):
        if self.sticky is None:
            self.sticky = "timeout"
        raise CaseTimeout()

    def receive(self):
        try:
            msg = self.reader.read()
        except codec.NotPlainData as e:
            self.fail(f"not_plain_data: {codec.safe_name(str(e))}")
        if msg is None:
            self.fail("exited_early")
        if type(msg) is not dict:
            self.fail("not_plain_data: malformed")
        return msg

    def call(self, *args, **kwargs):
        if self.sticky:
            raise Abort(self.sticky)
        self.calls += 1
        try:
            payload = {"id": self.calls, "args": codec.encode(list(args)), "kwargs": codec.encode(dict(kwargs))}
        except codec.NotPlainData as e:
            self.fail(f"unsupported_arguments: the tests pass a {e} (only plain data crosses to the attempt)")
        try:
            codec.send(self.to_attempt, payload)
        except OSError:
            self.fail("exited_early")
        msg = self.receive()
        if msg.get("id") != self.calls:
            self.fail("not_plain_data: answer out of turn")
        if "bad" in msg:
            self.fail(f"not_plain_data: {codec.safe_name(msg['bad'])}")
        try:
            self.mirror_arguments(msg.get("after"), args, kwargs, payload)
            if "ret" in msg:
                return self.aliased(codec.decode(msg["ret"]), msg.get("alias"), args, kwargs)
        except (codec.NotPlainData, RecursionError) as e:
            self.fail(f"not_plain_data: {codec.safe_name(str(e))}")
        raise self.rebuilt_exception(msg)

    @staticmethod
    def mirror_arguments(after, args, kwargs, sent):
        """The call's changes to its arguments, made to the tests' objects:
        only to those whose state changed (the same list passed twice must
        not be put back by its unchanged second copy)."""
        if after is None:
            return
        new = [codec.decode(t) for t in after] if type(after) is list and len(after) == 2 else None
        if (
            new is None
            or type(new[0]) is not list
            or type(new[1]) is not dict
            or len(new[0]) != len(args)
            or list(new[1]) != list(kwargs)
            or len(after[1][1]) != len(kwargs)
        ):
            raise codec.NotPlainData("malformed arguments")
        trees_before = sent["args"][1] + [v for _, v in sent["kwargs"][1]]
        trees_after = after[0][1] + [v for _, v in after[1][1]]
        for orig, changed, before, now in zip(
            list(args) + list(kwargs.values()), new[0] + list(new[1].values()), trees_before, trees_after
        ):
            if now != before:
                _sync(orig, changed)

    @staticmethod
    def aliased(ret, alias, args, kwargs):
        """`ret` with the tests' own objects where the attempt returned an argument."""
        if alias is None:
            return ret
        if type(alias) is not list or len(alias) > MAX_ALIASES:
            raise codec.NotPlainData("malformed alias")
        roots = [list(args), list(kwargs.values())]
        for pair in alias:
            if (
                type(pair) is not list
                or len(pair) != 2
                or type(pair[0]) is not list
                or type(pair[1]) is not list
                or len(pair[1]) < 2
            ):
                raise codec.NotPlainData("malformed alias")
            target = roots
            for i in pair[1]:
                target = _child(target, i)
            if type(target) not in MUTABLE:
                raise codec.NotPlainData("malformed alias")
            ret = _put(ret, pair[0], target)
        return ret

    def rebuilt_exception(self, msg):
        name = codec.safe_name(msg.get("exc"))
        if name == "MemoryError":
            self.fail("memory")
        if name == "SandboxViolation":
            why = msg.get("why")
            self.fail(f"blocked: {why if why in guard.WHY else 'sandbox'}")
        if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
            self.fail(f"crash: {name}")
        cls = getattr(builtins, name) if name in RAISABLE else CandidateError
        e = cls(f"raised by the attempt: {name}")
        e.tasksieve_candidate = name
        return e

    def proxy(self):
        def candidate(*args, **kwargs):
            return self.call(*args, **kwargs)

        candidate.__name__ = candidate.__qualname__ = self.entry
        return candidate

    def run(self):
        """The verdict dict."""
        signal.signal(signal.SIGALRM, self.on_alarm)
        error = None
        try:
            # The clock starts once the attempt's process is up and locked down, before its program
            # runs: a slow sandbox start-up (a loaded machine) is no timeout of the attempt's. A start-up
            # that never ends is the parent's deadline's (runner.STARTUP_MARGIN_S).
            if self.receive().get("started") is not True:
                self.fail("not_plain_data: no start")
            signal.setitimer(signal.ITIMER_REAL, self.wall, 0.05)  # re-fires until the tests give up
            hello = self.receive()
            if "exc" in hello:
                self.rebuilt_exception(hello)  # sticky cases raise here
                raise Abort(f"crash: {codec.safe_name(hello['exc'])}")
            if not hello.get("hello"):
                self.fail("not_plain_data: no hello")
            if hello.get("callable") is not True:
                self.fail("no_entry_point")
            ns = {"__name__": "__tests__", "__builtins__": builtins}
            if self.support:
                exec(compile(self.support, "<reference>", "exec"), ns)
            ns[self.entry] = self.proxy()
            exec(compile(self.tests, "<tests>", "exec"), ns)
            if self.call_check:
                ns["check"](ns[self.entry])
        except BaseException as e:  # noqa: B036 - every outcome is a verdict
            error = self.describe(e)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if self.sticky:
            error = self.sticky
        return {"passed": error is None, "error": error, "calls": self.calls}

    def describe(self, e):
        if isinstance(e, (Abort, CaseTimeout)):
            return self.sticky or str(e)
        where = _tests_line(e.__traceback__, self.tests)
        name = getattr(e, "tasksieve_candidate", None)
        if name:
            return f"crash: {name}{where}"
        if isinstance(e, MemoryError):
            return "memory"
        if isinstance(e, AssertionError):
            return f"wrong_answer{where}"
        if isinstance(e, SyntaxError):
            return f"tests_error: SyntaxError (line {e.lineno})"
        return f"wrong_answer: {codec.safe_name(type(e).__name__)}{where}"


def main(req=None):
    """Run one case. `req` is given by the pooled worker (worker.py), which
    has read it already; a process of its own reads it from stdin."""
    if req is None:
        req = json.loads(sys.stdin.read())
        sys.stdin.close()
    harness = Harness(req)
    key = req.get("verdict_key")  # proves to the parent that this process wrote the verdict
    guard.lock_down(req)
    req.clear()
    verdict = harness.run()
    codec.send(harness.result_fd, dict(verdict, key=key))


if __name__ == "__main__":
    main()
