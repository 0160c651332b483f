"""OUT/tasksieve.log: what a command said, kept beside its outputs.

Once a command holds its output folder (run, dedup, select: after OUT's
lock; validate: once its folder is made; report), `attach(out)` appends
every record of the `tasksieve` logger (each progress line and message:
transforms/progress.py) and the libraries' records at `--log-level`
(default INFO for tasksieve, WARNING for the libraries) to
OUT/tasksieve.log, with a time stamp, one command after another.

The file is opened without following a link (a link planted at the name is
removed, never written through) and without blocking (a FIFO planted there
is refused, not waited on); anything but a regular file is left alone and
the command goes on without a log, saying so once.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from pathlib import Path

LOG_NAME = "tasksieve.log"
LEVEL_ENV = "TASKSIEVE_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_handler: logging.Handler | None = None


def level() -> int:
    name = os.environ.get(LEVEL_ENV, "").strip().upper()
    return getattr(logging, name) if name in LEVELS else logging.INFO


def set_level(name: str | None) -> None:
    """`--log-level`: in the environment, so worker processes see it too."""
    if name:
        os.environ[LEVEL_ENV] = name.upper()
    ours = logging.getLogger("tasksieve")
    ours.setLevel(level())
    ours.propagate = False  # its lines reach the console through the renderer, the file through attach()
    if level() == logging.DEBUG:
        logging.getLogger().setLevel(logging.DEBUG)  # the libraries' debug records too


def _open(path: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    for _ in range(2):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:  # a planted link: removed, not followed
                os.unlink(path)
                continue
            raise
        st = os.fstat(fd)
        if not os.path.stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.close(fd)
            raise OSError(errno.EINVAL, f"{path} is not a plain file of its own")
        os.set_blocking(fd, True)
        return fd
    raise OSError(errno.ELOOP, f"{path} keeps being replaced by a link")


def attach(out: Path | str) -> Path | None:
    """Log into OUT/tasksieve.log from now on (once per process: a second
    call moves the log to the new folder). Returns the path, or None when
    the file could not be opened (said on stderr, the command goes on)."""
    global _handler
    detach()
    path = Path(out) / LOG_NAME
    try:
        stream = os.fdopen(_open(path), "a", encoding="utf-8", buffering=1)
    except OSError as e:
        print(f"tasksieve: warning: no log file: {path}: {e.strerror or e}", file=sys.stderr)
        return None
    handler = _LogFileHandler(stream)
    handler.setFormatter(logging.Formatter(_FORMAT))
    set_level(None)
    ours = logging.getLogger("tasksieve")
    ours.addHandler(handler)
    # The libraries' records (vLLM, Beam, torch): WARNING and up, or --log-level's.
    handler.addFilter(_LibraryRecords(level() if LEVEL_ENV in os.environ else logging.WARNING))
    logging.getLogger().addHandler(handler)
    _handler = handler
    ours.info("tasksieve %s: %s", _version(), " ".join(sys.argv[1:]) or "(called in process)")
    return path


class _LogFileHandler(logging.StreamHandler):
    """A record that cannot be written (a full disk) is dropped in silence:
    the log never turns a one-line error into logging's traceback."""

    def handleError(self, record):
        pass


class _LibraryRecords(logging.Filter):
    """tasksieve's own records at their level; the libraries' at `floor`."""

    def __init__(self, floor: int):
        super().__init__()
        self.floor = floor

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith("tasksieve") or record.levelno >= self.floor


def detach() -> None:
    global _handler
    if _handler is None:
        return
    for logger in (logging.getLogger("tasksieve"), logging.getLogger()):
        logger.removeHandler(_handler)
    try:
        _handler.close()
        _handler.stream.close()
    except Exception:
        pass
    _handler = None


def _version() -> str:
    from tasksieve import __version__

    return __version__
