"""Setting up: the default model (models.py, `tasksieve prepare-model`) and
the bundled sample deliveries (sample_data.py, sample_mixed.py:
`tasksieve sample-data`). The sample is deterministic: tests and the
README's demo output depend on it byte for byte.
"""
