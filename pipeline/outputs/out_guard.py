"""Which folders a command may write into, and what a full disk means.

- System folders and the home folder (as given, and as their real paths:
  `/bin` may be `/usr/bin`, a link may name `/`) are never an output
  folder: tasksieve would fill them with its output set.
- A folder that holds something other than tasksieve's own files, and no
  tasksieve run, is refused unless `--force`: a typo must not mix an
  output set into someone's data.
- ENOSPC / EDQUOT anywhere (a Parquet write, DuckDB, a Beam worker's
  staged shard, the attempt cache) becomes one line naming the folder and
  its free space, and an exit code of its own (EXIT_DISK_FULL).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

EXIT_DISK_FULL = 6

SYSTEM_FOLDERS = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/include",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/sbin",
    "/usr/share",
    "/usr/src",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
    "/var/tmp",
    "/snap",
)


class Refused(Exception):
    """A folder a command must not write into; the message is one line."""


def _homes() -> set[str]:
    homes = {os.path.expanduser("~")}
    if os.environ.get("HOME"):
        homes.add(os.environ["HOME"])
    try:
        import pwd

        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
        if os.environ.get("SUDO_USER"):
            homes.add(pwd.getpwnam(os.environ["SUDO_USER"]).pw_dir)
    except (ImportError, KeyError, OSError):
        pass
    return {h for h in homes if h and h != "/"} | {os.path.realpath(h) for h in homes if h and h != "/"}


def refuse_dangerous(path: str | Path, flag: str) -> None:
    """Refused if `path`, as given or resolved, is `/`, a system folder or a
    home folder."""
    given = os.path.normpath(os.path.abspath(path))
    real = os.path.realpath(path)
    system = set(SYSTEM_FOLDERS) | {os.path.realpath(p) for p in SYSTEM_FOLDERS}
    homes = _homes()
    for candidate in (given, real):
        if candidate in homes:
            raise Refused(
                f"{flag} {path} is a home folder ({candidate}); tasksieve will not fill it with its "
                "outputs; give a new folder, e.g. {}/tasksieve-out".format(candidate.rstrip("/"))
            )
        if candidate in system:
            shown = candidate if candidate == given else f"{given}, which is {candidate}"
            raise Refused(
                f"{flag} {path} is a system folder ({shown}); tasksieve will not write its outputs there; "
                "give a new folder"
            )


def refusal(path: str | Path, flag: str) -> str | None:
    """refuse_dangerous's line, or None."""
    try:
        refuse_dangerous(path, flag)
    except Refused as e:
        return str(e)
    return None


def refuse_shared_folder(path: str | Path, flag: str = "--out") -> None:
    """Refused if another user could rename or replace what tasksieve keeps
    in `path` between its checks and its writes: `path` (as resolved) or a
    folder above it owned by another user (not root), `path` writable by
    another user (safe_fs.others_can_write), or a folder above it writable
    by one without the sticky bit. Every write in OUT goes through path
    names (staging shards, the output set, the caches); in such a folder a
    second user swaps a folder for a link of theirs and steers them
    (docs/outputs.md, "Writing into a shared or pre-created folder")."""
    import stat

    from tasksieve.pipeline.outputs.safe_fs import others_can_write

    euid = os.geteuid()
    real = Path(os.path.realpath(path))
    for folder in (real, *real.parents):
        try:
            st = os.stat(folder)
        except OSError:
            continue  # not made yet: the lock or the first write says why
        if st.st_uid not in (0, euid):
            who = f"owned by another user (uid {st.st_uid})"
        elif others_can_write(st) and (folder == real or not st.st_mode & stat.S_ISVTX):
            who = f"writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
        else:
            continue
        raise Refused(
            f"{flag} {path}: {folder} is {who}; another user could replace what tasksieve writes "
            "there. Use a folder only you can write in (chmod go-w), under folders only you or root can write in"
        )


# Names a command writes in OUT (outputs, its own folders, the lock, the
# report, the caches). A folder holding only these is tasksieve's.
OWN_NAMES = frozenset(
    {
        ".tasksieve.lock",
        "tasksieve.log",
        "current",
        "runs",
        "_staging",
        "attempt_cache",
        "embedding_cache",
        "select_cache",
        "report.html",
        "learnable.parquet",
        "results.parquet",
        "attempts.parquet",
        "quarantine.parquet",
        "costs.parquet",
        "selected.parquet",
        "curation.duckdb",
        "curation.duckdb.wal",
    }
)
# Names that say a tasksieve run was written here.
RUN_MARKERS = frozenset({"current", "runs", "curation.duckdb"})
_OWN_TEMP = re.compile(r"\.(" + "|".join(re.escape(n.lstrip(".")) for n in OWN_NAMES) + r")\..*")


