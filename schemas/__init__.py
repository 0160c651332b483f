"""The contracts: config (config.py), Arrow row schemas (records.py, rows.py),
rates, acceptance profiles, and the small checks a config needs when it
is read (base_url.py, value_formula.py, regular_file.py). The bottom
layer: nothing here imports transforms/ or pipeline/
(tests/test_structure.py enforces it).
"""
