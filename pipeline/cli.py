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
Every command takes --verbose/-v: the libraries' own warnings and logs too
(pipeline/console.py); without it the console shows tasksieve's lines only.
--quiet/-q hides progress; --log-level sets how much tasksieve says, on the
console and in OUT/tasksieve.log (pipeline/logfile.py); --version.

One exit-code table for every command (README, "Exit codes"): 0 done
(validate: acceptable); 1 validate: not acceptable, others: stopped by the
state of things (OUT in use or not writable, a model that does not load, a
server not answering, no run in OUT); 2 usage: a bad option, --config or
--profile, a path given that does not exist or cannot be used (a missing
input, --out inside an input, a system folder); 3 run/dedup: row accounting
failed, validate: internal error; 4 run: the backend went away (resume);
5 run: the server refused; 6 disk full; 130 interrupted. One line on stderr.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import threading

from tasksieve.pipeline import console


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


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EXIT_INTERRUPTED = 130
EXIT_VALIDATE_INTERNAL = 3


class _QuietLogs(logging.Filter):
    """Keeps a one-line error one line: drops Beam's own ERROR traceback
    for the stops tasksieve reports itself in one line (a backend that went
    away, Ctrl-C). Beam's import warning: pipeline/console.py."""

    QUIET = ("BackendUnavailable", "ServerRefused", "KeyboardInterrupt", "RunInterrupted")

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            if type(exc).__name__ in self.QUIET or (isinstance(exc, OSError)
                                                    and exc.errno in (errno.ENOSPC, errno.EDQUOT)):
                return False
            exc = exc.__cause__ or exc.__context__
        from tasksieve.pipeline.out_guard import full_disk_traceback

        return not full_disk_traceback(record)  # said in one line, exit 6


