"""Whether two tasks are the same problem: quantities and answers
(quantities.py), sentence embeddings (embed.py) and the relations and
thresholds (rules.py), shared by near dedup, decontamination and
`validate`. Beam-free.
"""
