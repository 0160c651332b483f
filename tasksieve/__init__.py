"""tasksieve: curate learnable RL post-training tasks.

The code lives in the repository's top-level `schemas/`, `transforms/` and
`pipeline/` folders (see DESIGN.md); pyproject.toml installs them as
`tasksieve.schemas`, `tasksieve.transforms` and `tasksieve.pipeline`.
"""

__version__ = "0.1.0"
