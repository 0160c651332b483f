"""`tasksieve validate`: is a vendor's delivery acceptable under a profile,
and why not?

Plain Python, no Beam graph: a delivery is small, and a vendor runs this on
a laptop before sending it. Everything that can fail cheaply (inputs,
profile, probe model) fails first, as a UsageError (exit 2). Then:

  read + Task contract -> hash -> GX field expectations -> duplicates
  (within, against the pool) -> contamination, with verifier sanity
  beside them -> optional difficulty probe -> summary.json, report.html, data_docs/,
  terminal table ending in the verdict.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from tasksieve import __version__
from tasksieve.pipeline.outputs.out_guard import Refused, refuse_dangerous, refuse_shared_folder
from tasksieve.pipeline.outputs.safe_fs import remove_entry, write_text_atomic
from tasksieve.pipeline.validate.report import render_html, render_table
from tasksieve.schemas.config import ConfigError, RunConfig
from tasksieve.schemas.profile import Profile, ProfileError, default_profile_path, load_profile
from tasksieve.pipeline.validate import delivery_checks as dc
from tasksieve.pipeline.validate.duplicate_checks import duplicates_against_pool, duplicates_within
from tasksieve.pipeline.validate.rubric_checks import rubric_check
from tasksieve.transforms.decontam.index import get_index, index_options
from tasksieve.transforms.dedup.minhash import params_from_config
from tasksieve.transforms.dedup.pool_index import pool_rows as index_rows
from tasksieve.transforms.normalize import with_hash
from tasksieve.pipeline.validate.relations_check import relations
from tasksieve.transforms.progress import Ticker, say
from tasksieve.transforms.read import InputError, expand_inputs
from tasksieve.transforms.same_problem.rules import rules_from_config
from tasksieve.transforms.verify.verifiers import VERIFIABLE

FIELD_CHECKS = {
    "schema": "rows unreadable, breaking the Task contract, or failing a field expectation "
    "(types, required fields per domain, lengths, unique task_id, allowed domain)",
    "license": "rows without an allowed license",
    "ranges": "rows with expert_minutes or expert_cost_usd outside the plausible range",
    "dates": "rows whose created_at is not an ISO 8601 date in the plausible range",
}

NOTES = [
    "Verifier sanity: the reference must pass, and every known reward hack (null answers, constants, "
    "number spraying, several boxed answers, always-equal objects, patched builtins, exiting before the "
    "asserts, forged verdicts, ...) must fail; each probe that passes is named. Code runs in the sandbox "
    "(attempt and tests in separate processes; no network, no host files, CPU/memory/time limits).",
    "Duplicates: exact after normalisation (Unicode NFKC, case, whitespace, punctuation spacing), and near "
    "copies by the pipeline's own judgement (MinHash on 5-character shingles; paraphrases: tasks stating the same "
    "quantities with close meaning, confirmed when their answers agree). Each names its evidence.",
    "Contamination: candidates by word n-grams, short items, in-order rewording and meaning, confirmed on what "
    "makes a problem (its numbers, its reference answer, for code the benchmark's own tests run in the sandbox); "
    "look-alikes that share only words or boilerplate are not counted.",
]


class UsageError(Exception):
    """Bad inputs or settings; one line for a person, exit 2."""


@dataclass
class ProbeSpec:
    model: str  # a Hugging Face model folder, or "default" for the bundled SmolLM2
    k: int
    config: RunConfig  # sampling and model settings (mode is forced to fixed, k to `k`)


def prepare(deliveries: list[str], against: list[str] | None, profile_path: str | None) -> tuple:
    """Resolve inputs and the profile, or raise UsageError."""
    try:
        paths = expand_inputs(deliveries)
        pool_paths = expand_inputs(against) if against else None
    except InputError as e:
        raise UsageError(str(e)) from None
    try:
        profile = load_profile(profile_path)
    except ProfileError as e:
        raise UsageError(str(e)) from None
    return paths, pool_paths, profile


def _probe_backend(spec: ProbeSpec):
    """(backend factory, model_id) for the probe; a model that is not there
    is a usage error, found before any check runs."""
    from tasksieve.pipeline.run.errors import RunError
    from tasksieve.pipeline.run.preflight import resolve_model
    from tasksieve.transforms.backends.factory import get_backend

    cfg = spec.config
    cfg.model.path = None if spec.model == "default" else spec.model
    try:
        model_path, model_id = resolve_model(cfg)
    except RunError as e:
        raise UsageError(str(e)) from None
    return functools.partial(get_backend, model_path, model_id, cfg.sampling, cfg.model), model_id


def validate_delivery(
    deliveries: list[str],
    out_dir: str | Path = "validation",
    against: list[str] | None = None,
    profile_path: str | None = None,
    probe: ProbeSpec | None = None,
    backend_factory: Callable | None = None,
    data_docs: bool = True,
    echo: bool = True,
    limits=None,
) -> dict:
    """Run every check and write the outputs; returns the summary dict.
    `backend_factory` replaces the probe's engine (tests use a scripted one);
    `limits`, a run config's [limits], sets the expert_minutes/expert_cost_usd
    bounds past which `run` quarantines (default: the run's defaults)."""
    paths, pool_paths, profile = prepare(deliveries, against, profile_path)
    if probe is not None:
        backend_factory = _prepare_probe(probe, backend_factory)
    out = _output_folder(out_dir, deliveries)
    if echo:
        from tasksieve.pipeline.outputs.logfile import attach

        attach(out)
    f = profile.fields
    amounts = (limits.max_expert_minutes, limits.max_expert_cost_usd) if limits is not None else None
    timed = _timed if echo else (lambda label, fn, *args: fn(*args))
    raws, tasks, contract_failures = timed("read", dc.read_delivery, paths, f.max_row_bytes, f.max_field_chars, amounts)
    tasks = [with_hash(t) for t in tasks]
    # The verifier sanity check, the longest, runs beside the field and
    # duplicate checks (in worker processes on a large delivery:
    # delivery_checks.sanity_verdicts); its result joins the others in order.
    sanity = _Beside(
        _sanity,
        tasks,
        profile.thresholds.max_broken_verifiers,
        Ticker("validate: verifier sanity", len(tasks), unit="tasks") if echo else None,
    )
    docs_tmp = Path(tempfile.mkdtemp(prefix=".data_docs.", dir=out)) if data_docs else None
    if docs_tmp is not None:
        os.chmod(docs_tmp, 0o755)
    try:
        gx = timed("field expectations (GX)", _run_gx, raws, profile, docs_tmp)
        if docs_tmp is not None:
            if gx["data_docs"].get("built"):
                from tasksieve.pipeline.validate.data_docs import make_offline

                make_offline(docs_tmp.resolve())  # in the private folder, before it is placed
            gx = _place_docs(out, docs_tmp, gx)
    finally:
        if docs_tmp is not None:
            remove_entry(docs_tmp)
    checks = timed("duplicates and contamination", _checks, raws, tasks, contract_failures, gx, pool_paths, profile)
    checks.append(sanity.result())
    if probe is not None:
        checks.append(_probe(tasks, checks, probe, backend_factory, profile.thresholds.min_learnable_share))
    summary = _summary(paths, raws, tasks, pool_paths, profile, profile_path, checks, gx)
    if probe is not None:
        from tasksieve.pipeline.run.preflight import bwrap_works
        from tasksieve.schemas.config import config_warnings

        summary["config_warnings"] = config_warnings(probe.config, bwrap_works)
        summary["notes"] += [f"Config warning: {w}" for w in summary["config_warnings"]]
    # Fresh temporary files renamed into place: a link planted at either
    # name is replaced, never written through.
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
    write_text_atomic(out / "report.html", render_html(summary))
    if echo:
        print(render_table(summary, out))
    return summary


def _timed(label: str, fn, *args):
    """fn(*args), saying on stderr how long it took (a vendor waits on it)."""
    t0 = time.perf_counter()
    out = fn(*args)
    say(f"  validate: {label} done in {time.perf_counter() - t0:.1f}s")
    return out


def _sanity(tasks: list[dict], max_n: int, ticker: Ticker | None) -> dict:
    check = dc.verifier_sanity(tasks, max_n, progress=ticker)
    if ticker is not None:
        ticker.done()
    return check


class _Beside:
    """fn(*args) in a daemon thread, its result (or its exception) from
    `result()`. A daemon: a Ctrl-C or an error in the main thread ends the
    run without waiting for it (an executor's thread would be joined)."""

    def __init__(self, fn, *args):
        self._out: dict = {}
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="beside", daemon=True)
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._out["value"] = fn(*args)
        except BaseException as e:  # handed to result(), in the main thread
            self._out["error"] = e

    def result(self):
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


