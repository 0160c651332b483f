"""tasksieve: curate learnable RL post-training tasks.

The code lives in the repository's top-level `schemas/`, `transforms/` and
`pipeline/` folders; `tasksieve/schemas`, `tasksieve/transforms` and
`tasksieve/pipeline` are committed symlinks to them, so `tasksieve.*` is an
ordinary package that setuptools discovers and tools can follow.
"""

__version__ = "0.1.0"

# Beam logs a warning a user cannot act on when it is imported (no Google
# apitools); dropped from that one import only (transforms/console.py).
from tasksieve.transforms.console import quiet_beam_import as _quiet_beam_import  # noqa: E402

_quiet_beam_import()
