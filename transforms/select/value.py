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
few functions allowed, so a config file can never run code.
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
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)


class ValueFormulaError(ValueError):
    """A value expression that cannot be used; the message is one line."""


def check_formula(expr: str) -> ast.Expression:
    """The parsed expression, or ValueFormulaError naming what is not allowed."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueFormulaError(f"select.value {expr!r} is not an expression: {e.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load) + _OPS):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            continue
        if isinstance(node, ast.Name) and (node.id in NAMES or node.id in FUNCTIONS):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
                and not node.keywords:
            continue
        what = node.id if isinstance(node, ast.Name) else type(node).__name__
        raise ValueFormulaError(f"select.value {expr!r}: {what!r} is not allowed; use numbers, + - * / **, "
                                f"{', '.join(FUNCTIONS)} and the names {', '.join(NAMES)}")
    return tree


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
             "m": m, "G": float(group_size)}
    code = compile(check_formula(formula), "<select.value>", "eval")
    with np.errstate(all="ignore"):
        raw = eval(code, {"__builtins__": {}}, {**FUNCTIONS, **names})  # checked: arithmetic over NAMES only
    value = np.broadcast_to(np.asarray(raw, dtype=np.float64), p.shape).copy()
    value[~np.isfinite(value) | (value < 0)] = 0.0
    return value, p, m


def describe(formula: str, prior_strength: float) -> str:
    """One line for the summary and the report."""
    return f"value = {formula}, p = (n_pass + {prior_strength:g} m) / (n_attempts + {prior_strength:g})"
