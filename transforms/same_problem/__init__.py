"""Whether two tasks are the same problem: quantities and answers
(quantities.py), sentence embeddings (embed.py), the rules and
thresholds (rules.py), the relations between two tasks (relation.py) and
the template a task fills (template.py), names and the asked question
(asked.py), shared by near dedup, decontamination and
`validate`. Beam-free.
"""
