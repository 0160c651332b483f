"""A budget (tasks or dollars), what a task costs to train on, and caps.

A task's price (what `--budget-usd` spends) is what a buyer pays for it:
its expert price (the delivery's `expert_cost_usd`, or its
`expert_minutes` at the rates' hourly expert rate: the run's `expert` cost
rows) plus its training price. A task the delivery left unpriced is
priced at the pool's highest expert price, so leaving a price out never
makes a task cheaper (buyer_price).

The training price is what training on it next would cost: `group_size`
rollouts of it (the trainer's group), each priced like the attempts that
measured it, i.e. its mean prompt and completion tokens (or engine
seconds) per attempt at the run's rates. The measurement's own attempt
count does not enter: sequential sampling stops a task after 2 attempts
or after 8, and the trainer will sample `group_size` either way.

Caps are shares of the budget in the budget's own unit: with
`--budget-tasks 100` and a cluster share of 0.25, a cluster holds at most
25 tasks; with `--budget-usd 50`, at most $12.50 of the selection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class BudgetError(ValueError):
    """A budget that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Budget:
    kind: str  # "tasks" or "usd"
    amount: float

    def text(self, amount: float | None = None) -> str:
        a = self.amount if amount is None else amount
        return f"{int(a)} tasks" if self.kind == "tasks" else f"${a:,.4f}"

    def spend_of(self, prices: np.ndarray) -> np.ndarray:
        """What each task takes out of this budget: 1, or its price."""
        return np.ones_like(prices) if self.kind == "tasks" else prices

    def cap(self, share: float) -> float:
        """The most a group (cluster, source, domain) may take, in budget units;
        a task budget's cap is at least one task, so a small budget is not
        capped to nothing."""
        if self.kind == "tasks":
            return float(max(1, math.floor(share * self.amount + 1e-9)))
        return share * self.amount

    def scaled(self, factor: float) -> "Budget":
        amount = self.amount * factor
        return Budget(self.kind, float(max(1, round(amount))) if self.kind == "tasks" else amount)


def parse_budget(tasks: str | None, usd: str | None) -> Budget:
    """The one budget given on the command line (as text, so that a
    non-number is our one-line error, not argparse's)."""
    if tasks is not None and usd is not None:
        raise BudgetError("give one budget, --budget-tasks or --budget-usd, not both")
    if tasks is None and usd is None:
        raise BudgetError("give a budget: --budget-tasks N or --budget-usd X")
    if tasks is not None:
        try:
            n = int(tasks.strip())
        except ValueError:
            raise BudgetError(f"--budget-tasks {tasks!r} is not a whole number of tasks") from None
        if n <= 0:
            raise BudgetError(f"--budget-tasks must be at least 1 (got {n})")
        return Budget("tasks", float(n))
    try:
        x = float(usd.strip().lstrip("$"))
    except ValueError:
        raise BudgetError(f"--budget-usd {usd!r} is not a number of dollars") from None
    if not math.isfinite(x) or x <= 0:
        raise BudgetError(f"--budget-usd must be a positive, finite number of dollars (got {usd})")
    return Budget("usd", x)


def training_price(mean_attempt_usd: np.ndarray, group_size: int) -> np.ndarray:
    """Price of training on each task once: its group of rollouts."""
    price = np.asarray(mean_attempt_usd, dtype=np.float64) * group_size
    price[~np.isfinite(price) | (price < 0)] = 0.0
    return price


DRY_RUN_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def dry_run_levels(budget: Budget) -> list[Budget]:
    """The budget levels a dry run shows: a quarter of it up to four times it."""
    levels: list[Budget] = []
    for f in DRY_RUN_FACTORS:
        b = budget.scaled(f)
        if b not in levels:
            levels.append(b)
    return levels


def buyer_price(expert_usd: np.ndarray, training: np.ndarray) -> np.ndarray:
    """Each task's price to a buyer: its expert price plus its training
    price. An unknown (NaN) expert price counts as the pool's highest known
    one (0 when no task of the pool is priced): a vendor cannot make a task
    cheaper, and so chosen first, by leaving its price out."""
    expert = np.asarray(expert_usd, dtype=np.float64).copy()
    known = np.isfinite(expert) & (expert >= 0)
    expert[~known] = float(expert[known].max()) if known.any() else 0.0
    return expert + np.asarray(training, dtype=np.float64)