def _quiet_logging() -> None:
    quiet = _QuietLogs()
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
    root.addFilter(quiet)  # records logged on the root logger itself
    for handler in root.handlers:
        handler.addFilter(quiet)  # records of every other logger that reach the root's handlers


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit 2), not the usage block plus a line."""

    def error(self, message):
        self.exit(2, f"tasksieve: error: {message} (see {self.prog} --help)\n")


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


def _parser() -> argparse.ArgumentParser:
    from tasksieve import __version__

    p = _Parser(prog="tasksieve", description="Curate learnable RL post-training tasks.")
    p.add_argument("--version", action="version", version=f"tasksieve {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _run_and_dedup_parsers(sub)
    _analyst_parsers(sub)
    _vendor_and_setup_parsers(sub)
    verbose_help = "also show the libraries' own warnings and logs (torch, vLLM, Beam), which are filtered out otherwise"
    quiet_help = "no progress lines or bars: only errors, warnings and the result"
    level_help = "tasksieve's log level on the console and in OUT/tasksieve.log (default INFO; WARNING and up: no progress)"
    p.add_argument("--verbose", "-v", action="store_true", help=verbose_help)
    p.add_argument("--quiet", "-q", action="store_true", help=quiet_help)
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, help=level_help)
    for command in sub.choices.values():  # after the command too; SUPPRESS keeps one given before it
        command.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS, help=verbose_help)
        command.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help=quiet_help)
        command.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=argparse.SUPPRESS,
                             help=level_help)
    return p


def _run_and_dedup_parsers(sub) -> None:
    r = sub.add_parser("run", help="curate deliveries into a learnable set and analyst tables",
                       epilog="Unrecognised --options are passed to Apache Beam (e.g. --direct_num_workers).")
    r.add_argument("--input", "-i", nargs="+", action="extend", required=True, metavar="PATH",
                   help="JSONL/Parquet files, saved datasets folders, or folders of them")
    r.add_argument("--out", "-o", required=True, metavar="DIR", help="output folder")
    r.add_argument("--config", "-c", metavar="FILE", help="TOML run config (see tasksieve.example.toml)")
    r.add_argument("--rates", metavar="FILE", help="TOML rates table (default: the bundled rates.default.toml)")
    r.add_argument("--model", metavar="DIR", help="Hugging Face model folder (default: bundled SmolLM2-135M-Instruct)")
    r.add_argument("--sampling", choices=["sequential", "fixed", "bayes"], help="sampling mode (default sequential)")
    r.add_argument("--backend", choices=["vllm", "openai", "replay"],
                   help="vllm (in-process engine, default), openai (an OpenAI-compatible server), "
                        "replay (recorded attempts; see --replay)")
    r.add_argument("--base-url", metavar="URL", help="with --backend openai: the server's /v1 URL")
    r.add_argument("--replay", nargs="+", action="extend", metavar="PATH",
                   help="recorded attempts to replay (sets --backend replay)")
    r.add_argument("--attempt-cache", metavar="DIR",
                   help="where finished attempts persist and are re-used from (default OUT/attempt_cache)")
    r.add_argument("--graded", metavar="FILE", help="rubric calibration labels keyed by task_id ([judge] graded)")
    r.add_argument("-k", type=int, help="most attempts per task (default 8)")
    r.add_argument("--runner", help="Beam runner: inprocess (default: this process, no network), dask, "
                                    "or any Beam runner name with its options")
    r.add_argument("--dask-address", metavar="ADDR", help="with --runner dask: an existing Dask scheduler")
    r.add_argument("--dask-workers", type=int, default=2, metavar="N",
                   help="with --runner dask and no address: a local cluster of N worker processes (default 2)")

    for cmd in (r, d := sub.add_parser("dedup", help="only the dedup and decontamination stages: no model, seconds")):
        cmd.add_argument("--force", action="store_true",
                         help="write into a non-empty --out that holds no tasksieve run")
        cmd.add_argument("--dedup-against", nargs="+", action="extend", metavar="POOL",
                         help="earlier stages' tasks (JSONL/Parquet/datasets folders or saved indexes): drop tasks "
                              "that duplicate them; the pool is never modified")
        cmd.add_argument("--save-index", metavar="DIR", help="save the hashed --dedup-against pool here for reuse")
    d.add_argument("--input", "-i", nargs="+", action="extend", required=True, metavar="PATH",
                   help="JSONL/Parquet files, saved datasets folders, or folders of them")
    d.add_argument("--out", "-o", required=True, metavar="DIR", help="output folder")
    d.add_argument("--config", "-c", metavar="FILE", help="TOML run config ([dedup] and [decontam] apply)")
    d.add_argument("--rates", metavar="FILE", help="TOML rates table (expert costs of what is dropped)")
    d.add_argument("--runner", help="Beam runner (default inprocess)")
    d.add_argument("--dask-address", metavar="ADDR", help="with --runner dask: an existing Dask scheduler")
    d.add_argument("--dask-workers", type=int, default=2, metavar="N", help="with --runner dask: local workers")


def _analyst_parsers(sub) -> None:
    rp = sub.add_parser("report", help="print the headline tables and write OUT/report.html")
    rp.add_argument("out", metavar="OUT", help="a run's output folder (holding curation.duckdb)")
    rp.add_argument("--run-id", help="which run (default: the latest in the database)")
    se = sub.add_parser("select", help="choose a diverse, signal-rich training set under a task or dollar budget")
    se.add_argument("out", metavar="OUT", help="a run's output folder (holding curation.duckdb)")
    se.add_argument("--budget-tasks", metavar="N", help="choose at most N tasks")
    se.add_argument("--budget-usd", metavar="X", help="choose tasks whose training costs at most X dollars")
    se.add_argument("--by", nargs="+", choices=["cluster", "source", "domain", "difficulty"],
                    help="breakdowns to print, selected vs pool (default: cluster source)")
    se.add_argument("--dry-run", action="store_true", help="print what each budget level would buy; write no selection")
    se.add_argument("--run-id", help="whose model is current (default: the latest run that sampled)")
    se.add_argument("--config", "-c", metavar="FILE", help="run config TOML: its [select] section applies")
    ex = sub.add_parser("export", help="write the learnable set (or a selection) for verl, TRL, OpenRLHF or as a "
                                       "Hugging Face datasets folder")
    ex.add_argument("out", metavar="OUT", help="a run's output folder (holding curation.duckdb)")
    ex.add_argument("--format", required=True, choices=["verl", "trl", "openrlhf", "hf"], help="the trainer's format")
    ex.add_argument("--to", required=True, metavar="DIR", help="the folder to write (replaced whole with --force)")
    ex.add_argument("--selection", metavar="ID", help="export a `tasksieve select` selection instead of the learnable set")
    ex.add_argument("--run-id", help="whose learnable set (default: the latest run that sampled)")
    ex.add_argument("--split-by", choices=["none", "source", "domain"], default="none",
                    help="one split (file) per source or domain (default: one 'train' split)")
    ex.add_argument("--system-prompt", metavar="TEXT",
                    help="the system message of every prompt (default: the one curation sampled with, per domain; "
                         "'' for none)")
    ex.add_argument("--licenses", nargs="+", metavar="ID",
                    help="keep only tasks under these licence ids; 'commercial' keeps every licence that does not "
                         "forbid commercial use (rows without a licence are then left out)")
    ex.add_argument("--force", action="store_true", help="replace a non-empty --to")


def _vendor_and_setup_parsers(sub) -> None:
    v = sub.add_parser("validate", help="say whether a vendor delivery is acceptable under a profile, and why")
    v.add_argument("deliveries", nargs="+", metavar="DELIVERY", help="JSONL/Parquet files, datasets folders, or folders")
    v.add_argument("--against", nargs="+", action="extend", metavar="POOL",
                   help="the buyer's existing pool, checked for duplicates")
    v.add_argument("--profile", metavar="PROFILE", help="acceptance profile TOML (default: the bundled default.toml)")
    v.add_argument("--out", "-o", default="validation", metavar="DIR", help="output folder (default ./validation)")
    v.add_argument("--probe-model", metavar="M", help="probe difficulty with this HF model folder, or 'default'")
    v.add_argument("--probe-k", type=int, default=4, metavar="K", help="attempts per task for the probe (default 4)")
    v.add_argument("--config", "-c", metavar="FILE", help="run config TOML: the probe's [sampling] and [model] settings")
    v.add_argument("--no-data-docs", action="store_true", help="skip building the GX Data Docs")

    s = sub.add_parser("sample-data", help="write the bundled sample delivery")
    s.add_argument("out", metavar="OUT")

    sub.add_parser("prepare-model", help="convert the bundled SmolLM2-135M-Instruct GGUF to a cached HF folder")


def _quiet_and_level(quiet: bool, level: str | None) -> None:
    """--quiet and --log-level, in the environment (worker processes inherit
    them): the progress renderer (transforms/progress.py) and the log file
    (pipeline/logfile.py) read them."""
    from tasksieve.pipeline import logfile

    if quiet:
        os.environ["TASKSIEVE_QUIET"] = "1"  # transforms/progress.py's QUIET_ENV (not imported: it imports Beam)
    logfile.set_level(level)


def main(argv: list[str] | None = None) -> int:
    _offline_env()
    _arrow_allocator()
    _quiet_logging()
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.command not in ("run", "dedup") and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    console.set_verbose(args.verbose)
    _quiet_and_level(args.quiet, args.log_level)
    console.quiet_program_env()  # before anything imports torch or datasets
    try:
        return _main(args, extra)
    except KeyboardInterrupt:
        # Outside the sampling stage (which says what it saved itself).
        if args.command == "run":
            return _interrupted("interrupted; finished attempts, if any, are in the attempt cache; start the same "
                                "command again to resume")
        return _interrupted("interrupted; start the same command again")


def _main(args, extra: list[str]) -> int:
    handlers = {"sample-data": _sample_data, "report": _report, "validate": _validate, "select": _select,
                "export": _export,
                "prepare-model": _prepare_model}
    if args.command in ("report", "select", "export") and not os.path.lexists(args.out):
        _say(f"error: OUT not found: {args.out} (give the --out folder of a `tasksieve run`)")
        return 2  # a path given that does not exist: usage, as a missing --input is
    if args.command in handlers:
        return handlers[args.command](args)
    return _run_or_dedup(args, extra)


def _refused(path: str, flag: str) -> bool:
    from tasksieve.pipeline.out_guard import refusal  # a system or home folder as OUT: one line, exit 2

    return _said(refusal(path, flag)) is not None


def _disk_full(e: BaseException, folders: list, after: str = "") -> int | None:
    """Exit 6 and its one line when a full disk or quota is behind `e`."""
    from tasksieve.pipeline.out_guard import EXIT_DISK_FULL, disk_full_line

    return EXIT_DISK_FULL if _said(disk_full_line(e, folders, after)) is not None else None


def _said(message: str | None) -> str | None:
    if message:
        _say(f"error: {message}")
    return message


def _sample_data(args) -> int:
    from tasksieve.pipeline.sample_data import write_sample

    if _refused(args.out, "OUT"):
        return 2
    if os.path.exists(args.out) and not os.path.isdir(args.out):  # a file given where a folder goes: usage
        _say(f"error: cannot write the sample into {args.out}: Not a directory")
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

    from tasksieve.pipeline.report import ReportError, write_report

    if _refused(args.out, "OUT"):
        return 2
    from tasksieve.pipeline.logfile import attach

    if os.path.isdir(args.out) and not os.path.islink(args.out) and os.path.lexists(Path(args.out, "curation.duckdb")):
        attach(args.out)  # only into a run's folder: a mistyped OUT gains no file
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
    from tasksieve.pipeline.select_cmd import command

    return command(args)


def _export(args) -> int:
    from tasksieve.pipeline.export.command import command

    return command(args)


def _prepare_model(args) -> int:
    from tasksieve.pipeline.models import ensure_default_model

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
        from tasksieve.pipeline.preflight import UsageError
        from tasksieve.transforms.backends.http_transport import check_base_url

        why = check_base_url(args.base_url)
        if why:
            raise UsageError(f"--base-url: {why}")
    overrides = [(args.model, ("model", "path")), (args.sampling, ("sampling", "mode")),
                 (args.backend, ("model", "backend")), (args.base_url, ("model", "openai", "base_url")),
                 (args.attempt_cache, ("attempt_cache",)), (getattr(args, "graded", None), ("judge", "graded"))]
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

    from tasksieve.pipeline.execute import RunRefused
    from tasksieve.pipeline.outputs import AccountingError
    from tasksieve.pipeline.preflight import RunError, RunInterrupted, RunStopped, UsageError
    from tasksieve.pipeline.run import dedup, run
    from tasksieve.schemas.config import ConfigError

    from tasksieve.pipeline.safe_fs import NotAFolder

    command = dedup if args.command == "dedup" else run
    cfg = None
    try:
        cfg = _config_from_args(args)
        command(args.input, args.out, cfg, args.runner, extra, config_path=args.config,
                rates_path=args.rates, dask_address=args.dask_address, dask_workers=args.dask_workers,
                force=args.force)
    except UsageError as e:
        _say(f"error: {e}")
        return 2
    except ConfigError as e:  # a bad --config (or -k, --dask-workers): usage, as in every command
        _say(f"error: {e}")
        return 2
    except (RunError, NotAFolder) as e:  # NotAFolder: a file where tasksieve keeps a folder
        _say(f"error: {e}")
        return 1
    except RunInterrupted as e:
        return _interrupted(str(e))
    except ValidationError as e:
        _say(f"error: {e.errors()[0]['msg']}")
        return 2
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
        cache = (cfg.attempt_cache or os.path.join(args.out, "attempt_cache")) if cfg and args.command == "run" \
            else None
        code = _disk_full(e, [("--out", args.out), ("attempt cache", cache)],
                          f"; the attempts already saved stay in {cache} and are re-used" if cache else "")
        if code is None:
            raise
        return code
    return 0


def duckdb_error():
    import duckdb

    return duckdb.Error


def _validate(args) -> int:
    from tasksieve.pipeline.validate_delivery import ProbeSpec, UsageError, load_run_config, validate_delivery

    try:
        run_config = load_run_config(args.config) if args.config else None
        probe = None
        if args.probe_model:
            probe = ProbeSpec(model=args.probe_model, k=args.probe_k, config=run_config or load_run_config(None))
        summary = validate_delivery(args.deliveries, args.out, against=args.against, profile_path=args.profile,
                                    probe=probe, data_docs=not args.no_data_docs,
                                    limits=run_config.limits if run_config else None)
    except UsageError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug, not a verdict: said in one line, with its own exit code
        if (code := _disk_full(e, [("--out", args.out)])) is not None:
            return code
        print(f"tasksieve: internal error: the delivery was not judged: {type(e).__name__}: "
              f"{' '.join(str(e).split())[:300]}", file=sys.stderr)
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
