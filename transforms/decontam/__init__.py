"""Decontamination against benchmarks: the benchmark index (index.py,
benchmarks.py) and the row stage (stage.py). Config is mapped to the
index once (index.index_spec); the batch engine uses the same index.
"""