def _prepare_probe(probe: ProbeSpec, backend_factory: Callable | None) -> Callable:
    """The probe samples a fixed k (shares must not depend on early stopping)."""
    if probe.k < 1:
        raise UsageError("--probe-k must be at least 1")
    probe.config.sampling.mode = "fixed"
    probe.config.sampling.k = probe.k
    if backend_factory is None:
        backend_factory, _ = _probe_backend(probe)
    return backend_factory


def _output_folder(out_dir: str | Path, deliveries: list[str]) -> Path:
    """The created output folder; never inside a delivery folder, or the next
    validation would read its summary as a delivery."""
    out = Path(out_dir)
    try:
        refuse_dangerous(out, "--out")
        refuse_shared_folder(out, "--out")  # docs/outputs.md, "Writing into a shared or pre-created folder"
    except Refused as e:
        raise UsageError(str(e)) from None
    real_out = Path(os.path.realpath(out))
    for d in deliveries:
        real_in = Path(os.path.realpath(d))
        if real_in.is_dir() and (real_out == real_in or real_in in real_out.parents):
            raise UsageError(
                f"--out {out} is inside the delivery folder {d}: the next validation would read its "
                "summary as a delivery; choose an output folder outside the delivery"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create output folder {out}: {e}") from None
    return out


def _place_docs(out: Path, built: Path, gx: dict) -> dict:
    """GX builds its Data Docs in a fresh private folder (GX writes a tree of
    files and would follow a link planted anywhere in an old one); it then
    replaces OUT/data_docs, whatever was there (a planted link is removed,
    not followed)."""
    final = out / "data_docs"
    remove_entry(final)
    os.rename(built, final)
    docs = dict(gx["data_docs"])
    if docs.get("index"):
        docs["index"] = str(docs["index"]).replace(str(built), str(final), 1)
    return dict(gx, data_docs=docs)


def _checks(raws: list, tasks: list[dict], contract_failures, gx: dict, pool_paths, profile: Profile) -> list[dict]:
    """Fields, duplicates within and against the pool and contamination
    (verifier sanity runs beside them): the judgement `run` and `dedup`
    make, on the delivery."""
    f, th = profile.fields, profile.thresholds
    checks = dc.field_checks(gx["results"], contract_failures, raws, th.max_schema_failures, FIELD_CHECKS)
    dedup, rules = _near_settings(profile)
    near_dropped: dict = {}
    within = duplicates_within(tasks, th.max_duplicate_rate, dedup, rules, near_out=near_dropped)
    checks.append(within)
    exact = [o for o in within["offenders"] if o.get("match") == "exact"]
    checks.append(relations(tasks, exact, near_dropped))
    pool = unusable = pool_rows = None
    if pool_paths is not None:
        pool, unusable = dc.read_pool(pool_paths, f.max_row_bytes, f.max_field_chars)
        pool_rows = list(index_rows(pool_paths, params_from_config(dedup), f.max_row_bytes, f.max_field_chars))
    checks.append(
        duplicates_against_pool(tasks, pool, unusable or 0, th.max_pool_overlap_rate, pool_rows, dedup, rules)
    )
    checks.append(_contamination(tasks, profile))
    checks.append(rubric_check(tasks, dc.check, dc.offender, dc.where))
    return checks


def _summary(paths, raws, tasks, pool_paths, profile: Profile, profile_path, checks: list[dict], gx: dict) -> dict:
    failed = [c["name"] for c in checks if c["status"] == "fail"]
    return {
        "verdict": "ACCEPTABLE" if not failed else "NOT ACCEPTABLE",
        "acceptable": not failed,
        "failed_checks": failed,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tasksieve_version": __version__,
        "delivery": {
            "inputs": paths,
            "rows_read": len(raws),
            "rows_parsed": sum(1 for r in raws if r.get("record") is not None),
            "valid_tasks": len(tasks),
            "domains": _count(t["domain"] for t in tasks),
        },
        "against": pool_paths,
        "profile": {"path": str(profile_path or default_profile_path()), **profile.model_dump(mode="json")},
        "checks": checks,
        "expectations": gx["results"],
        "data_docs": gx["data_docs"],
        "notes": NOTES + [f"Data Docs: {gx['data_docs']['note']}"],
    }


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _run_gx(raws: list[dict], profile: Profile, docs_dir: Path | None) -> dict:
    from tasksieve.schemas.expectations import run_expectations

    # pandas' and GX's warnings are noise in a vendor's terminal.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return run_expectations(raws, profile, docs_dir)
        except Exception as e:
            if docs_dir is None:
                raise
            # Data Docs are a convenience: if GX cannot build them, say why and validate without.
            res = run_expectations(raws, profile, None)
            res["data_docs"] = {
                "built": False,
                "index": None,
                "note": f"GX could not build Data Docs: {type(e).__name__}: {e}"[:300],
            }
            return res


def _near_settings(profile: Profile):
    """The profile's `[dedup]` section (the run config's) and the same-problem
    rules: validate judges duplicates as `run` and `dedup` do."""
    return profile.dedup, rules_from_config(profile.decontam, profile.dedup)


def _contamination(tasks: list[dict], profile: Profile) -> dict:
    d = profile.decontam
    try:
        index = get_index(d.ngram, list(d.benchmarks), list(d.extra_paths), **index_options(d))
    except (ValueError, OSError) as e:
        raise UsageError(f"profile decontam: {e}") from None
    return dc.contamination(
        tasks, index, list(d.benchmarks) + [Path(p).stem for p in d.extra_paths], profile.thresholds.max_contaminated
    )


def _probe(tasks: list[dict], checks: list[dict], probe: ProbeSpec, backend_factory, min_share: float) -> dict:
    """Probe the tasks a buyer would actually sample: verifiable, and not a
    duplicate, contaminated or broken (those fail their own checks)."""
    from tasksieve.pipeline.run.preflight import make_plan, new_run_id

    excluded = {
        o["where"]
        for c in checks
        if c["name"] in ("duplicates_within", "duplicates_against_pool", "contamination", "verifier_sanity")
        for o in c["offenders"]
    }
    eligible = [t for t in tasks if t["domain"] in VERIFIABLE and dc.where(t) not in excluded]
    backend = backend_factory()
    plan = make_plan(probe.config, "probe-" + new_run_id(), backend.model_id)
    return dc.learnable_share(eligible, backend, plan, min_share, not_probed=len(tasks) - len(eligible))


def load_run_config(path: str | None) -> RunConfig:
    from tasksieve.schemas.config import load_config

    try:
        cfg = load_config(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    if path is not None:
        from tasksieve.pipeline.run.preflight import warn_about_config

        warn_about_config(cfg)  # printed now; the probe's summary records them
    return cfg
