"""The rubric judge: a fenced prompt (prompt.py), calibration labels
(labels.py), agreement and kappa (agreement.py), probes (probes.py), the
gate before sampling (gate.py) and its records (store.py). Design:
docs/verification.md, "The rubric judge"."""
