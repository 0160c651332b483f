"""The analyst views in curation.duckdb, defined over the base tables
(runs, tasks, attempts, costs, drops, quarantine). Views, not tables: they
always agree with the rows they summarise, across every run in the file.

Shared definitions (docs/design.md):
- spend of a task = every cost row of that task: its expert cost plus the
  generation and verification of all its attempts;
- learnable = status 'learnable';
- cost per useful signal = spend of every task that entered the run
  (dropped ones included) / learnable tasks;
- a useful pair = one passing and one failing attempt of the same task (the
  contrast a group-relative trainer learns from); a learnable task with p
  passes out of n attempts gives p * (n - p) pairs.
"""

from __future__ import annotations

from tasksieve.schemas.records import STAGES

_STAGES_VALUES = ", ".join(f"('{s}', {i})" for i, s in enumerate(STAGES, 1))

# Per task: money by component. Keyed like tasks (run_id, source, task_id).
TASK_SPEND = """
CREATE OR REPLACE VIEW task_spend AS
SELECT run_id, source, task_id,
       sum(usd) AS usd,
       sum(usd) FILTER (WHERE component = 'expert') AS usd_expert,
       coalesce(sum(usd) FILTER (WHERE component = 'generation'), 0) AS usd_generation,
       coalesce(sum(usd) FILTER (WHERE component = 'verification'), 0) AS usd_verification,
       coalesce(sum(usd) FILTER (WHERE component = 'judge'), 0) AS usd_judge,
       bool_or(unit = 'unpriced') AS unpriced
FROM costs GROUP BY ALL
"""

# Tasks with their spend, model and the dimensions analysts slice by.
TASK_FACTS = """
CREATE OR REPLACE VIEW task_facts AS
SELECT t.run_id, r.model_id, t.source, t.batch_id, t.domain,
       coalesce(t.difficulty, CASE WHEN t.status = 'quarantined' THEN 'quarantined' ELSE 'unsampled' END) AS difficulty,
       t.task_id, t.status, t.drop_stage, t.drop_reason, t.n_attempts, t.n_pass, t.pass_rate,
       coalesce(s.usd, 0) AS usd, coalesce(s.usd_expert, 0) AS usd_expert, coalesce(s.usd_generation, 0) AS usd_generation,
       coalesce(s.usd_verification, 0) AS usd_verification, coalesce(s.usd_judge, 0) AS usd_judge,
       coalesce(s.unpriced, false) AS unpriced,
       CASE WHEN t.status = 'learnable' THEN t.n_pass * (t.n_attempts - t.n_pass) ELSE 0 END AS useful_pairs
FROM tasks t
JOIN runs r USING (run_id)
LEFT JOIN task_spend s ON s.run_id = t.run_id AND s.source = t.source AND s.task_id = t.task_id
                      AND t.status <> 'quarantined'
"""

# One row per (run, dimension, value): the same slices for yield and cost.
_SLICES = " UNION ALL ".join(
    f"SELECT *, '{dim}' AS dimension, coalesce({expr}, '(none)') AS value FROM task_facts"
    for dim, expr in [
        ("overall", "'all'"),
        ("source", "source"),
        ("batch", "batch_id"),
        ("domain", "domain"),
        ("difficulty", "difficulty"),
    ]
)

FUNNEL = f"""
CREATE OR REPLACE VIEW funnel AS
WITH stages(stage, stage_order) AS (VALUES {_STAGES_VALUES}),
runs_ AS (SELECT run_id, count(*) AS total FROM task_facts GROUP BY run_id),
removed AS (
  SELECT r.run_id, r.total, s.stage, s.stage_order,
         count(t.drop_stage) AS removed,
         count(t.drop_stage) FILTER (WHERE t.status = 'quarantined') AS quarantined,
         count(t.drop_stage) FILTER (WHERE t.status = 'dropped') AS dropped,
         count(t.drop_stage) FILTER (WHERE t.status IN ('all_pass', 'all_fail')) AS not_learnable,
         coalesce(sum(t.usd), 0) AS usd_removed
  FROM runs_ r CROSS JOIN stages s
  LEFT JOIN task_facts t ON t.run_id = r.run_id AND t.drop_stage = s.stage
  GROUP BY ALL
)
SELECT run_id, stage_order, stage,
       total - coalesce(sum(removed) OVER (PARTITION BY run_id ORDER BY stage_order
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS rows_in,
       removed, quarantined, dropped, not_learnable,
       total - sum(removed) OVER (PARTITION BY run_id ORDER BY stage_order) AS rows_out,
       usd_removed
FROM removed
ORDER BY run_id, stage_order
"""

