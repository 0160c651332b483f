"""What an input source is and whether it may be read, before any row is:
which paths are deliveries (inputs.py), the reading budget a file's size
allows and the check of what it declares (guard.py), the Parquet and
`datasets` readers that validate every batch before using it (tables.py),
and the limits on one parsed row (values.py). transforms/read.py, the
`read` stage, uses all four; nothing here imports the stage.
"""
