"""A task's pass rate, estimated before its first attempt. Beam-free.

What is known before sampling: the task's text, domain, source (the vendor),
delivery batch and answer shape, and what earlier runs saw: the same task or
its near neighbours, with how many of how many attempts passed (an older
model's results in `curation.duckdb`, or tasks already decided earlier in
this run). The estimate is a distribution over the pass rate p on a grid
(`GRID`), the prior the `predicted` stopping rule (predicted.py) starts from.

How (`DifficultyModel`):
- every task becomes a sparse vector: hashed word unigrams and bigrams of
  its prompt (numbers folded to `#`), plus `domain=`, `source=`, `batch=`
  and `shape=` tokens, tf-idf weighted and unit length (or, if the caller
  has them, dense sentence embeddings: `vectors=`);
- the pool-wide distribution of p (`global_prior`) is fitted to the
  history by EM on the grid, from the configured Beta(prior_a, prior_b);
- a task's prior is its nearest history neighbours' posteriors over p,
  weighted by cosine similarity^`power`, shrunk towards the pool-wide
  distribution with `shrink` pseudo-neighbours of weight 1.

Honesty: a task's own outcomes in this run never enter its prior. The
history holds only earlier runs and tasks decided before this one was
predicted (the sampling stage predicts batch by batch). With no history the
prior is the configured Beta: nothing is known, nothing is claimed.
`predicted_pass_rate` is the prior's mean; `calibration` scores it against
the realised pass rates (Brier score, reliability bins) for the report.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass, field

import numpy as np

GRID = np.linspace(0.0, 1.0, 51)
DIM = 1 << 18
_WORD = re.compile(r"[a-z]+|\d+(?:[.,/]\d+)*|[^\sa-z\d]")


def beta_on_grid(a: float, b: float, grid: np.ndarray = GRID) -> np.ndarray:
    """Beta(a, b) as weights on the grid: each point gets the mass of its cell."""
    from scipy.special import betainc

    edges = np.concatenate([[0.0], (grid[1:] + grid[:-1]) / 2, [1.0]])
    w = np.diff(betainc(a, b, edges))
    return w / w.sum()


def likelihood(n_pass: int, n: int, grid: np.ndarray = GRID) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return grid**n_pass * (1.0 - grid) ** (n - n_pass)


def posterior(prior: np.ndarray, n_pass: int, n: int) -> np.ndarray:
    w = prior * likelihood(n_pass, n)
    s = w.sum()
    return w / s if s > 0 else prior


def answer_shape(task: dict) -> str:
    """A coarse shape of the reference answer: int, decimal, fraction, expr, text, code, rubric, none."""
    if task.get("domain") == "code":
        return "code"
    if task.get("domain") == "rubric":
        return "rubric"
    ans = (task.get("answer") or "").strip()
    if not ans:
        return "none"
    if re.fullmatch(r"-?\d+", ans):
        return "int"
    if re.fullmatch(r"-?\d*\.\d+", ans):
        return "decimal"
    if re.fullmatch(r"-?\d+\s*/\s*\d+|\\d?frac\{.*\}\{.*\}", ans):
        return "fraction"
    if re.search(r"[\\^=+*()]|\d[a-z]|sqrt|pi", ans):
        return "expr"
    return "text"


def task_tokens(task: dict) -> list[str]:
    words = ["#" if w[0].isdigit() else w for w in _WORD.findall((task.get("prompt") or "").lower()[:4000])]
    toks = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
    for key in ("domain", "source", "batch_id"):
        if task.get(key):
            toks += [f"{key}={task[key]}"] * 3
    toks += [f"shape={answer_shape(task)}"] * 3
    return toks


def _counts(task: dict) -> tuple[list[int], list[float]]:
    counts: dict[int, int] = {}
    for t in task_tokens(task):
        h = zlib.crc32(t.encode()) & (DIM - 1)
        counts[h] = counts.get(h, 0) + 1
    return list(counts), [1.0 + math.log(c) for c in counts.values()]


def _hashed(tasks: list[dict], memo: dict | None = None):
    """Sparse hashed term vectors (sublinear tf), one row per task."""
    from scipy.sparse import csr_matrix

    rows, cols, vals = [], [], []
    for i, task in enumerate(tasks):
        key = tuple(task.get(f) for f in ("prompt", "domain", "source", "batch_id", "answer"))
        got = memo.get(key) if memo is not None else None
        if got is None:
            got = _counts(task)
            if memo is not None and len(memo) < 500_000:
                memo[key] = got
        rows += [i] * len(got[0])
        cols += got[0]
        vals += got[1]
    return csr_matrix((vals, (rows, cols)), shape=(len(tasks), DIM))


def _unit_rows(m):
    from scipy.sparse import diags, issparse

    if issparse(m):
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        return diags(1.0 / np.maximum(norms, 1e-12)) @ m
    m = np.asarray(m, dtype=np.float64)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


@dataclass
class DifficultyModel:
    prior_a: float = 0.1
    prior_b: float = 0.1
    neighbours: int = 100
    min_similarity: float = 0.3
    power: float = 4.0
    shrink: float = 1.0
    em_iterations: int = 30
    local_iterations: int = 3
    # Fitted state.
    _global: np.ndarray | None = field(default=None, repr=False)
    _hist: object = field(default=None, repr=False)
    _lik: np.ndarray | None = field(default=None, repr=False)
    _idf: np.ndarray | None = field(default=None, repr=False)
    _dense: bool = field(default=False, repr=False)
    _memo: dict = field(default_factory=dict, repr=False)  # hashed vectors of tasks seen, by text

    @property
    def base(self) -> np.ndarray:
        return beta_on_grid(self.prior_a, self.prior_b)

    @property
    def fitted(self) -> bool:
        return self._hist is not None

    def global_prior(self) -> np.ndarray:
        return self.base if self._global is None else self._global

    def fit(
        self, tasks: list[dict], n_pass: list[int], n_attempts: list[int], vectors: np.ndarray | None = None
    ) -> "DifficultyModel":
        """History: tasks whose attempts were seen (earlier runs, earlier batches)."""
        keep = [i for i, n in enumerate(n_attempts) if n and n > 0]
        if not keep:
            self._global = self._hist = self._lik = self._idf = None
            return self
        lik = np.stack([likelihood(n_pass[i], n_attempts[i]) for i in keep])
        g, base = self.base, self.base
        for _ in range(self.em_iterations):
            post = lik * g
            post /= np.maximum(post.sum(axis=1, keepdims=True), 1e-300)
            g = (post.sum(axis=0) + base) / (len(keep) + 1)
        self._lik = lik
        self._global = g
        self._dense = vectors is not None
        if self._dense:
            self._hist = _unit_rows(np.asarray(vectors)[keep])
        else:
            m = _hashed([tasks[i] for i in keep], self._memo)
            df = np.bincount(m.indices, minlength=DIM)
            self._idf = np.log((1 + m.shape[0]) / (1 + df)) + 1.0
            self._hist = _unit_rows(m.multiply(self._idf).tocsr())
        return self

    def priors(self, tasks: list[dict], vectors: np.ndarray | None = None) -> np.ndarray:
        """One prior (weights on GRID) per task, from the history only."""
        g = self.global_prior()
        out = np.tile(g, (len(tasks), 1))
        if not self.fitted or not tasks:
            return out
        if self._dense and vectors is None:
            return out
        q = _unit_rows(vectors) if self._dense else _unit_rows(_hashed(tasks, self._memo).multiply(self._idf).tocsr())
        m = min(self.neighbours, self._hist.shape[0])
        for lo in range(0, len(tasks), 512):  # bounded memory: a block of queries at a time
            sims = q[lo : lo + 512] @ self._hist.T
            sims = np.asarray(sims.toarray() if hasattr(sims, "toarray") else sims)
            idx = np.argpartition(-sims, m - 1, axis=1)[:, :m]
            near = np.take_along_axis(sims, idx, axis=1)
            w = np.where(near >= self.min_similarity, np.clip(near, 0, 1) ** self.power, 0.0)  # B x m
            lik = self._lik[idx]  # B x m x G
            pi = np.tile(g, (len(idx), 1))
            # The neighbourhood's own mix of pass rates (EM on the grid, from
            # the pool-wide one): what its tasks' attempts say together.
            for _ in range(self.local_iterations):
                post = lik * pi[:, None, :]
                post /= np.maximum(post.sum(axis=2, keepdims=True), 1e-300)
                pi = (np.einsum("bm,bmg->bg", w, post) + self.shrink * g) / (w.sum(axis=1, keepdims=True) + self.shrink)
            out[lo : lo + len(idx)] = pi
        return out


def mean(prior: np.ndarray) -> np.ndarray:
    return np.asarray(prior) @ GRID


def calibration(predicted: list[float], realised: list[float], bins: int = 10) -> dict:
    """Brier score of predicted vs realised pass rates (and that of the
    constant mean prediction, the no-skill baseline) and reliability bins."""
    p = np.asarray(predicted, dtype=float)
    r = np.asarray(realised, dtype=float)
    ok = ~(np.isnan(p) | np.isnan(r))
    p, r = p[ok], r[ok]
    if not len(p):
        return {"n": 0, "brier": None, "brier_constant": None, "bins": []}
    which = np.minimum((p * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        sel = which == b
        if sel.any():
            rows.append(
                {
                    "bin_lo": b / bins,
                    "bin_hi": (b + 1) / bins,
                    "n": int(sel.sum()),
                    "predicted": float(p[sel].mean()),
                    "realised": float(r[sel].mean()),
                }
            )
    return {
        "n": int(len(p)),
        "brier": float(np.mean((p - r) ** 2)),
        "brier_constant": float(np.mean((r.mean() - r) ** 2)),
        "bins": rows,
    }
