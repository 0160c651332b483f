"""The greedy choice: value minus redundancy, under a budget and caps.

Objective: max-marginal-relevance (MMR). Each step takes the candidate with
the highest marginal value

    marginal = value * (1 - lambda * max(0, cos(task, nearest chosen task)))

(per dollar of its price under a dollar budget) among those the budget and
the caps still allow. A task unlike anything chosen adds its whole value;
with the default lambda = 0.5 a task of a topic already chosen (cosine
~0.9) adds about half of it, so a new topic's task wins unless its own
value is under half, and a copy (cosine 1) never adds more than half
(lambda = 1: nothing). Why MMR
and not facility location: our unit is training signal, and MMR keeps it
the unit (the redundancy is a discount on a task's own value, so
`marginal` is in the same p(1-p) units the analyst reads, and the sum of
values of the selection is what the comparison with random subsets
measures); facility location rewards covering the pool's *density*,
which would buy low-signal tasks for being typical, and needs the pool's
full similarity matrix (40,000 tasks: 6 GB) where MMR keeps one vector of
running maxima (O(n) memory, O(n d) per pick). docs/selection.md.

Ties go to the lower row; the caller orders rows by task_id, so the same
pool gives the same selection every time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tasksieve.transforms.select.budget import Budget


@dataclass(frozen=True)
class Caps:
    """Shares of the budget one cluster, source or domain may take."""

    cluster: float = 0.5
    source: float = 1.0
    domain: float = 1.0


@dataclass
class Candidates:
    """One row per candidate task, in a fixed order (by task_id)."""

    task_id: list[str]
    value: np.ndarray
    price: np.ndarray
    cluster: np.ndarray
    source: list[str]
    domain: list[str]
    vecs: np.ndarray | None = None  # unit rows; None = no redundancy term

    def __len__(self) -> int:
        return len(self.task_id)


@dataclass
class Choice:
    """What `choose` decided: per row its rank (0 = not chosen), marginal
    value at the moment it was taken (or at the end, if not), the chosen
    task it most resembles, and the reason in words."""

    rank: np.ndarray
    marginal: np.ndarray
    nearest: np.ndarray
    similarity: np.ndarray
    reason: list[str]
    spent: float = 0.0
    order: list[int] = field(default_factory=list)


class _Groups:
    """Running use of the budget by cluster, source and domain, with caps."""

    def __init__(self, cand: Candidates, budget: Budget, caps: Caps):
        self.dims = []
        for name, keys, share in (
            ("cluster", [str(c) for c in cand.cluster.tolist()], caps.cluster),
            ("source", cand.source, caps.source),
            ("domain", cand.domain, caps.domain),
        ):
            labels, codes = np.unique(np.array(keys, dtype=object).astype(str), return_inverse=True)
            self.dims.append((name, labels, codes, np.zeros(len(labels)), budget.cap(share)))

    def allows(self, spend: np.ndarray) -> np.ndarray:
        ok = np.ones(spend.shape[0], dtype=bool)
        for _, _, codes, used, cap in self.dims:
            ok &= used[codes] + spend <= cap
        return ok

    def take(self, row: int, amount: float) -> None:
        for _, _, codes, used, _ in self.dims:
            used[codes[row]] += amount

    def blocking(self, row: int, amount: float, budget: Budget) -> str | None:
        for name, labels, codes, used, cap in self.dims:
            if used[codes[row]] + amount > cap:
                return f"{name} {labels[codes[row]]} is at its cap ({budget.text(cap)})"
        return None


def _scores(cand: Candidates, budget: Budget, max_sim: np.ndarray, weight: float) -> tuple[np.ndarray, np.ndarray]:
    marginal = cand.value * (1.0 - weight * np.clip(max_sim, 0.0, 1.0))
    if budget.kind == "tasks":
        return marginal, marginal
    return marginal, marginal / np.maximum(cand.price, 1e-12)  # a free task comes first


def choose(cand: Candidates, budget: Budget, caps: Caps = Caps(), redundancy: float = 0.5) -> Choice:
    n = len(cand)
    spend = budget.spend_of(cand.price)
    groups = _Groups(cand, budget, caps)
    out = Choice(
        rank=np.zeros(n, dtype=np.int64),
        marginal=np.zeros(n),
        nearest=np.full(n, -1),
        similarity=np.zeros(n),
        reason=[""] * n,
    )
    max_sim = np.zeros(n)
    chosen = np.zeros(n, dtype=bool)
    while True:
        eligible = ~chosen & (out.spent + spend <= budget.amount) & groups.allows(spend)
        if not eligible.any():
            break
        marginal, score = _scores(cand, budget, max_sim, redundancy)
        j = int(np.argmax(np.where(eligible, score, -np.inf)))  # first maximum: the lower task_id
        chosen[j] = True
        out.order.append(j)
        out.rank[j] = len(out.order)
        out.marginal[j], out.similarity[j] = marginal[j], max_sim[j]
        out.reason[j] = _why_chosen(cand, out, j, score[j], budget)
        out.spent += float(spend[j])
        groups.take(j, float(spend[j]))
        if cand.vecs is not None:
            sims = cand.vecs @ cand.vecs[j]
            closer = ~chosen & (sims > max_sim)
            max_sim[closer], out.nearest[closer] = sims[closer], j
    marginal, _ = _scores(cand, budget, max_sim, redundancy)
    for i in np.nonzero(~chosen)[0].tolist():
        out.marginal[i], out.similarity[i] = marginal[i], max_sim[i]
        out.reason[i] = _why_not(cand, out, groups, i, float(spend[i]), budget)
    return out


def _why_chosen(cand: Candidates, out: Choice, j: int, score: float, budget: Budget) -> str:
    per = f", {score:.4g} per dollar" if budget.kind == "usd" else ""
    c = int(cand.cluster[j])
    same = [r for r in out.order[:-1] if int(cand.cluster[r]) == c]
    if not same:
        return f"first of cluster {c}: marginal value {out.marginal[j]:.4f}{per}, the highest left"
    k = int(out.nearest[j])
    like = f" (value {cand.value[j]:.4f}, {out.similarity[j]:.2f} alike to {cand.task_id[k]})" if k >= 0 else ""
    return f"marginal value {out.marginal[j]:.4f}{like}{per}, the highest left; cluster {c} now holds {len(same) + 1}"


def _why_not(cand: Candidates, out: Choice, groups: _Groups, i: int, spend: float, budget: Budget) -> str:
    blocked = groups.blocking(i, spend, budget)
    if blocked:
        return f"not chosen: {blocked}"
    if out.spent + spend > budget.amount and budget.kind == "usd":
        return f"not chosen: costs ${cand.price[i]:,.4f}, more than the ${budget.amount - out.spent:,.4f} left"
    return f"not chosen: the budget was spent first (its marginal value at the end: {out.marginal[i]:.4f})"
