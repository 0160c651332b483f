"""Decontamination against benchmarks: the benchmark index (index.py,
benchmarks.py) and the stage's rule for one task (stage.py). Config is mapped to the
index once (index.index_spec); the batch engine uses the same index.
"""
