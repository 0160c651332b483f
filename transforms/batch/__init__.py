"""The batch engine: read..decontaminate on chunks of tasks, not rows, owned
by `batch_cheap_stages` (stages.py). Candidates (candidates.py), edge
shards (near.py) and clusters (clusters.py) of near dedup, exact dedup and
shards (dedup.py, shards.py, sketch.py), decontamination (decontam.py),
chunks and spill (chunks.py). It decides exactly as the stage functions
in dedup/ and decontam/ do: the rules are theirs, never copied here
(tests/batch/test_batch_decisions.py compares its decisions with theirs,
chained in tests/plain_stages.py; test_batch_dedup.py its units).
"""
