"""`tasksieve export`: the learnable set (or a `select` selection) written in
the input format of an RL trainer (verl, TRL, OpenRLHF) or as a Hugging Face
`datasets` folder, every row carrying its provenance and what its reward
needs (`tasksieve.rewards` scores it with the verifiers curation used).

`rows.py` reads what to export, `formats.py` turns a row into each format
(Beam-free, no I/O), `command.py` is the CLI glue: the lock, the licence
filter, writing the folder whole or not at all.
"""
