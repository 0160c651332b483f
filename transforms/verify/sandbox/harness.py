"""The test harness: runs a task's tests and decides pass or fail. It never
runs attempt code.

Started by runner.py in a sandbox of its own (the tests are delivery code
and may be hostile too), with `sandbox_guard` loaded as a module. The
function under test is a proxy: each call sends its arguments as plain data
to the attempt's process and rebuilds the answer as fresh built-in objects
(sandbox_guard.decode). So an object with an always-true `__eq__`, an `int`
subclass, a patched builtin or a forged verdict in the attempt's process has
nothing to act on here, and the hidden tests never leave this process.

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

import sandbox_guard as guard

# Exceptions of the attempt that the tests may legitimately expect, rebuilt
# here as fresh instances of the built-in class. Anything else (StopIteration,
# which would end a `map()` early; SystemExit; custom classes) becomes a
# CandidateError.
RAISABLE = ("ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError",
            "OverflowError", "RuntimeError", "RecursionError", "NotImplementedError", "AttributeError",
            "LookupError", "AssertionError", "UnicodeError", "FloatingPointError", "NameError", "OSError",
            "Exception")


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


class Harness:
    def __init__(self, req):
        self.to_attempt, self.result_fd = req["fd_to"], req["fd_result"]
        self.reader = guard.LineReader(req["fd_from"], req["message_cap"])
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
        except guard.NotPlainData as e:
            self.fail(f"not_plain_data: {guard.safe_name(str(e))}")
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
            payload = {"id": self.calls, "args": guard.encode(list(args)), "kwargs": guard.encode(dict(kwargs))}
        except guard.NotPlainData as e:
            self.fail(f"unsupported_arguments: the tests pass a {e} (only plain data crosses to the attempt)")
        try:
            guard.send(self.to_attempt, payload)
        except OSError:
            self.fail("exited_early")
        msg = self.receive()
        if msg.get("id") != self.calls:
            self.fail("not_plain_data: answer out of turn")
        if "ret" in msg:
            try:
                return guard.decode(msg["ret"])
            except guard.NotPlainData as e:
                self.fail(f"not_plain_data: {e}")
        if "bad" in msg:
            self.fail(f"not_plain_data: {guard.safe_name(msg['bad'])}")
        raise self.rebuilt_exception(msg)

    def rebuilt_exception(self, msg):
        name = guard.safe_name(msg.get("exc"))
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
        signal.setitimer(signal.ITIMER_REAL, self.wall, 0.05)  # re-fires until the tests give up
        error = None
        try:
            hello = self.receive()
            if "exc" in hello:
                self.rebuilt_exception(hello)  # sticky cases raise here
                raise Abort(f"crash: {guard.safe_name(hello['exc'])}")
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
        return f"wrong_answer: {guard.safe_name(type(e).__name__)}{where}"


def main():
    req = json.loads(sys.stdin.read())
    sys.stdin.close()
    harness = Harness(req)
    key = req.get("verdict_key")  # proves to the parent that this process wrote the verdict
    guard.lock_down(req)
    req.clear()
    verdict = harness.run()
    guard.send(harness.result_fd, dict(verdict, key=key))


main()
