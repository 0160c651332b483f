"""The `tasksieve` command line.

    tasksieve run --input PATH... --out DIR [--config FILE] [--model DIR]
                  [--sampling fixed|sequential|bayes] [-k K] [--backend vllm|openai|replay]
                  [--base-url URL] [--replay PATH...] [--attempt-cache DIR]
                  [--dedup-against POOL...] [--save-index DIR] [--runner NAME] [beam options...]
    tasksieve dedup --input PATH... --out DIR [--dedup-against POOL...] [--save-index DIR] [--config FILE]
    tasksieve report OUT [--run-id ID]
    tasksieve validate DELIVERY... [--against POOL...] [--profile PROFILE] [--out DIR]
                       [--probe-model M --probe-k K] [--config FILE]
    tasksieve sample-data OUT
    tasksieve prepare-model

Exit codes (run, dedup): 0 success; 1 the run could not start (bad config, missing
input, model that does not load: one line on stderr); 2 usage error;
3 the row-accounting check failed; 4 the run stopped mid-way (the model
server went away): finished attempts are saved, the same command resumes.
Exit codes (validate): 0 the delivery is acceptable; 1 it is not;
2 usage error (missing file, bad profile: one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys


def _offline_env() -> None:
    # No hub, ever: models and datasets come from disk or installed packages.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tasksieve", description="Curate learnable RL post-training tasks.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="curate deliveries into a learnable set and analyst tables",
                       epilog="Unrecognised --options are passed to Apache Beam (e.g. --direct_num_workers).")
    r.add_argument("--input", "-i", nargs="+", required=True, metavar="PATH",
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
    r.add_argument("--replay", nargs="+", metavar="PATH", help="recorded attempts to replay (sets --backend replay)")
    r.add_argument("--attempt-cache", metavar="DIR",
                   help="where finished attempts persist and are re-used from (default OUT/attempt_cache)")
    r.add_argument("-k", type=int, help="most attempts per task (default 8)")
    r.add_argument("--runner", help="Beam runner: inprocess (default: this process, no network), dask, "
                                    "or any Beam runner name with its options")
    r.add_argument("--dask-address", metavar="ADDR", help="with --runner dask: an existing Dask scheduler")
    r.add_argument("--dask-workers", type=int, default=2, metavar="N",
                   help="with --runner dask and no address: a local cluster of N worker processes (default 2)")

    for cmd in (r, d := sub.add_parser("dedup", help="only the dedup and decontamination stages: no model, seconds")):
        cmd.add_argument("--dedup-against", nargs="+", metavar="POOL",
                         help="earlier stages' tasks (JSONL/Parquet/datasets folders or saved indexes): drop tasks "
                              "that duplicate them; the pool is never modified")
        cmd.add_argument("--save-index", metavar="DIR", help="save the hashed --dedup-against pool here for reuse")
    d.add_argument("--input", "-i", nargs="+", required=True, metavar="PATH",
                   help="JSONL/Parquet files, saved datasets folders, or folders of them")
    d.add_argument("--out", "-o", required=True, metavar="DIR", help="output folder")
    d.add_argument("--config", "-c", metavar="FILE", help="TOML run config ([dedup] and [decontam] apply)")
    d.add_argument("--rates", metavar="FILE", help="TOML rates table (expert costs of what is dropped)")
    d.add_argument("--runner", help="Beam runner (default inprocess)")
    d.add_argument("--dask-address", metavar="ADDR", help="with --runner dask: an existing Dask scheduler")
    d.add_argument("--dask-workers", type=int, default=2, metavar="N", help="with --runner dask: local workers")

    rp = sub.add_parser("report", help="print the headline tables and write OUT/report.html")
    rp.add_argument("out", metavar="OUT", help="a run's output folder (holding curation.duckdb)")
    rp.add_argument("--run-id", help="which run (default: the latest in the database)")
    v = sub.add_parser("validate", help="say whether a vendor delivery is acceptable under a profile, and why")
    v.add_argument("deliveries", nargs="+", metavar="DELIVERY", help="JSONL/Parquet files, datasets folders, or folders")
    v.add_argument("--against", nargs="+", metavar="POOL", help="the buyer's existing pool, checked for duplicates")
    v.add_argument("--profile", metavar="PROFILE", help="acceptance profile TOML (default: the bundled default.toml)")
    v.add_argument("--out", "-o", default="validation", metavar="DIR", help="output folder (default ./validation)")
    v.add_argument("--probe-model", metavar="M", help="probe difficulty with this HF model folder, or 'default'")
    v.add_argument("--probe-k", type=int, default=4, metavar="K", help="attempts per task for the probe (default 4)")
    v.add_argument("--config", "-c", metavar="FILE", help="run config TOML: the probe's [sampling] and [model] settings")
    v.add_argument("--no-data-docs", action="store_true", help="skip building the GX Data Docs")

    s = sub.add_parser("sample-data", help="write the bundled sample delivery")
    s.add_argument("out", metavar="OUT")

    sub.add_parser("prepare-model", help="convert the bundled SmolLM2-135M-Instruct GGUF to a cached HF folder")
    return p


def main(argv: list[str] | None = None) -> int:
    _offline_env()
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.command not in ("run", "dedup") and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")

    if args.command == "sample-data":
        from tasksieve.pipeline.sample_data import write_sample

        for line in write_sample(args.out):
            print(line)
        return 0

    if args.command == "report":
        from pathlib import Path

        from tasksieve.pipeline.report import ReportError, write_report

        try:
            path, text = write_report(Path(args.out), args.run_id)
        except ReportError as e:
            print(f"tasksieve: error: {e}", file=sys.stderr)
            return 1
        print(text)
        print(f"\nreport: {path}")
        return 0

    if args.command == "validate":
        return _validate(args)

    if args.command == "prepare-model":
        from tasksieve.pipeline.models import ensure_default_model

        print(ensure_default_model())
        return 0

    from tasksieve.pipeline.outputs import AccountingError
    from pydantic import ValidationError

    from tasksieve.pipeline.run import RunError, RunStopped, run
    from tasksieve.schemas.config import ConfigError, load_config

    try:
        cfg = load_config(args.config)
        if args.dedup_against:
            cfg.dedup.against = list(args.dedup_against)
        if args.save_index:
            cfg.dedup.save_index = args.save_index
        if args.dask_workers < 1:
            raise ConfigError("--dask-workers must be at least 1")
        if args.command == "dedup":
            from tasksieve.pipeline.dedup_run import dedup

            dedup(args.input, args.out, cfg, args.runner, extra, config_path=args.config, rates_path=args.rates,
                  dask_address=args.dask_address, dask_workers=args.dask_workers)
            return 0
        if args.model:
            cfg.model.path = args.model
        if args.sampling:
            cfg.sampling.mode = args.sampling
        if args.replay:
            cfg.model.backend, cfg.model.replay_paths = "replay", args.replay
        if args.backend:
            cfg.model.backend = args.backend
        if args.base_url:
            cfg.model.openai.base_url = args.base_url
        if args.attempt_cache:
            cfg.attempt_cache = args.attempt_cache
        # Overrides are validated like the file (replay without paths, ...).
        cfg = type(cfg).model_validate(cfg.model_dump())
        if args.k is not None:
            if args.k < 1:
                raise ConfigError("-k must be at least 1")
            cfg.sampling.k = args.k
        run(args.input, args.out, cfg, args.runner, extra, config_path=args.config, rates_path=args.rates,
            dask_address=args.dask_address, dask_workers=args.dask_workers)
    except (ConfigError, RunError) as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return 1
    except ValidationError as e:
        print(f"tasksieve: error: {e.errors()[0]['msg']}", file=sys.stderr)
        return 1
    except RunStopped as e:
        print(f"tasksieve: STOPPED: {e}", file=sys.stderr)
        return 4
    except AccountingError as e:
        print(f"tasksieve: ACCOUNTING FAILED: {e}", file=sys.stderr)
        return 3
    return 0


def _validate(args) -> int:
    from tasksieve.pipeline.validate_delivery import ProbeSpec, UsageError, load_run_config, validate_delivery

    try:
        probe = None
        if args.probe_model:
            probe = ProbeSpec(model=args.probe_model, k=args.probe_k, config=load_run_config(args.config))
        summary = validate_delivery(args.deliveries, args.out, against=args.against, profile_path=args.profile,
                                    probe=probe, data_docs=not args.no_data_docs)
    except UsageError as e:
        print(f"tasksieve: error: {e}", file=sys.stderr)
        return 2
    return 0 if summary["acceptable"] else 1


if __name__ == "__main__":
    sys.exit(main())
