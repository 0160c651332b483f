"""The grammar of `[select] value`, the value formula: what it may name and
call, and the bounds on its size, checked when the config is read. The
formula is evaluated (in numpy) by transforms/select/value.py; keep the two
in step (an assertion there checks the operator and function sets match)."""

from __future__ import annotations

import ast

DEFAULT_VALUE = "p * (1 - p)"

# What a value expression may use. `G` is the trainer's rollouts per task.
NAMES = {
    "p": "pass rate shrunk toward the pool's prior",
    "p_raw": "measured pass rate, n_pass / n_attempts",
    "n": "attempts that measured it",
    "n_pass": "passing attempts",
    "m": "the pool's mean pass rate (the prior's mean)",
    "G": "rollouts per task at training (group size)",
}
ARITY = {"min": 2, "max": 2, "sqrt": 1, "exp": 1, "log": 1, "abs": 1}
# The operators allowed; transforms/select/value.py maps each to a numpy one.
BINARY_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
UNARY_OPS = (ast.USub, ast.UAdd)

# The formula comes from a config file: bounded, so no value of it can hang
# `select` or eat its memory. It is never run by Python's eval: transforms/select/value.py's
# evaluator walks the checked tree with numpy float64 operations only, so every step
# costs one pass over the pool's arrays whatever the numbers are. That
# removes the big-integer attacks at the root (9**9**9**9, 10**10**8 * ...,
# huge int literals: constants are float64, a power that overflows is inf,
# and a non-finite value makes a task's value 0), and strings, shifts,
# comprehensions, attributes and calls other than the functions of ARITY are refused by
# the checker. What is left to bound is the formula's size: its text, its
# node count (each node is one array operation) and its nesting (the
# parser's and the walker's recursion).
MAX_FORMULA_CHARS = 500
MAX_FORMULA_NODES = 200
MAX_FORMULA_DEPTH = 32


class ValueFormulaError(ValueError):
    """A value expression that cannot be used; the message is one line."""


def _depth(node: ast.AST) -> int:
    """Nesting depth, iteratively (a deep tree must not overflow the stack here)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


def _show(expr: str) -> str:
    return repr(expr if len(expr) <= 80 else expr[:77] + "...")


def check_formula(expr: str) -> ast.Expression:
    """The parsed expression, or ValueFormulaError naming what is not allowed."""
    if not isinstance(expr, str):
        raise ValueFormulaError(f"select.value must be text, not {type(expr).__name__}")
    if len(expr) > MAX_FORMULA_CHARS:
        raise ValueFormulaError(
            f"select.value {_show(expr)} is {len(expr)} characters; at most {MAX_FORMULA_CHARS} are allowed"
        )
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueFormulaError(f"select.value {_show(expr)} is not an expression: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # a null byte, nesting past the parser's limit
        raise ValueFormulaError(f"select.value {_show(expr)} cannot be parsed: {type(e).__name__}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_FORMULA_NODES:
        raise ValueFormulaError(
            f"select.value {_show(expr)} has {nodes} parts; at most {MAX_FORMULA_NODES} are allowed"
        )
    depth = _depth(tree)
    if depth > MAX_FORMULA_DEPTH:
        raise ValueFormulaError(
            f"select.value {_show(expr)} nests {depth} deep; at most {MAX_FORMULA_DEPTH} levels are allowed"
        )
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load))
            or type(node) in BINARY_OPS
            or type(node) in UNARY_OPS
        ):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            continue
        if isinstance(node, ast.Name) and (node.id in NAMES or node.id in ARITY):
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ARITY
            and not node.keywords
        ):
            if len(node.args) != ARITY[node.func.id] or any(isinstance(a, ast.Starred) for a in node.args):
                raise ValueFormulaError(
                    f"select.value {_show(expr)}: {node.func.id}() takes {ARITY[node.func.id]} argument(s)"
                )
            continue
        what = (
            node.id
            if isinstance(node, ast.Name)
            else f"the constant {_show(str(node.value))}"
            if isinstance(node, ast.Constant)
            else type(node).__name__
        )
        raise ValueFormulaError(
            f"select.value {_show(expr)}: {what if isinstance(node, ast.Constant) else repr(what)} is not allowed; use numbers, + - * / **, "
            f"{', '.join(ARITY)} and the names {', '.join(NAMES)}"
        )
    return tree
