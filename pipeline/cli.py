"""The `tasksieve` command line.

    tasksieve run --input PATH... --out DIR [--config FILE] [--model DIR]
                  [--sampling fixed|sequential|bayes] [-k K] [--backend vllm|openai|replay]
                  [--base-url URL] [--replay PATH...] [--attempt-cache DIR]
                  [--dedup-against POOL...] [--save-index DIR] [--runner NAME] [beam options...]
    tasksieve dedup --input PATH... --out DIR [--dedup-against POOL...] [--save-index DIR] [--config FILE]
    tasksieve report OUT [--run-id ID]
    tasksieve select OUT (--budget-tasks N | --budget-usd X) [--by DIM...] [--dry-run] [--run-id ID] [--config FILE]
    tasksieve validate DELIVERY... [--against POOL...] [--profile PROFILE] [--out DIR]
                       [--probe-model M --probe-k K] [--config FILE]
    tasksieve export OUT --format verl|trl|openrlhf|hf --to DIR [--selection ID] [--run-id ID]
                     [--split-by none|source|domain] [--system-prompt TEXT] [--licenses ID...] [--force]
    tasksieve sample-data OUT
    tasksieve prepare-model
Every command takes --verbose: the libraries' own warnings and logs too
(transforms/console.py); without it the console shows tasksieve's lines only.

Exit codes (run, dedup): 0 success; 1 the run could not start (bad config, missing
input, model that does not load, output folder in use or not writable, unknown
runner: one line on stderr); 2 usage error (unknown option); 3 the
row-accounting check failed; 4 the run stopped mid-way (the model server went
away): finished attempts are saved, the same command resumes; 5 the model
server refused the requests (401/403: the key; 404: the model name or URL;
another status no retry mends) or more than model.max_failed_share of them
failed: nothing is reported as complete, the same command resumes once fixed; 130 interrupted
(Ctrl-C): one line says what was saved, the same command resumes.
Exit code 6 (every command): the disk or quota was full (one line: the folder, its free space).
A system or home folder as OUT is a usage error (2), as is a non-empty --out with no run (--force).
Exit codes (validate): 0 the delivery is acceptable; 1 it is not;
2 usage error (missing file, bad profile: one line on stderr); 3 the validator
itself failed (an internal error, one line on stderr: the delivery was not judged).
Exit codes (select): 0 done; 1 nothing to select from or nothing written (no run in
OUT, an empty learnable pool, bad config, output folder in use); 2 usage error (no
budget, both budgets, a zero, negative or non-numeric budget). One line on stderr.
Exit codes (export): 0 written; 1 nothing to export or not writable (no run, unknown
run or selection, OUT in use, every row refused by --licenses); 2 usage error (--to
not empty without --force, a link, or the run folder itself). One line on stderr.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import threading

from tasksieve.pipeline.cli_parser import build_parser
from tasksieve.transforms import console


def _offline_env() -> None:
    # No hub, ever: models and datasets come from disk or installed packages.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _arrow_allocator() -> None:
    """Arrow's buffers from jemalloc, not its default mimalloc (unless the
    user chose one). Under mimalloc, a run's many short-lived buffers
    (staged files read back, compute results) kept faulting in fresh
    transparent huge pages, freed again soon after, and the kernel zeroed
    each 2 MiB page: 11% of a 100k `dedup`'s time, ~1.3 s of its system
    time (bench/README.md, "Measured design choices"). pyarrow reads the variable
    when it is first imported: main() calls this before anything imports
    it (tests/test_cli.py). Only speed depends on it. Linux only:
    pyarrow's Linux wheels carry jemalloc, others may not (Arrow would
    warn and fall back)."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")


EXIT_INTERRUPTED = 130
EXIT_VALIDATE_INTERNAL = 3


class _QuietLogs(logging.Filter):
    """Keeps a one-line error one line: drops Beam's own ERROR traceback
    for the stops tasksieve reports itself in one line (a backend that went
    away, Ctrl-C). Beam's import warning: transforms/console.py."""

    QUIET = ("BackendUnavailable", "ServerRefused", "KeyboardInterrupt", "RunInterrupted")

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            if type(exc).__name__ in self.QUIET or (
                isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
            ):
                return False
            exc = exc.__cause__ or exc.__context__
        from tasksieve.pipeline.outputs.out_guard import full_disk_traceback

        return not full_disk_traceback(record)  # said in one line, exit 6


def _quiet_logging() -> None:
    quiet = _QuietLogs()
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
    root.addFilter(quiet)  # records logged on the root logger itself
    for handler in root.handlers:
        handler.addFilter(quiet)  # records of every other logger that reach the root's handlers


