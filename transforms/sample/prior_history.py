"""What the `predicted` rule learns from, and when: earlier runs' results in
curation.duckdb, then every task this worker has decided, batch by batch.
Beam-free; one `OnlinePredictor` per sampling worker.

A batch is predicted from what was decided before it, never from its own
attempts: its stop points are fixed before its first wave (predicted.py).
"""

from __future__ import annotations

import sys

from tasksieve.transforms.sample.difficulty import DifficultyModel, mean
from tasksieve.transforms.sample.predicted import price_for, stop_points

# Most earlier-run tasks read as history (the most recent first).
MAX_HISTORY = 200_000
_FIELDS = ("prompt", "domain", "source", "batch_id", "answer")


def earlier_runs(db_path: str | None, run_id: str, limit: int = MAX_HISTORY) -> tuple[list[dict], list[int], list[int]]:
    """(tasks, passes, attempts) of sampled tasks in earlier runs; empty when
    there is no such file or it cannot be read (one warning line)."""
    from pathlib import Path

    if not db_path or not Path(db_path).is_file():
        return [], [], []
    import duckdb

    try:
        con = duckdb.connect(db_path, read_only=True)
        try:
            rows = con.execute(
                f"SELECT {', '.join(_FIELDS)}, n_pass, n_attempts FROM tasks t JOIN runs r USING (run_id) "
                "WHERE t.run_id <> ? AND t.n_attempts > 0 AND t.n_pass IS NOT NULL "
                "ORDER BY r.started_at DESC LIMIT ?",
                [run_id, limit],
            ).fetchall()
        finally:
            con.close()
    except Exception as e:  # a locked or older file: predict without it
        print(
            f"tasksieve: warning: earlier runs in {db_path} not read for difficulty predictions "
            f"({type(e).__name__}: {str(e)[:200]})",
            file=sys.stderr,
        )
        return [], [], []
    tasks = [dict(zip(_FIELDS, r[:5])) for r in rows]
    return tasks, [int(r[5]) for r in rows], [int(r[6]) for r in rows]


class OnlinePredictor:
    def __init__(
        self,
        k: int,
        keep_signal: float,
        prior_a: float = 0.1,
        prior_b: float = 0.1,
        history: tuple[list, list, list] = ((), (), ()),
    ):
        self.k, self.keep_signal = k, keep_signal
        self.model = DifficultyModel(prior_a=prior_a, prior_b=prior_b)
        self.tasks, self.passes, self.attempts = (list(x) for x in history)
        self._fitted_on = 0

    def plan(self, tasks: list[dict]) -> list[tuple[tuple[int, int], float]]:
        """((a, b) stop points, predicted pass rate) per task, from the history so far."""
        if not tasks:
            return []
        # Refit once the history grew by a tenth (every batch while it is
        # small): a pool of N tasks costs O(N log N) fitting, not O(N^2).
        if len(self.tasks) > self._fitted_on and len(self.tasks) >= 1.1 * self._fitted_on:
            self.model.fit(self.tasks, self.passes, self.attempts)
            self._fitted_on = len(self.tasks)
        priors = self.model.priors(tasks)
        a, b = stop_points(priors, self.k, price_for(priors, self.k, self.keep_signal))
        return [((int(x), int(y)), float(m)) for x, y, m in zip(a, b, mean(priors))]

    def observe(self, task: dict, n_pass: int, n_attempts: int) -> None:
        if n_attempts > 0:
            self.tasks.append({f: task.get(f) for f in _FIELDS})
            self.passes.append(int(n_pass))
            self.attempts.append(int(n_attempts))
            if len(self.tasks) > MAX_HISTORY * 1.1:  # bounded memory: the oldest tenth goes
                cut = len(self.tasks) - MAX_HISTORY
                del self.tasks[:cut], self.passes[:cut], self.attempts[:cut]
                self._fitted_on = min(self._fitted_on, len(self.tasks) - 1)


def predictor_for(plan) -> OnlinePredictor:
    """The worker's predictor for a SamplePlan in mode `predicted`."""
    s = plan.sampling
    history = earlier_runs(plan.history_db, plan.run_id) if s.predicted.history else ([], [], [])
    return OnlinePredictor(s.k, s.predicted.keep_signal, s.bayes.prior_a, s.bayes.prior_b, history)