YIELD = f"""
CREATE OR REPLACE VIEW yield AS
SELECT run_id, model_id, dimension, value,
       count(*) FILTER (WHERE status <> 'quarantined') AS tasks,
       count(*) FILTER (WHERE n_attempts > 0) AS sampled,
       count(*) FILTER (WHERE status = 'learnable') AS learnable,
       count(*) FILTER (WHERE status = 'all_pass') AS all_pass,
       count(*) FILTER (WHERE status = 'all_fail') AS all_fail,
       count(*) FILTER (WHERE status = 'learnable') / nullif(count(*) FILTER (WHERE status <> 'quarantined'), 0) AS learnable_share,
       count(*) FILTER (WHERE status = 'learnable') / nullif(count(*) FILTER (WHERE n_attempts > 0), 0) AS learnable_share_of_sampled
FROM ({_SLICES})
GROUP BY ALL
ORDER BY run_id, dimension, value
"""

COST_PER_USEFUL_SIGNAL = f"""
CREATE OR REPLACE VIEW cost_per_useful_signal AS
SELECT run_id, model_id, dimension, value,
       sum(usd) AS spend_usd,
       sum(usd_expert) AS expert_usd,
       sum(usd_generation) + sum(usd_verification) + sum(usd_judge) AS sampling_usd,
       count(*) FILTER (WHERE status = 'learnable') AS learnable,
       sum(usd) / nullif(count(*) FILTER (WHERE status = 'learnable'), 0) AS usd_per_learnable,
       sum(useful_pairs) AS useful_pairs,
       sum(usd) / nullif(sum(useful_pairs), 0) AS usd_per_useful_pair,
       count(*) FILTER (WHERE unpriced) AS unpriced_tasks
FROM ({_SLICES})
GROUP BY ALL
ORDER BY run_id, dimension, value
"""

WASTE = """
CREATE OR REPLACE VIEW waste AS
SELECT run_id, drop_stage AS stage, drop_reason AS reason, status,
       count(*) AS tasks, sum(usd) AS usd, sum(usd_expert) AS expert_usd,
       sum(usd_generation) + sum(usd_verification) + sum(usd_judge) AS sampling_usd
FROM task_facts
WHERE status <> 'learnable'
GROUP BY ALL
ORDER BY run_id, usd DESC, tasks DESC
"""

PASS_RATE_HIST = """
CREATE OR REPLACE VIEW pass_rate_hist AS
WITH bins AS (SELECT range AS bin FROM range(10))
SELECT r.run_id, b.bin / 10.0 AS bin_lo, (b.bin + 1) / 10.0 AS bin_hi,
       count(t.task_id) AS tasks,
       count(t.task_id) FILTER (WHERE t.status = 'learnable') AS learnable
FROM (SELECT DISTINCT run_id FROM tasks) r CROSS JOIN bins b
LEFT JOIN tasks t ON t.run_id = r.run_id AND t.n_attempts > 0
                 AND least(floor(t.pass_rate * 10), 9) = b.bin
GROUP BY r.run_id, b.bin
ORDER BY r.run_id, bin_lo
"""

ATTEMPTS_SAVED = """
CREATE OR REPLACE VIEW attempts_saved AS
SELECT r.run_id, r.model_id, r.sampling_mode, r.k,
       count(*) FILTER (WHERE t.n_attempts > 0) AS sampled_tasks,
       coalesce(sum(t.n_attempts), 0) AS attempts_used,
       count(*) FILTER (WHERE t.n_attempts > 0) * r.k AS attempts_fixed_k,
       count(*) FILTER (WHERE t.n_attempts > 0) * r.k - coalesce(sum(t.n_attempts), 0) AS attempts_saved,
       1 - coalesce(sum(t.n_attempts), 0) / nullif(count(*) FILTER (WHERE t.n_attempts > 0) * r.k, 0) AS saved_share
FROM runs r LEFT JOIN tasks t USING (run_id)
GROUP BY r.run_id, r.model_id, r.sampling_mode, r.k
ORDER BY r.run_id
"""

# A task across runs and model versions: the same content_hash in every run
# that sampled it, in time order, with where its attempts came from. Shows a
# task moving from learnable to all_pass as models improve.
TASK_HISTORY = """
CREATE OR REPLACE VIEW task_history AS
SELECT t.content_hash, t.source, t.task_id, r.started_at, t.run_id, r.model_id, r.sampling_mode, t.status,
       t.n_attempts, t.n_pass, t.pass_rate,
       lag(t.status) OVER (PARTITION BY t.content_hash ORDER BY r.started_at, t.run_id) AS previous_status,
       coalesce(a.reused, 0) AS attempts_reused
FROM tasks t
JOIN runs r USING (run_id)
LEFT JOIN (SELECT run_id, content_hash, count(*) FILTER (WHERE reused_from_run IS NOT NULL) AS reused
           FROM attempts GROUP BY ALL) a ON a.run_id = t.run_id AND a.content_hash = t.content_hash
WHERE t.n_attempts > 0
"""

ALL_VIEWS = [
    TASK_SPEND,
    TASK_FACTS,
    FUNNEL,
    YIELD,
    COST_PER_USEFUL_SIGNAL,
    WASTE,
    PASS_RATE_HIST,
    ATTEMPTS_SAVED,
    TASK_HISTORY,
]


def create_views(con) -> None:
    for sql in ALL_VIEWS:
        con.execute(sql)
