"""`tasksieve export OUT --format verl|trl|openrlhf|hf --to DIR`: write the
learnable set (or a selection) for a trainer. Holds OUT's lock while it
reads (a `run` into OUT cannot replace the database under it), builds the
whole export in a private staging folder beside DIR and renames it into
place: DIR is either the previous export or the new one, whole. A
non-empty DIR is replaced only with --force.

Exit codes: 0 written; 1 nothing to export or it could not be written
(no run in OUT, unknown run or selection, OUT in use, DIR not writable, no
row left after the licence filter); 2 usage error (DIR not empty without
--force, DIR a link, the run folder or a folder above it). One line on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.pipeline.export.card import dataset_card
from tasksieve.pipeline.export.formats import FORMATS, ROW_BUILDERS, license_allowed, split_name
from tasksieve.pipeline.export.rows import ExportError, ExportSource, read_export_source

EXIT_CANNOT_EXPORT = 1
EXIT_USAGE = 2
MANIFEST = "export.json"


class ExportUsageError(Exception):
    """The command line asks for something unsafe or impossible; one line."""


def _check_target(to: Path, out: Path, force: bool) -> None:
    if to.is_symlink():
        raise ExportUsageError(f"--to {to} is a symbolic link; name a real folder")
    real_to, real_out = Path(os.path.realpath(to)), Path(os.path.realpath(out))
    if real_to == real_out or real_to in real_out.parents:
        raise ExportUsageError(f"--to {to} would replace the run folder {out}; name another folder")
    if to.exists() and not to.is_dir():
        raise ExportUsageError(f"--to {to} exists and is not a folder")
    if to.is_dir() and any(to.iterdir()) and not force:
        raise ExportUsageError(f"--to {to} is not empty; add --force to replace it")


def _groups(rows: list[dict], split_by: str) -> dict[str, list[dict]]:
    if split_by == "none":
        return {"train": rows}
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(split_name(r.get(split_by)), []).append(r)
    return dict(sorted(groups.items()))


def _write_parquet_rows(rows: list[dict], path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


def _write(
    staging: Path, fmt: str, groups: dict[str, list[dict]], src: ExportSource, system_prompt: str | None
) -> list[str]:
    build = ROW_BUILDERS[fmt]
    built = {}
    for name, rows in groups.items():
        built[name] = [
            build(r, i, system_prompt if system_prompt is not None else src.system_prompts.get(r["domain"]))
            for i, r in enumerate(rows)
        ]
    if fmt != "hf":
        files = []
        for name, rows in built.items():
            _write_parquet_rows(rows, staging / f"{name}.parquet")
            files.append(f"{name}.parquet")
        return files
    from datasets import Dataset, DatasetDict

    DatasetDict({name: Dataset.from_list(rows) for name, rows in built.items()}).save_to_disk(str(staging))
    return sorted(p.name for p in staging.iterdir())


def _swap_into_place(staging: Path, to: Path) -> None:
    """rename(2) the finished export onto DIR; an old DIR is moved aside
    first and removed after, never followed through a link."""
    old = None
    if to.is_dir() and not to.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{to.name}.old-", dir=to.parent))
        os.rename(to, old / "x")
    try:
        os.rename(staging, to)
    except BaseException:
        if old is not None:  # the previous export goes back where it was
            os.rename(old / "x", to)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def export(
    out: Path,
    fmt: str,
    to: Path,
    *,
    run_id: str | None = None,
    selection_id: str | None = None,
    split_by: str = "none",
    system_prompt: str | None = None,
    licenses: list[str] | None = None,
    force: bool = False,
) -> dict:
    """Write the export; returns its manifest (counts per domain, files)."""
    from tasksieve.pipeline.run.errors import RunError
    from tasksieve.pipeline.run.folders import hold_output

    if fmt not in FORMATS:
        raise ExportUsageError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not out.is_dir():
        raise ExportError(f"{out} is not a folder holding a tasksieve run")
    _check_target(to, out, force)
    try:
        with hold_output(out, "export"):
            src = read_export_source(out, run_id, selection_id)
    except RunError as e:
        raise ExportError(str(e)) from None
    rows = [r for r in src.rows if license_allowed(r.get("license"), licenses)]
    refused = len(src.rows) - len(rows)
    if not rows:
        what = f"selection {selection_id}" if selection_id else f"run {src.run_id}"
        raise ExportError(
            f"nothing to export: {what} has {len(src.rows)} learnable tasks"
            + (f", all refused by --licenses {' '.join(licenses)}" if licenses else "")
        )
    manifest = {
        "format": fmt,
        "run_id": src.run_id,
        "model_id": src.model_id,
        "selection_id": selection_id,
        "rows": len(rows),
        "refused_by_license": refused,
        "licenses_filter": licenses or None,
        "split_by": split_by,
        "by_domain": dict(sorted(Counter(r["domain"] for r in rows).items())),
        "system_prompt": system_prompt if system_prompt is not None else "the curation run's, per domain",
    }
    to.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{to.name}.export-", dir=to.parent))
    try:
        groups = _groups(rows, split_by)
        if fmt == "hf":
            os.rmdir(staging)  # save_to_disk makes the folder itself
        manifest["files"] = _write(staging, fmt, groups, src, system_prompt)
        manifest["splits"] = {name: len(g) for name, g in groups.items()}
        (staging / "README.md").write_text(dataset_card(rows, manifest), encoding="utf-8")
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _swap_into_place(staging, to)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return manifest


def summary_lines(manifest: dict, to: Path) -> list[str]:
    lines = [
        f"exported {manifest['rows']} tasks as {manifest['format']} to {to} "
        f"(run {manifest['run_id']}, model {manifest['model_id']}"
        + (f", selection {manifest['selection_id']}" if manifest["selection_id"] else "")
        + ")"
    ]
    lines += [f"  {domain:<8} {n}" for domain, n in manifest["by_domain"].items()]
    if manifest["refused_by_license"]:
        lines.append(f"  refused by --licenses: {manifest['refused_by_license']}")
    lines.append(f"rewards: tasksieve.rewards (docs/export.md shows the {manifest['format']} wiring)")
    return lines


def command(args) -> int:
    import sys

    try:
        manifest = export(
            Path(args.out),
            args.format,
            Path(args.to),
            run_id=args.run_id,
            selection_id=args.selection,
            split_by=args.split_by,
            system_prompt=args.system_prompt,
            licenses=args.licenses,
            force=args.force,
        )
    except ExportUsageError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ExportError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return EXIT_CANNOT_EXPORT
    except OSError as e:
        print(f"tasksieve: error: cannot write the export to {args.to}: {e.strerror or e}", file=sys.stderr)
        return EXIT_CANNOT_EXPORT
    print("\n".join(summary_lines(manifest, Path(args.to))))
    return 0
