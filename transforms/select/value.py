"""The value of a task: the training signal it is expected to give.

A group-relative trainer (GRPO, RLOO) learns from a task only when its
group of rollouts holds both a pass and a fail; the expected policy
improvement from a task grows with the variance of its reward, p(1-p) for
a pass/fail reward with pass rate p (Foster et al. 2025, "Learning to
Reason at the Frontier of Learnability", arXiv:2502.12272; Bae et al.
2025, "Online Difficulty Filtering for Reasoning Oriented Reinforcement
Learning", arXiv:2504.03380). docs/selection.md has the derivation.

p is not the raw measured rate: a task measured with 2 attempts (1 pass,
1 fail) says little, and its raw 0.5 would put it at the top of every
selection. It is shrunk toward the pool's mean pass rate m with the weight
of `prior_strength` pseudo-attempts:

    p = (n_pass + s * m) / (n_attempts + s)

The formula is an expression the analyst may replace (`[select] value`),
over the names in `NAMES`; it is parsed once, with only arithmetic and a
few functions allowed, and evaluated in float64 numpy operations, so a
config file can never run code, hang `select` or fill its memory (the
bounds are below `FUNCTIONS`).
"""

from __future__ import annotations

import ast

import numpy as np

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
FUNCTIONS = {"min": np.minimum, "max": np.maximum, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "abs": np.abs}
ARITY = {"min": 2, "max": 2, "sqrt": 1, "exp": 1, "log": 1, "abs": 1}
_BINARY = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide, ast.Pow: np.power}
_UNARY = {ast.USub: np.negative, ast.UAdd: np.positive}

# The formula comes from a config file: bounded, so no value of it can hang
# `select` or eat its memory. It is never run by Python's eval: `_evaluate`
# walks the checked tree with numpy float64 operations only, so every step
# costs one pass over the pool's arrays whatever the numbers are. That
# removes the big-integer attacks at the root (9**9**9**9, 10**10**8 * ...,
# huge int literals: constants are float64, a power that overflows is inf,
# and a non-finite value makes a task's value 0), and strings, shifts,
# comprehensions, attributes and calls other than FUNCTIONS are refused by
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
        raise ValueFormulaError(f"select.value {_show(expr)} is {len(expr)} characters; at most "
                                f"{MAX_FORMULA_CHARS} are allowed")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueFormulaError(f"select.value {_show(expr)} is not an expression: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # a null byte, nesting past the parser's limit
        raise ValueFormulaError(f"select.value {_show(expr)} cannot be parsed: {type(e).__name__}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_FORMULA_NODES:
        raise ValueFormulaError(f"select.value {_show(expr)} has {nodes} parts; at most {MAX_FORMULA_NODES} are allowed")
    depth = _depth(tree)
    if depth > MAX_FORMULA_DEPTH:
        raise ValueFormulaError(f"select.value {_show(expr)} nests {depth} deep; at most {MAX_FORMULA_DEPTH} "
                                "levels are allowed")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load)) or type(node) in _BINARY \
                or type(node) in _UNARY:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            continue
        if isinstance(node, ast.Name) and (node.id in NAMES or node.id in FUNCTIONS):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
                and not node.keywords:
            if len(node.args) != ARITY[node.func.id] or any(isinstance(a, ast.Starred) for a in node.args):
                raise ValueFormulaError(f"select.value {_show(expr)}: {node.func.id}() takes "
                                        f"{ARITY[node.func.id]} argument(s)")
            continue
        what = node.id if isinstance(node, ast.Name) else f"the constant {_show(str(node.value))}" \
            if isinstance(node, ast.Constant) else type(node).__name__
        raise ValueFormulaError(f"select.value {_show(expr)}: {what if isinstance(node, ast.Constant) else repr(what)} is not allowed; use numbers, + - * / **, "
                                f"{', '.join(FUNCTIONS)} and the names {', '.join(NAMES)}")
    return tree


def _constant(value) -> np.float64:
    try:
        return np.float64(value)
    except OverflowError:  # an integer literal past float64: as large as a float gets
        return np.float64(np.inf)


def _evaluate(node: ast.AST, names: dict):
    """The checked tree's value, in float64 numpy operations only."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, names)
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, names), _evaluate(node.right, names))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, names))
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*(_evaluate(a, names) for a in node.args))
    raise ValueFormulaError(f"select.value: {type(node).__name__!r} is not allowed")  # check_formula refused it


def shrunk_pass_rate(n_pass: np.ndarray, n: np.ndarray, prior_mean: float, strength: float) -> np.ndarray:
    """(n_pass + s*m) / (n + s): a few attempts move p little, many move it all the way."""
    return (n_pass + strength * prior_mean) / (n + strength)


def pool_prior(n_pass: np.ndarray, n: np.ndarray) -> float:
    """The pool's mean pass rate, attempt-weighted (0.5 for an empty pool)."""
    total = float(np.sum(n))
    return float(np.sum(n_pass)) / total if total > 0 else 0.5


def task_values(n_pass, n, formula: str = DEFAULT_VALUE, prior_strength: float = 4.0,
                group_size: int = 8) -> tuple[np.ndarray, np.ndarray, float]:
    """(value, shrunk p, prior mean) per task. Values are finite and >= 0:
    a formula that gives NaN or a negative number for a task gives it 0."""
    n_pass = np.asarray(n_pass, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m = pool_prior(n_pass, n)
    p = shrunk_pass_rate(n_pass, n, m, prior_strength)
    names = {"p": p, "p_raw": np.divide(n_pass, n, out=np.zeros_like(n), where=n > 0), "n": n, "n_pass": n_pass,
             "m": np.float64(m), "G": np.float64(group_size)}
    tree = check_formula(formula)
    with np.errstate(all="ignore"):
        raw = _evaluate(tree, names)
    value = np.broadcast_to(np.asarray(raw, dtype=np.float64), p.shape).copy()
    value[~np.isfinite(value) | (value < 0)] = 0.0
    return value, p, m


def describe(formula: str, prior_strength: float) -> str:
    """One line for the summary and the report."""
    return f"value = {formula}, p = (n_pass + {prior_strength:g} m) / (n_attempts + {prior_strength:g})"