def _end_progress_bars() -> None:
    """Finish any progress bar on stderr, so the message that follows starts
    its own line."""
    tqdm_module = sys.modules.get("tqdm")
    if tqdm_module is None:
        return
    try:
        for bar in list(getattr(tqdm_module.tqdm, "_instances", ())):
            bar.close()
    except Exception:
        pass


def _say(message: str) -> None:
    _end_progress_bars()
    print(f"tasksieve: {message}", file=sys.stderr, flush=True)


def _interrupted(message: str) -> int:
    """Ctrl-C: one line, exit 130. A second Ctrl-C leaves at once. Threads
    still waiting on the network (requests in flight) would hold the exit up
    until they time out: then the exit handlers run (worker processes are
    stopped) and the process ends without waiting for them."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_INTERRUPTED))
    _say(message)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:
        import atexit

        sys.stdout.flush()
        atexit._run_exitfuncs()
        os._exit(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    _offline_env()
    _arrow_allocator()
    _quiet_logging()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command not in ("run", "dedup") and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    console.set_verbose(args.verbose)
    console.quiet_program_env()  # before anything imports torch or datasets
    try:
        return _main(args, extra)
    except KeyboardInterrupt:
        # Outside the sampling stage (which says what it saved itself).
        if args.command == "run":
            return _interrupted(
                "interrupted; finished attempts, if any, are in the attempt cache; start the same "
                "command again to resume"
            )
        return _interrupted("interrupted; start the same command again")


def _main(args, extra: list[str]) -> int:
    handlers = {
        "sample-data": _sample_data,
        "report": _report,
        "validate": _validate,
        "select": _select,
        "export": _export,
        "prepare-model": _prepare_model,
    }
    if args.command in handlers:
        return handlers[args.command](args)
    return _run_or_dedup(args, extra)


def _refused(path: str, flag: str) -> bool:
    from tasksieve.pipeline.outputs.out_guard import refusal  # a system or home folder as OUT: one line, exit 2

    return _said(refusal(path, flag)) is not None


def _disk_full(e: BaseException, folders: list, after: str = "") -> int | None:
    """Exit 6 and its one line when a full disk or quota is behind `e`."""
    from tasksieve.pipeline.outputs.out_guard import EXIT_DISK_FULL, disk_full_line

    return EXIT_DISK_FULL if _said(disk_full_line(e, folders, after)) is not None else None


def _said(message: str | None) -> str | None:
    if message:
        _say(f"error: {message}")
    return message


def _sample_data(args) -> int:
    from tasksieve.pipeline.setup.sample_data import write_sample

    if _refused(args.out, "OUT"):
        return 2
    try:
        lines = write_sample(args.out, all_domains=True)
    except OSError as e:
        if (code := _disk_full(e, [("folder", args.out)])) is not None:
            return code
        print(f"tasksieve: error: cannot write the sample into {args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def _report(args) -> int:
    from pathlib import Path

    from tasksieve.pipeline.report.command import ReportError, write_report

    if _refused(args.out, "OUT"):
        return 2
    try:
        path, text = write_report(Path(args.out), args.run_id)
    except ReportError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return 1
    except (OSError, duckdb_error()) as e:
        if (code := _disk_full(e, [("output folder", args.out)])) is not None:
            return code
        print(f"tasksieve: error: cannot report on {args.out}: {' '.join(str(e).split())[:300]}", file=sys.stderr)
        return 1
    print(text)
    print(f"\nreport: {path}")
    return 0


def _select(args) -> int:
    from tasksieve.pipeline.select.command import command

    return command(args)


def _export(args) -> int:
    from tasksieve.pipeline.export.command import command

    return command(args)


def _prepare_model(args) -> int:
    from tasksieve.pipeline.setup.models import ensure_default_model

    print(ensure_default_model())
    return 0


def _config_from_args(args):
    """The config file with the command line's overrides, validated like the file."""
    from tasksieve.schemas.config import ConfigError, load_config

    cfg = load_config(args.config)
    if args.dedup_against:
        cfg.dedup.against = list(args.dedup_against)
    if args.save_index:
        cfg.dedup.save_index = args.save_index
    if args.dask_workers < 1:
        raise ConfigError("--dask-workers must be at least 1")
    if args.command == "dedup":
        return cfg
    if args.base_url is not None:
        from tasksieve.pipeline.run.errors import UsageError
        from tasksieve.schemas.base_url import check_base_url

        why = check_base_url(args.base_url)
        if why:
            raise UsageError(f"--base-url: {why}")
    overrides = [
        (args.model, ("model", "path")),
        (args.sampling, ("sampling", "mode")),
        (args.backend, ("model", "backend")),
        (args.base_url, ("model", "openai", "base_url")),
        (args.attempt_cache, ("attempt_cache",)),
        (getattr(args, "graded", None), ("judge", "graded")),
    ]
    if args.replay:
        cfg.model.backend, cfg.model.replay_paths = "replay", args.replay
    for value, path in overrides:
        if value:
            target = cfg
            for name in path[:-1]:
                target = getattr(target, name)
            setattr(target, path[-1], value)
    # Overrides are validated like the file (replay without paths, ...).
    cfg = type(cfg).model_validate(cfg.model_dump())
    if args.k is not None:
        from tasksieve.schemas.config import MAX_K

        if args.k < 1:
            raise ConfigError("-k must be at least 1")
        if args.k > MAX_K:
            raise ConfigError(f"-k must be at most {MAX_K} (attempts per task)")
        cfg.sampling.k = args.k
    return cfg


