"""A quiet console: tasksieve's own lines and progress, not the warnings of
the libraries under it, which a user cannot act on.

Each known warning is filtered where it comes from, and nothing else is:
a named logger's level, a `warnings` filter on one category, message and
emitting module, an environment variable the library reads for its own
console output, one module's import. A user's own warnings, and any other
warning of these libraries, still show. `tasksieve --verbose` (or
TASKSIEVE_VERBOSE=1, which worker processes inherit) turns every filter
here off.

The warnings, as a demo run printed them (`tasksieve sample-data`, then
`tasksieve run` on it):
- Beam, when `apache_beam` is imported without Google's apitools (any
  tasksieve module that imports Beam, CLI or not): "apitools not found,
  and bigquery client libraries are not available ..." on the root logger,
  which also configures the root logger if nothing had (`logging.warning`);
- torch, from vLLM's engine start: a FutureWarning "`torch.distributed.
  reduce_op` is deprecated" (twice, attributed to vLLM's
  triton_utils/dispatcher.py, which reads every loaded module's
  attributes), "Triton not available" (logger `torch._library.triton`),
  and c10's C++ line "NUMA binding: Using MEMBIND policy ..." (vLLM's CPU
  worker), which only TORCH_CPP_LOG_LEVEL, read when torch loads, silences;
- vLLM's "Loading safetensors checkpoint shards" bar, and `datasets`'
  "Saving the dataset" bar (`tasksieve sample-data`).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import logging
import os
import sys
import warnings

VERBOSE_ENV = "TASKSIEVE_VERBOSE"
# Beam's package that logs the apitools warning when it is imported.
BEAM_BIGQUERY_CLIENTS = "apache_beam.io.gcp.internal.clients.bigquery"
APITOOLS_WARNING = "apitools not found"


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


def set_verbose(on: bool) -> None:
    """`--verbose`: in the environment, so worker processes see it too."""
    if on:
        os.environ[VERBOSE_ENV] = "1"


def quiet_program_env() -> None:
    """For the `tasksieve` program only (it runs no user code), before
    anything imports torch or datasets: both read these once, at import.
    A value the user set is kept."""
    if verbose():
        return
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10's C++ warnings: vLLM's NUMA binding line
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # datasets' "Saving the dataset" bars


def quiet_engine_start() -> None:
    """At vLLM's engine start (after torch is imported, before the engine
    loads): torch's warnings that vLLM's start-up triggers."""
    if verbose():
        return
    warnings.filterwarnings(
        "ignore",
        category=FutureWarning,
        message=r"`torch\.distributed\.reduce_op` is deprecated",
        module=r"vllm\.triton_utils\.dispatcher",
    )
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)


class _DropRootRecord(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return not (record.name == "root" and str(record.msg).startswith(self.prefix))
        except Exception:
            return True


@contextlib.contextmanager
def _root_record_dropped(prefix: str):
    """While the block runs: the root logger drops records starting with
    `prefix`, and has a handler, so `logging.warning` does not configure
    it (basicConfig) on the user's behalf."""
    root = logging.getLogger()
    drop = _DropRootRecord(prefix)
    added = None
    if not root.handlers:
        added = logging.NullHandler()
        root.addHandler(added)
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)
        if added is not None:
            root.removeHandler(added)


class _QuietLoader(importlib.abc.Loader):
    """The module's own loader, its `exec_module` run with one root record dropped."""

    def __init__(self, loader, prefix: str):
        self._loader, self._prefix = loader, prefix

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _root_record_dropped(self._prefix):
            self._loader.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _QuietImport(importlib.abc.MetaPathFinder):
    """Imports one named module with one root-logger record of it dropped."""

    def __init__(self, name: str, prefix: str):
        self.name, self.prefix = name, prefix

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or verbose():
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _QuietLoader(spec.loader, self.prefix)
                return spec
        return None


def quiet_beam_import() -> None:
    """Beam's apitools warning, dropped from the one import that logs it.
    Installed when tasksieve is imported (tasksieve/__init__.py), before
    any of its modules imports Beam; once."""
    if not any(isinstance(f, _QuietImport) and f.name == BEAM_BIGQUERY_CLIENTS for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport(BEAM_BIGQUERY_CLIENTS, APITOOLS_WARNING))
