"""Dedup's rules, Beam-free: exact dedup (exact.py), MinHash (minhash.py,
signatures.py, kernels.py), the near-duplicate rule and its bounds
(near_rule.py: its only home), judging candidate edges (near_judge.py),
the number guard (number_guard.py), semantic candidates (semantic.py),
reference-pool indexes (pool_index.py), and the row stage (near.py). The
batch engine (transforms/batch/) calls these; keep decisions identical.
"""
