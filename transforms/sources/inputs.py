"""Which input paths are deliveries: a user's files and folders resolved
to the sources the reader reads (read.py re-exports these names).

A file is read as JSONL or Parquet by its suffix; a saved `datasets`
folder is one source; any other folder contributes its delivery files.
What is not read is never skipped silently: a path given directly that
cannot be read stops the run before it starts (InputError, one line), and
inside a folder each thing skipped is named in a warning. Devices, FIFOs
and files that resolve into /proc, /sys or /dev are never opened.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import stat
from pathlib import Path
from typing import Callable

from tasksieve.schemas.regular_file import kind_of, special_reason

TABLE_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
# Compressions read for JSONL files (by suffix, case-insensitive).
COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
# Recognised but not read: said so, never skipped silently.
UNREAD_COMPRESSIONS = (".zst", ".zstd", ".zip", ".7z", ".lz4", ".tar", ".tgz", ".rar", ".br", ".snappy")
READABLE = "JSONL (.jsonl, .json, .ndjson; plain or .gz/.bz2/.xz), Parquet (.parquet) or a saved datasets folder"


class InputError(Exception):
    """An input path that cannot be read at all; fails the run before it starts."""


def _warn(message: str) -> None:
    from tasksieve.transforms.progress import warn

    warn(message)


# --- which files are deliveries ------------------------------------------------------------


def delivery_kind(name: str) -> str | None:
    """'jsonl' or 'parquet' for a delivery file name (case-insensitive,
    JSONL optionally compressed), else None."""
    low = name.lower()
    for comp in COMPRESSIONS:
        if low.endswith(comp):
            low = low[: -len(comp)]
            return "jsonl" if low.endswith(JSONL_SUFFIXES) else None
    if low.endswith(TABLE_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


def _why_not_read(name: str) -> str:
    low = name.lower()
    for comp in UNREAD_COMPRESSIONS + tuple(COMPRESSIONS):
        if low.endswith(comp):
            return f"compressed as {comp}, which is not read (read: .gz, .bz2, .xz of JSONL); decompress it first"
    return f"not a delivery file (read: {READABLE})"


def is_datasets_folder(path: Path) -> bool:
    return path.is_dir() and (
        (path / "dataset_info.json").exists() or (path / "state.json").exists() or (path / "dataset_dict.json").exists()
    )


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def hub_hint(raw: str) -> str:
    """For a missing input that reads like a Hugging Face hub id (owner/name,
    no file extension): how to give it, since tasksieve never downloads."""
    if not _HUB_ID.fullmatch(raw) or raw.startswith(".") or Path(raw).suffix.lower() in _HINT_SUFFIXES:
        return ""
    name = raw.split("/")[-1]
    return (
        f"; {raw!r} looks like a Hugging Face hub id, and tasksieve reads local files only (it never downloads): "
        f"save it first with python -c \"import datasets; datasets.load_dataset('{raw}').save_to_disk('{name}')\" "
        f"and give --input {name}"
    )


_HINT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".gz", ".bz2", ".xz", ".txt", ".csv", ".zst", ".zip")


def expand_inputs(paths: list[str], warn: Callable[[str], None] = _warn) -> list[str]:
    """Resolve the user's input paths to readable sources, failing fast.

    A file is read as JSONL or Parquet by its suffix (any case; JSONL may be
    .gz/.bz2/.xz); a saved `datasets` folder is one source; any other folder
    contributes its delivery files. Inside a folder, what is not read is
    named in a warning: other files, FIFOs and devices, broken links, and a
    link to a folder or file already read (a link is followed once, so a
    link loop is read once). The result is sorted so runs are deterministic.
    """
    out: dict[str, str] = {}  # real path -> path as given
    seen_dirs: set[str] = set()
    seen_files: dict[str, str] = {}
    for raw in paths:
        p = Path(raw)
        try:
            st = p.stat()
        except FileNotFoundError:
            raise InputError(f"input not found: {raw}{hub_hint(raw)}") from None
        except OSError as e:
            raise InputError(f"input {raw}: cannot be read: {e.strerror or e}") from None
        why = special_reason(p) if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else None
        if why:  # looks like a file or folder, but /proc, /sys, /dev: endless, blocking, changing
            raise InputError(f"input {raw} is {why}; it is not read")
        if stat.S_ISREG(st.st_mode):
            if delivery_kind(p.name) is None:
                raise InputError(f"input {raw}: unknown format ({_why_not_read(p.name)})")
            seen_files.setdefault(os.path.realpath(p), str(p))
            out.setdefault(os.path.realpath(p), str(p))
        elif stat.S_ISDIR(st.st_mode):
            real = os.path.realpath(p)
            if is_datasets_folder(p):
                out.setdefault(real, str(p))
                continue
            found = _scan_folder(p, seen_dirs, seen_files, warn)
            if not found:
                raise InputError(
                    f"input folder {raw} holds no delivery files and is not a datasets folder (read: {READABLE})"
                )
            for real_file, shown in found:
                out.setdefault(real_file, shown)
        else:
            raise InputError(f"input {raw} is {kind_of(st)}, not a file or folder; it is not read")
    return sorted(set(out.values()))


def _scan_folder(folder: Path, seen_dirs: set[str], seen_files: dict[str, str], warn) -> list[tuple[str, str]]:
    """(real path, path) of the delivery files below a folder; a saved
    datasets folder counts as one. Depth-first in sorted order, with a
    stack of its own: however deep a delivery's folders nest, no recursion
    limit is hit."""
    found: list[tuple[str, str]] = []
    stack: list = []
    root = os.path.realpath(folder)

    def enter(sub: Path) -> None:
        real_sub = os.path.realpath(sub)
        if real_sub in seen_dirs:
            warn(f"skipping {sub}: a link to the folder {real_sub}, already read")
            return
        seen_dirs.add(real_sub)
        try:
            children = sorted(sub.iterdir())
        except OSError as e:
            raise InputError(f"cannot list input folder {sub}: {e.strerror or e}") from None
        stack.append(iter(children))

    enter(folder)
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        st = _entry_stat(child, root, warn)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode) and not is_datasets_folder(child):
            enter(child)
            continue
        real = os.path.realpath(child)
        seen = seen_dirs if stat.S_ISDIR(st.st_mode) else seen_files
        if real in seen:
            what = f"a link to the folder {real}" if seen is seen_dirs else f"the same file as {seen[real]}"
            warn(f"skipping {child}: {what}, already read")
            continue
        if seen is seen_dirs:
            seen_dirs.add(real)
        else:
            seen_files[real] = str(child)
        found.append((real, str(child)))
    return found


def _entry_stat(child: Path, root: str, warn) -> os.stat_result | None:
    """The stat of a folder entry worth reading (a folder, or a file of a
    delivery kind), or None after a warning saying why not. A link is
    followed only to what the input folder (`root`, resolved) holds: a
    delivery is untrusted, and a link in it to ~/.aws or /etc would have
    the host's files read as rows (their lines in quarantine.parquet's
    `raw`, an output shared with analysts and vendors); naming the target
    as an --input reads it."""
    if child.is_symlink():
        real = os.path.realpath(child)
        if not (real == root or real.startswith(root.rstrip(os.sep) + os.sep)):
            warn(f"skipping {child}: a link to {real}, outside the input folder (name it as an --input to read it)")
            return None
    try:
        st = child.stat()  # follows links
    except OSError:
        warn(f"skipping {child}: a broken link" if child.is_symlink() else f"skipping {child}: cannot be read")
        return None
    why = special_reason(child) if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else None
    if not why and stat.S_ISREG(st.st_mode) and delivery_kind(child.name) is None:
        why = _why_not_read(child.name)
    if not why and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        why = f"{kind_of(st)}, not a delivery file"
    if why:
        warn(f"skipping {child}: {why}")
        return None
    return st
