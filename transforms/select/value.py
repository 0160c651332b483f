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
bounds and the grammar are in schemas/value_formula.py).
"""

from __future__ import annotations

import ast

import numpy as np

from tasksieve.schemas.value_formula import (
    ARITY,
    BINARY_OPS,
    DEFAULT_VALUE,
    MAX_FORMULA_CHARS,  # noqa: F401
    MAX_FORMULA_DEPTH,  # noqa: F401
    MAX_FORMULA_NODES,  # noqa: F401
    NAMES,  # noqa: F401
    UNARY_OPS,
    ValueFormulaError,
    check_formula,
)

FUNCTIONS = {"min": np.minimum, "max": np.maximum, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "abs": np.abs}
_BINARY = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide, ast.Pow: np.power}
_UNARY = {ast.USub: np.negative, ast.UAdd: np.positive}
assert set(FUNCTIONS) == set(ARITY) and set(_BINARY) == set(BINARY_OPS) and set(_UNARY) == set(UNARY_OPS)


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


def task_values(
    n_pass, n, formula: str = DEFAULT_VALUE, prior_strength: float = 4.0, group_size: int = 8
) -> tuple[np.ndarray, np.ndarray, float]:
    """(value, shrunk p, prior mean) per task. Values are finite and >= 0:
    a formula that gives NaN or a negative number for a task gives it 0."""
    n_pass = np.asarray(n_pass, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m = pool_prior(n_pass, n)
    p = shrunk_pass_rate(n_pass, n, m, prior_strength)
    names = {
        "p": p,
        "p_raw": np.divide(n_pass, n, out=np.zeros_like(n), where=n > 0),
        "n": n,
        "n_pass": n_pass,
        "m": np.float64(m),
        "G": np.float64(group_size),
    }
    tree = check_formula(formula)
    with np.errstate(all="ignore"):
        raw = _evaluate(tree, names)
    value = np.broadcast_to(np.asarray(raw, dtype=np.float64), p.shape).copy()
    value[~np.isfinite(value) | (value < 0)] = 0.0
    return value, p, m


def describe(formula: str, prior_strength: float) -> str:
    """One line for the summary and the report."""
    return f"value = {formula}, p = (n_pass + {prior_strength:g} m) / (n_attempts + {prior_strength:g})"
