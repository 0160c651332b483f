"""math-verify's decimal comparison, made a comparison of values.

math-verify compares a Float with any number after rounding both to 6
decimal places (`math_verify.grader.sympy_numeric_eq`, float_rounding=6):
there "0.0" equals 1/4194304 and -0.0000003 equals 0.0000004, so the null
answer passed every task whose answer is under 5e-7 (docs/verification.md,
"Decimals are compared as values"). A pair it finds equal that way must
also agree to FLOAT_REL_TOLERANCE of the larger magnitude (0.0 never
equals a nonzero value); 1/3 == 0.333333 still holds. Installed in the
math worker processes (math_answers.equivalent), once each.
"""

from __future__ import annotations

FLOAT_REL_TOLERANCE = 1e-3


def install_numeric_guard() -> None:
    from math_verify import grader

    numeric_eq = grader.sympy_numeric_eq
    if getattr(numeric_eq, "tasksieve_guarded", False):
        return

    def guarded(a, b, float_rounding, numeric_precision):
        if not numeric_eq(a, b, float_rounding, numeric_precision):
            return False
        if not (getattr(a, "is_Float", False) or getattr(b, "is_Float", False)):
            return True  # no rounding was applied
        # Rounded: compare the values themselves, evaluated as math-verify did
        # (the other side may be an unevaluated product such as 4 x 10^-7).
        x, y = grader.safe_sympy_doit(a), grader.safe_sympy_doit(b)
        if getattr(x, "is_Number", False) and getattr(y, "is_Number", False):
            return bool(abs(x - y) <= FLOAT_REL_TOLERANCE * max(abs(x), abs(y)))
        return True

    guarded.tasksieve_guarded = True
    grader.sympy_numeric_eq = guarded
