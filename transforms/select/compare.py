"""How good a selection is, and where to buy next.

- Against chance: the mean over `draws` random subsets of the pool of the
  same size (fixed seed) of their summed value and price. The selection
  should hold much more signal than a random subset, for its money.
- Where to buy next: per cluster, its tasks' mean value, how much of it the
  selection took, and what more tasks like them would cost experts (the
  pool's own expert cost per task in that cluster). A cluster the
  selection exhausted (took at least half of) with a high value is where
  commissioning more tasks buys the most signal: ranked by mean value per
  expert dollar, or by mean value where experts' costs are unknown.
"""

from __future__ import annotations

import numpy as np


def random_baseline(
    value: np.ndarray, price: np.ndarray, size: int, draws: int = 200, seed: int = 0
) -> dict[str, float]:
    """Mean summed value and price of `draws` random subsets of `size` rows."""
    n = value.shape[0]
    if size <= 0 or n == 0:
        return {"value": 0.0, "usd": 0.0}
    size = min(size, n)
    rng = np.random.default_rng(seed)
    vals, usds = [], []
    for _ in range(draws):
        rows = rng.choice(n, size=size, replace=False)
        vals.append(float(value[rows].sum()))
        usds.append(float(price[rows].sum()))
    return {"value": float(np.mean(vals)), "usd": float(np.mean(usds))}


def per_dollar(value: float, usd: float) -> float | None:
    return value / usd if usd > 0 else None


def cluster_table(cluster: np.ndarray, value: np.ndarray, chosen: np.ndarray, expert_usd: np.ndarray) -> list[dict]:
    """One row per cluster: size, chosen, mean value, expert cost per task
    (NaN costs = unknown), and `buy_next_rank` (1 = buy here first; None for
    clusters the selection did not exhaust)."""
    rows = []
    for c in np.unique(cluster).tolist():
        m = cluster == c
        known = expert_usd[m][np.isfinite(expert_usd[m])]
        cost = float(known.mean()) if known.size else None
        mean_value = float(value[m].mean())
        rows.append(
            {
                "cluster": int(c),
                "tasks": int(m.sum()),
                "selected": int(chosen[m].sum()),
                "mean_value": mean_value,
                "selected_value": float(value[m & chosen].sum()),
                "expert_usd_per_task": cost,
                "signal_per_expert_usd": mean_value / cost if cost else None,
            }
        )
    scarce = [r for r in rows if r["selected"] * 2 >= r["tasks"] and r["selected"] > 0]
    # Per expert dollar where priced; unpriced clusters after, by value; ties by cluster id.
    scarce.sort(
        key=lambda r: (
            r["signal_per_expert_usd"] is None,
            -(r["signal_per_expert_usd"] or r["mean_value"]),
            r["cluster"],
        )
    )
    for rank, r in enumerate(scarce, 1):
        r["buy_next_rank"] = rank
    for r in rows:
        r.setdefault("buy_next_rank", None)
    return rows