# Names tasksieve replaces with a link or a file (rename(2) cannot put one over a folder).
FILE_NAMES = (
    "current",
    "learnable.parquet",
    "results.parquet",
    "attempts.parquet",
    "quarantine.parquet",
    "costs.parquet",
    "selected.parquet",
    "curation.duckdb",
    "report.html",
)


def refuse_folders_at_file_names(out: Path) -> None:
    """A real folder where tasksieve keeps a file or link would stop the
    commit after all the work: refused before any."""
    for name in FILE_NAMES:
        if os.path.isdir(out / name) and not os.path.islink(out / name):
            raise Refused(f"{out / name} is a folder, where tasksieve keeps its {name}; move it away first")


def refuse_foreign_folder(out: Path, force: bool) -> None:
    """A non-empty --out that holds no tasksieve run, and things tasksieve
    did not write, is refused unless `force`."""
    refuse_folders_at_file_names(out)
    if force:
        return
    try:
        names = os.listdir(out)
    except OSError:
        return  # the lock or the first write says why
    if RUN_MARKERS & set(names):
        return
    foreign = sorted(n for n in names if n not in OWN_NAMES and not _OWN_TEMP.fullmatch(n))
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise Refused(
            f"--out {out} is not empty ({foreign[0]!r}{more}) and holds no tasksieve run; tasksieve "
            "writes and replaces files there: choose a new or empty folder, or pass --force"
        )


# --- a full disk -----------------------------------------------------------------

DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_TEXT = re.compile(r"No space left on device|Disk quota exceeded|ENOSPC|EDQUOT")
_FILENAME = re.compile(r"(?:No space left on device|Disk quota exceeded)\S*:? ['\"]?(/[^'\"\s]+)")


def reraise_disk_full(e: OSError) -> None:
    """A full disk or quota is not an unwritable folder: it goes up as it is
    (one line and exit 6 in cli.py)."""
    if e.errno in DISK_ERRNOS:
        raise e


def disk_full(e: BaseException) -> tuple[bool, str | None]:
    """(whether a full disk or quota is behind `e`, however a runner or
    DuckDB wrapped it; the file it failed on, when said)."""
    seen = set()
    found, where = False, None
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            found, where = True, where or e.filename
        elif _DISK_TEXT.search(str(e)):
            m = _FILENAME.search(str(e))
            found, where = True, where or (m.group(1) if m else None)
        e = e.__cause__ or e.__context__
    return found, (str(where) if where else None)


def _free(path: Path) -> str:
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return "free space unknown"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if free < 1024 or unit == "TiB":
            return f"{free:.0f} {unit} free" if unit == "bytes" else f"{free:.1f} {unit} free"
        free /= 1024
    return ""


def full_disk_traceback(record) -> bool:
    """A worker's traceback for a full disk or quota (Beam logs it as text),
    which the command says in one line instead."""
    try:
        message = record.getMessage()
    except Exception:
        return False
    return "Traceback" in message and ("No space left on device" in message or "Disk quota exceeded" in message)


def disk_full_line(e: BaseException, folders: list, after: str = "") -> str | None:
    """The one line for a full disk behind `e`, or None. `folders`: (what,
    path) of the folders the command writes (a None path is skipped); the
    one holding the failed file is named, else every one."""
    folders = [(w, Path(p)) for w, p in folders if p]
    found, where = disk_full(e)
    if not found:
        return None
    real_where = os.path.realpath(where) if where else None
    hits = [(w, p) for w, p in folders if real_where and (real_where + "/").startswith(os.path.realpath(p) + "/")]
    if not hits and real_where:
        hits = [("folder", Path(os.path.dirname(real_where)))]
    named = ", ".join(f"{w} {p} ({_free(p)})" for w, p in (hits or folders))
    return (
        f"no space left on device (or disk quota exceeded) writing to {named}{after}; free some space and "
        "start the same command again"
    )
