"""The attempt's process: runs model-written code and nothing else.

Started by runner.py inside its own sandbox, with `sandbox_guard` loaded
as a module. It locks itself down, runs the attempt's program, says hello
(does the entry point exist?), then answers calls: one JSON line in
(`{"id", "args", "kwargs"}`, plain data), one JSON line out (`{"id",
"ret"}`, `{"id", "exc": TypeName}` or `{"id", "bad": why}`).

Nothing here is trusted. The attempt can patch this code, the codec and
every builtin of this process, and write anything to its answer pipe: the
harness (harness.py, another process) decodes every answer as
plain data and decides the verdict itself. The tests never enter this
process.
"""

import builtins
import json
import sys

import sandbox_guard as guard


def _exception_reply(call_id, e):
    reply = {"id": call_id, "exc": guard.safe_name(type(e).__name__)}
    if isinstance(e, guard.SandboxViolation) and e.why in guard.WHY:
        reply["why"] = e.why
    return reply


def main():
    req = json.loads(sys.stdin.read())
    sys.stdin.close()
    fd_in, fd_out, entry, code = req["fd_in"], req["fd_out"], req["entry_point"], req["code"]
    reader = guard.LineReader(fd_in, req["message_cap"])
    guard.lock_down(req)
    req.clear()
    ns = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(code, "<attempt>", "exec"), ns)
    except BaseException as e:  # noqa: B036 - whatever the program raises is reported by type
        guard.send(fd_out, dict(_exception_reply(None, e), hello=True))
        return
    guard.send(fd_out, {"hello": True, "callable": callable(ns.get(entry))})
    while True:
        try:
            msg = reader.read()
        except guard.NotPlainData:
            return
        if msg is None:
            return
        call_id = msg.get("id") if isinstance(msg, dict) else None
        try:
            args = guard.decode(msg["args"])
            kwargs = guard.decode(msg["kwargs"])
            result = ns[entry](*args, **kwargs)
            reply = {"id": call_id, "ret": guard.encode(result)}
        except guard.NotPlainData as e:
            reply = {"id": call_id, "bad": guard.safe_name(str(e))}
        except BaseException as e:  # noqa: B036
            reply = _exception_reply(call_id, e)
        guard.send(fd_out, reply)


main()