def _run_or_dedup(args, extra: list[str]) -> int:
    from pydantic import ValidationError

    from tasksieve.pipeline.run.execute import RunRefused
    from tasksieve.pipeline.outputs.finalize import AccountingError
    from tasksieve.pipeline.run.errors import RunError, RunInterrupted, RunStopped, UsageError
    from tasksieve.pipeline.run.command import dedup, run
    from tasksieve.schemas.config import ConfigError

    from tasksieve.pipeline.outputs.safe_fs import NotAFolder

    command = dedup if args.command == "dedup" else run
    cfg = None
    try:
        cfg = _config_from_args(args)
        command(
            args.input,
            args.out,
            cfg,
            args.runner,
            extra,
            config_path=args.config,
            rates_path=args.rates,
            dask_address=args.dask_address,
            dask_workers=args.dask_workers,
            force=args.force,
        )
    except UsageError as e:
        _say(f"error: {e}")
        return 2
    except (ConfigError, RunError, NotAFolder) as e:  # NotAFolder: a file where tasksieve keeps a folder
        _say(f"error: {e}")
        return 1
    except RunInterrupted as e:
        return _interrupted(str(e))
    except ValidationError as e:
        _say(f"error: {e.errors()[0]['msg']}")
        return 1
    except RunStopped as e:
        _say(f"STOPPED: {e}")
        return 4
    except RunRefused as e:
        _say(f"REFUSED: {e}")
        return 5
    except AccountingError as e:
        _say(f"ACCOUNTING FAILED: {e}")
        return 3
    except Exception as e:
        cache = (
            (cfg.attempt_cache or os.path.join(args.out, "attempt_cache")) if cfg and args.command == "run" else None
        )
        code = _disk_full(
            e,
            [("--out", args.out), ("attempt cache", cache)],
            f"; the attempts already saved stay in {cache} and are re-used" if cache else "",
        )
        if code is None:
            raise
        return code
    return 0


def duckdb_error():
    import duckdb

    return duckdb.Error


def _validate(args) -> int:
    from tasksieve.pipeline.validate.command import ProbeSpec, UsageError, load_run_config, validate_delivery

    try:
        run_config = load_run_config(args.config) if args.config else None
        probe = None
        if args.probe_model:
            probe = ProbeSpec(model=args.probe_model, k=args.probe_k, config=run_config or load_run_config(None))
        summary = validate_delivery(
            args.deliveries,
            args.out,
            against=args.against,
            profile_path=args.profile,
            probe=probe,
            data_docs=not args.no_data_docs,
            limits=run_config.limits if run_config else None,
        )
    except UsageError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug, not a verdict: said in one line, with its own exit code
        if (code := _disk_full(e, [("--out", args.out)])) is not None:
            return code
        print(
            f"tasksieve: internal error: the delivery was not judged: {type(e).__name__}: "
            f"{' '.join(str(e).split())[:300]}",
            file=sys.stderr,
        )
        return EXIT_VALIDATE_INTERNAL
    return 0 if summary["acceptable"] else 1


def entry() -> None:
    """The `tasksieve` program (pyproject's console script; `python -m`
    too): main(), then exit without a last collection of every object the
    run left (a 100k-task dedup leaves ~300,000: 0.7-0.9 s of its exit,
    0.13 s frozen; bench/README.md, "Measured design choices"). Freezing
    moves them out of the collector's reach; atexit handlers still run and every output is closed by then. Not in
    main(), which tests call in one long-lived process."""
    code = main()
    import gc

    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
