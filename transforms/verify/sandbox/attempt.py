"""The attempt's process: runs model-written code and nothing else.

Started by runner.py inside its own sandbox, with `sandbox_guard` loaded
as a module. It locks itself down, says it has started (the case's wall
clock runs from there: the sandbox's start-up is not the attempt's time),
runs the attempt's program, says hello (does the entry point exist?), then
answers calls: one JSON line in
(`{"id", "args", "kwargs"}`, plain data), one JSON line out (`{"id",
"ret"}`, `{"id", "exc": TypeName}` or `{"id", "bad": why}`). A reply
also carries `after`, the arguments as the call left them, when the call
changed them, and `alias`, where the return value holds one of the
argument objects themselves: the harness mirrors both onto the tests' own
objects, so a test sees what calling a function in its own process shows
(harness.py, "Mutation and identity").

Nothing here is trusted. The attempt can patch this code, the codec and
every builtin of this process, and write anything to its answer pipe: the
harness (harness.py, another process) decodes every answer as
plain data and decides the verdict itself. The tests never enter this
process.
"""

import builtins
import json
import sys

import sandbox_codec as codec
import sandbox_guard as guard


def _exception_reply(call_id, e):
    reply = {"id": call_id, "exc": codec.safe_name(type(e).__name__)}
    if isinstance(e, guard.SandboxViolation) and e.why in guard.WHY:
        reply["why"] = e.why
    return reply


MUTABLE = (list, dict, set)
MAX_ALIASES = 1000


def _children(x):
    t = type(x)
    if t is list or t is tuple:
        return enumerate(x)
    if t is dict:
        return enumerate(x.values())
    return ()


def alias_paths(args, kwargs, result):
    """[[path in the result, path in [args, kwargs-values]], ...] for each
    list, dict or set of the result that is an argument's own object (the
    outermost one only). A path is positions: in a list or tuple, or the
    n-th value of a dict."""
    where, budget = {}, [codec.MAX_NODES]

    def index(x, path):
        budget[0] -= 1
        if budget[0] < 0 or len(path) > codec.MAX_DEPTH:
            return
        if type(x) in MUTABLE:
            where.setdefault(id(x), path)
        for i, v in _children(x):
            index(v, path + [i])

    for root, values in ((0, args), (1, list(kwargs.values()))):
        for i, v in enumerate(values):
            index(v, [root, i])
    found = []

    def find(x, path):
        budget[0] -= 1
        if budget[0] < 0 or len(path) > codec.MAX_DEPTH or len(found) >= MAX_ALIASES:
            return
        if type(x) in MUTABLE and id(x) in where:
            found.append([path, where[id(x)]])
            return
        for i, v in _children(x):
            find(v, path + [i])

    if where:
        find(result, [])
    return found


SCALARS = (int, float, str, bytes, bool, type(None))


def _scalars(values):
    return all(type(v) in SCALARS for v in values)


def _with_arguments(reply, msg, args, kwargs):
    """`reply` plus the arguments' state when the call changed them."""
    try:
        after = [codec.encode(args), codec.encode(kwargs)]
    except codec.NotPlainData as e:
        return {"id": reply["id"], "bad": codec.safe_name(str(e))}
    if after != [msg["args"], msg["kwargs"]]:
        reply["after"] = after
    return reply


def main(req=None):
    """Run one case. `req` is given by the pooled worker (worker.py), which
    has read it already; a process of its own reads it from stdin."""
    if req is None:
        req = json.loads(sys.stdin.read())
        sys.stdin.close()
    fd_in, fd_out, entry, code = req["fd_in"], req["fd_out"], req["entry_point"], req["code"]
    reader = codec.LineReader(fd_in, req["message_cap"])
    guard.lock_down(req)
    req.clear()
    codec.send(fd_out, {"started": True})  # before any attempt code: the harness starts the case's clock
    ns = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(code, "<attempt>", "exec"), ns)
    except BaseException as e:  # noqa: B036 - whatever the program raises is reported by type
        codec.send(fd_out, dict(_exception_reply(None, e), hello=True))
        return
    codec.send(fd_out, {"hello": True, "callable": callable(ns.get(entry))})
    while True:
        try:
            msg = reader.read()
        except codec.NotPlainData:
            return
        if msg is None:
            return
        call_id = msg.get("id") if isinstance(msg, dict) else None
        args = kwargs = None
        scalars = False
        try:
            args = codec.decode(msg["args"])
            kwargs = codec.decode(msg["kwargs"])
            # Arguments of immutable types only: the call can neither change one nor return one as itself,
            # so there is no `after` or `alias` to look for (the common case: most calls pass numbers and strings).
            scalars = _scalars(args) and _scalars(kwargs.values())
            result = ns[entry](*args, **kwargs)
            reply = {"id": call_id, "ret": codec.encode(result)}
            alias = None if scalars else alias_paths(args, kwargs, result)
            if alias:
                reply["alias"] = alias
        except codec.NotPlainData as e:
            reply = {"id": call_id, "bad": codec.safe_name(str(e))}
        except BaseException as e:  # noqa: B036
            reply = _exception_reply(call_id, e)
        if type(args) is list and type(kwargs) is dict and "bad" not in reply and not scalars:
            reply = _with_arguments(reply, msg, args, kwargs)
        codec.send(fd_out, reply)


if __name__ == "__main__":
    main()
