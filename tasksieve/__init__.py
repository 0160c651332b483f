"""tasksieve: curate learnable RL post-training tasks.

The code lives in the repository's top-level `schemas/`, `transforms/` and
`pipeline/` folders; `tasksieve/schemas`, `tasksieve/transforms` and
`tasksieve/pipeline` are committed symlinks to them, so `tasksieve.*` is an
ordinary package that setuptools discovers and tools can follow.
"""

__version__ = "0.1.0"
