"""Choosing a training set out of a learnable pool (`tasksieve select`).

Beam-free and database-free: plain numpy over one row per candidate task,
so the tests drive every rule directly. The modules, in the order the
command uses them:

- `value.py`    expected training signal of a task: p(1-p) of its pass rate
                shrunk toward the pool's prior (or the analyst's formula)
- `budget.py`   a budget in tasks or dollars, a task's price, the caps
- `clusters.py` prompt embeddings (the dedup stages' model), k-means,
                representative prompts
- `choose.py`   the greedy max-marginal-relevance choice under budget and caps
- `compare.py`  the selection against random subsets of the same size, and
                where to buy next
"""
