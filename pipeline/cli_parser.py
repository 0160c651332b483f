"""The `tasksieve` command line's argument parsers: every command, its
options and their help (cli.py runs them). Usage errors are one line and
exit 2 (`Parser`); keep option names stable, scripts and the README use them."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit 2), not the usage block plus a line."""

    def error(self, message):
        self.exit(2, f"tasksieve: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="tasksieve", description="Curate learnable RL post-training tasks.")
    sub = p.add_subparsers(dest="command", required=True)
    _run_and_dedup_parsers(sub)
    _analyst_parsers(sub)
    _vendor_and_setup_parsers(sub)
    verbose_help = (
        "also show the libraries' own warnings and logs (torch, vLLM, Beam), which are filtered out otherwise"
    )
    p.add_argument("--verbose", action="store_true", help=verbose_help)
    for command in sub.choices.values():  # after the command too; SUPPRESS keeps one given before it
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help)
    return p


def _run_and_dedup_parsers(sub) -> None:
    r = sub.add_parser(
        "run",
        help="curate deliveries into a learnable set and analyst tables",
        epilog="Unrecognised --options are passed to Apache Beam (e.g. --direct_num_workers).",
    )
    r.add_argument(
        "--input",
        "-i",
        nargs="+",
        action="extend",
        required=True,
        metavar="PATH",
        help="JSONL/Parquet files, saved datasets folders, or folders of them",
    )
    r.add_argument("--out", "-o", required=True, metavar="DIR", help="output folder")
    r.add_argument("--config", "-c", metavar="FILE", help="TOML run config (see tasksieve.example.toml)")
    r.add_argument("--rates", metavar="FILE", help="TOML rates table (default: the bundled rates.default.toml)")
    r.add_argument("--model", metavar="DIR", help="Hugging Face model folder (default: bundled SmolLM2-135M-Instruct)")
    r.add_argument("--sampling", choices=["sequential", "fixed", "bayes"], help="sampling mode (default sequential)")
    r.add_argument(
        "--backend",
        choices=["vllm", "openai", "replay"],
        help="vllm (in-process engine, default), openai (an OpenAI-compatible server), "
        "replay (recorded attempts; see --replay)",
    )
    r.add_argument("--base-url", metavar="URL", help="with --backend openai: the server's /v1 URL")
    r.add_argument(
        "--replay",
        nargs="+",
        action="extend",
        metavar="PATH",
        help="recorded attempts to replay (sets --backend replay)",
    )
    r.add_argument(
        "--attempt-cache",
        metavar="DIR",
        help="where finished attempts persist and are re-used from (default OUT/attempt_cache)",
    )
    r.add_argument("--graded", metavar="FILE", help="rubric calibration labels keyed by task_id ([judge] graded)")
    r.add_argument("-k", type=int, help="most attempts per task (default 8)")
    r.add_argument(
        "--runner",
        help="Beam runner: inprocess (default: this process, no network), dask, "
        "or any Beam runner name with its options",
    )
    r.add_argument("--dask-address", metavar="ADDR", help="with --runner dask: an existing Dask scheduler")
    r.add_argument(
        "--dask-workers",
        type=int,
        default=2,
        metavar="N",
        help="with --runner dask and no address: a local cluster of N worker processes (default 2)",
    )

    for cmd in (r, d := sub.add_parser("dedup", help="only the dedup and decontamination stages: no model, seconds")):
        cmd.add_argument(
            "--force", action="store_true", help="write into a non-empty --out that holds no tasksieve run"
        )
        cmd.add_argument(
            "--dedup-against",
            nargs="+",
            action="extend",
            metavar="POOL",
            help="earlier stages' tasks (JSONL/Parquet/datasets folders or saved indexes): drop tasks "
            "that duplicate them; the pool is never modified",
        )
        cmd.add_argument("--save-index", metavar="DIR", help="save the hashed --dedup-against pool here for reuse")
    d.add_argument(
        "--input",
        "-i",
        nargs="+",
        action="extend",
        required=True,
        metavar="PATH",
        help="JSONL/Parquet files, saved datasets folders, or folders of them",
    )
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
    se.add_argument(
        "--by",
        nargs="+",
        choices=["cluster", "source", "domain", "difficulty"],
        help="breakdowns to print, selected vs pool (default: cluster source)",
    )
    se.add_argument("--dry-run", action="store_true", help="print what each budget level would buy; write no selection")
    se.add_argument("--run-id", help="whose model is current (default: the latest run that sampled)")
    se.add_argument("--config", "-c", metavar="FILE", help="run config TOML: its [select] section applies")
    ex = sub.add_parser(
        "export",
        help="write the learnable set (or a selection) for verl, TRL, OpenRLHF or as a Hugging Face datasets folder",
    )
    ex.add_argument("out", metavar="OUT", help="a run's output folder (holding curation.duckdb)")
    ex.add_argument("--format", required=True, choices=["verl", "trl", "openrlhf", "hf"], help="the trainer's format")
    ex.add_argument("--to", required=True, metavar="DIR", help="the folder to write (replaced whole with --force)")
    ex.add_argument(
        "--selection", metavar="ID", help="export a `tasksieve select` selection instead of the learnable set"
    )
    ex.add_argument("--run-id", help="whose learnable set (default: the latest run that sampled)")
    ex.add_argument(
        "--split-by",
        choices=["none", "source", "domain"],
        default="none",
        help="one split (file) per source or domain (default: one 'train' split)",
    )
    ex.add_argument(
        "--system-prompt",
        metavar="TEXT",
        help="the system message of every prompt (default: the one curation sampled with, per domain; '' for none)",
    )
    ex.add_argument(
        "--licenses",
        nargs="+",
        metavar="ID",
        help="keep only tasks under these licence ids; 'commercial' keeps every licence that does not "
        "forbid commercial use (rows without a licence are then left out)",
    )
    ex.add_argument("--force", action="store_true", help="replace a non-empty --to")


def _vendor_and_setup_parsers(sub) -> None:
    v = sub.add_parser("validate", help="say whether a vendor delivery is acceptable under a profile, and why")
    v.add_argument(
        "deliveries", nargs="+", metavar="DELIVERY", help="JSONL/Parquet files, datasets folders, or folders"
    )
    v.add_argument(
        "--against",
        nargs="+",
        action="extend",
        metavar="POOL",
        help="the buyer's existing pool, checked for duplicates",
    )
    v.add_argument("--profile", metavar="PROFILE", help="acceptance profile TOML (default: the bundled default.toml)")
    v.add_argument("--out", "-o", default="validation", metavar="DIR", help="output folder (default ./validation)")
    v.add_argument("--probe-model", metavar="M", help="probe difficulty with this HF model folder, or 'default'")
    v.add_argument("--probe-k", type=int, default=4, metavar="K", help="attempts per task for the probe (default 4)")
    v.add_argument(
        "--config", "-c", metavar="FILE", help="run config TOML: the probe's [sampling] and [model] settings"
    )
    v.add_argument("--no-data-docs", action="store_true", help="skip building the GX Data Docs")

    s = sub.add_parser("sample-data", help="write the bundled sample delivery")
    s.add_argument("out", metavar="OUT")

    sub.add_parser("prepare-model", help="convert the bundled SmolLM2-135M-Instruct GGUF to a cached HF folder")
