"""`tasksieve report`: the run report read from the views in curation.duckdb
(command.py), with the judge's section (judge.py) and the selection's
(selection.py). Every figure is read from the views, never recomputed.
"""
