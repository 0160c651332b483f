"""Dedup's rules, Beam-free: exact dedup (exact.py), MinHash (minhash.py,
signatures.py, kernels.py), the near-duplicate rule and its bounds
(near_rule.py: its only home), judging candidate edges (near_judge.py),
deciding a cluster (near_decide.py), sentence-set candidates (sentences.py),
the number guard (number_guard.py), semantic candidates (semantic.py),
reference-pool indexes (pool_index.py), and the near stage's function
(near.py). The batch engine (transforms/batch/) calls these and is tested
against them (tests/batch/): keep decisions identical.
"""
