"""`tasksieve validate`: a vendor's delivery judged against an acceptance
profile (command.py), with the vendor checks (delivery_checks.py, and
rubric_checks.py for rubric tasks) and the report it writes (report.py).
Its duplicate and contamination checks call the same rules as `run`
(transforms/dedup/near_rule.py, transforms/decontam/): never restate them.
"""
