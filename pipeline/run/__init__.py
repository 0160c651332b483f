"""`tasksieve run` and `tasksieve dedup`: pre-flight checks (preflight.py,
folders.py, errors.py), the Beam graph (graph.py) run on the chosen runner
(execute.py), and the finish that loads the output tables (finish.py);
command.py ties them together. Keep every check before the first paid
attempt, and every failure one line with its exit code (pipeline/cli.py).
"""
