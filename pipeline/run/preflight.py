"""Pre-flight: everything that can fail cheaply, resolved before any stage
runs, into one frozen `RunContext` that the driver executes.

Order matters for money: config, inputs, output folder, runner, model and
sandbox are all checked before the first attempt is generated, and each
failure is one line (`RunError`; `UsageError` for a command line tasksieve
cannot use). `tasksieve validate` imports its shared checks from here.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from tasksieve.pipeline.run.errors import RunError, UsageError
from tasksieve.pipeline.run.folders import check_writable_folder, refuse_inside_inputs, refuse_unsafe_folder
from tasksieve.pipeline.setup.models import DEFAULT_MODEL_ID, ensure_default_model
from tasksieve.pipeline.outputs.safe_fs import NotAFolder, real_subdir
from tasksieve.schemas.config import RunConfig, config_warnings
from tasksieve.schemas.rates import Rates, load_rates
from tasksieve.transforms.backends.base import Backend, ModelLoadError
from tasksieve.transforms.backends.factory import get_backend
from tasksieve.transforms.dedup.minhash import params_from_config
from tasksieve.transforms.dedup.pool_index import PoolIndexError, build_index, is_index, load_meta
from tasksieve.transforms.progress import say, warn
from tasksieve.transforms.read import expand_inputs
from tasksieve.transforms.sample.stage import SamplePlan

IN_PROCESS = "inprocess"
DASK = "dask"
KNOWN_RUNNERS = (IN_PROCESS, DASK)


def prepare_pools(cfg: RunConfig, work_dir: Path) -> tuple[str, ...]:
    """Saved indexes for `dedup.against`: prebuilt ones are checked against
    the run's MinHash parameters; raw pool files are hashed once into
    `dedup.save_index` (kept for reuse) or a scratch folder in `work_dir`."""
    d = cfg.dedup
    if not d.against:
        if d.save_index:
            raise UsageError("--save-index needs --dedup-against (the pool to index)")
        return ()
    params = params_from_config(d)
    indexes, raw = [], []
    try:
        for path in d.against:
            if is_index(path):
                meta = load_meta(path, params)
                say(f"reference pool: index {path} ({meta['rows']} tasks)")
                indexes.append(str(path))
            else:
                raw.append(path)
        if raw:
            try:
                expand_inputs(raw)
            except Exception as e:
                raise UsageError(f"--dedup-against: {e}") from None
            target = Path(d.save_index) if d.save_index else work_dir / "pool_index"
            say(f"reference pool: hashing {len(raw)} path(s) into {target} ...")
            t0 = time.perf_counter()
            meta = build_index(raw, params, target)
            say(
                f"reference pool: {meta['rows']} tasks indexed in {time.perf_counter() - t0:.1f}s"
                + (f" ({meta['unusable']} rows without a prompt skipped)" if meta["unusable"] else "")
            )
            indexes.append(str(target))
    except PoolIndexError as e:
        raise RunError(str(e)) from None
    return tuple(indexes)


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def resolve_model(cfg: RunConfig) -> tuple[str | None, str]:
    """(model folder, model_id as name@revision). For a server or replayed
    attempts there is no folder; set model.model_id to name the exact model
    version, since the attempt cache is keyed by it."""
    if cfg.model.backend == "openai":
        from tasksieve.transforms.backends.openai import served_model

        try:
            served = served_model(cfg.model.openai)
        except ModelLoadError as e:
            raise RunError(str(e)) from None
        return None, cfg.model.model_id or f"{served}@{urlparse(cfg.model.openai.base_url).netloc}"
    if cfg.model.backend == "replay":
        return None, cfg.model.model_id or "replay@" + hashlib.sha256(
            json.dumps(sorted(cfg.model.replay_paths)).encode()
        ).hexdigest()[:12]
    if cfg.model.path is None:
        try:
            path = ensure_default_model()
        except FileNotFoundError as e:
            raise RunError(str(e)) from None
        return str(path), cfg.model.model_id or DEFAULT_MODEL_ID
    path = Path(cfg.model.path)
    if not (path / "config.json").is_file():
        raise RunError(f"model path {path} is not a Hugging Face model folder (no config.json)")
    if cfg.model.model_id:
        return str(path), cfg.model.model_id
    # No revision given: fingerprint the folder (config + file names and sizes).
    h = hashlib.sha256((path / "config.json").read_bytes())
    for f in sorted(path.iterdir()):
        if f.is_file():
            h.update(f"{f.name}:{f.stat().st_size}".encode())
    return str(path), f"{path.name}@{h.hexdigest()[:12]}"


def make_plan(cfg: RunConfig, run_id: str, model_id: str, cache_dir: str | None = None) -> SamplePlan:
    """The sampling stage's plan: the run's config sections, keyed for the cache."""
    return SamplePlan(
        run_id=run_id,
        model_id=model_id,
        sampler_key=cfg.sampling.sampler_key(),
        sampling=cfg.sampling,
        band=cfg.band,
        verify=cfg.verify,
        cache_dir=cache_dir,
        judge=cfg.judge,
        graded=_graded_file(cfg),
    )


def _graded_file(cfg: RunConfig) -> dict | None:
    """The labels of [judge] graded (--graded), read now: a file that cannot
    be used fails the run before anything is spent."""
    if not cfg.judge.graded:
        return None
    from tasksieve.transforms.verify.judge.labels import GradedFileError, load_graded_file

    try:
        return load_graded_file(cfg.judge.graded)
    except GradedFileError as e:  # a file given that cannot be used: usage (exit 2)
        raise UsageError(str(e)) from None


def judge_factory_for(cfg: RunConfig, judge_factory: Callable[[], Backend] | None) -> Callable[[], Backend] | None:
    """The rubric judge's factory: the one given (tests), a server
    (`[judge] backend = "openai"`), a model of its own from `[judge] path`,
    or None: the sampling engine judges. The judge samples with [sampling]'s
    settings, at `[judge] temperature` when set."""
    if judge_factory is not None:
        return judge_factory
    judge = cfg.judge
    sampling = (
        cfg.sampling
        if judge.temperature is None
        else cfg.sampling.model_copy(update={"temperature": judge.temperature})
    )
    if judge.backend == "openai":
        # The sampler's own OpenAI client and retries (backends/openai.py), pointed at the judge's server.
        judge_id = judge.model_id or f"{judge.openai.model or 'served'}@{judge.openai.base_url}"
        factory = functools.partial(
            get_backend,
            None,
            judge_id,
            sampling,
            cfg.model.model_copy(update={"backend": "openai", "openai": judge.openai}),
        )
        factory.model_id = judge_id
        return factory
    if judge.path is None:
        return None
    path = Path(judge.path)
    if not (path / "config.json").is_file():
        raise RunError(f"judge path {path} is not a Hugging Face model folder (no config.json)")
    judge_id = judge.model_id or f"{path.name}@judge"
    # A local vLLM model whatever backend samples.
    factory = functools.partial(
        get_backend, str(path), judge_id, sampling, cfg.model.model_copy(update={"backend": "vllm"})
    )
    factory.model_id = judge_id  # named without loading it
    return factory


def _beam_option_parser():
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    parser = _BeamArgumentParser(allow_abbrev=False)
    seen = {}
    for cls in PipelineOptions.__subclasses__():
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        cls._add_argparse_args(parser)  # as PipelineOptions.get_all_options does
    return parser


def check_runner_and_flags(runner: str | None, beam_args: list[str]) -> None:
    """Before any work: the runner exists, and every option tasksieve did not
    take is one Beam knows (Beam itself would drop an unknown one with a
    warning, and a typo such as --dedup-agianst would silently not apply)."""
    if runner == DASK:
        import importlib

        try:
            importlib.import_module("distributed")
            importlib.import_module("apache_beam.runners.dask.dask_runner")  # registers the Dask options
        except ImportError as e:
            raise RunError(f"--runner dask needs dask[distributed]: {e}") from None
    elif runner not in (None, IN_PROCESS):
        from apache_beam.runners.runner import create_runner

        try:
            create_runner(runner)
        except ImportError as e:
            raise RunError(f"--runner {runner} is not available here: {' '.join(str(e).split())[:200]}") from None
        except Exception:
            raise UsageError(
                f"unknown --runner {runner!r}: use {IN_PROCESS} (the default), {DASK}, or a Beam runner "
                "such as DirectRunner, FlinkRunner, SparkRunner or DataflowRunner"
            ) from None
    if not beam_args:
        return
    parser = _beam_option_parser()
    _, unknown = parser.parse_known_args(beam_args)
    if unknown:
        flag = next((a for a in unknown if a.startswith("-")), unknown[0])
        known = [o for a in parser._actions for o in a.option_strings]
        close = difflib.get_close_matches(flag.split("=", 1)[0], known + TASKSIEVE_FLAGS, n=1)
        raise UsageError(
            f"unrecognized argument {flag!r}: neither a tasksieve option nor an Apache Beam "
            "pipeline option" + (f" (did you mean {close[0]}?)" if close else "")
        )


# The command line's own options, for "did you mean" (cli.py is the source).
TASKSIEVE_FLAGS = [
    "--input",
    "--out",
    "--config",
    "--rates",
    "--model",
    "--sampling",
    "--backend",
    "--base-url",
    "--replay",
    "--attempt-cache",
    "--runner",
    "--dask-address",
    "--dask-workers",
    "--dedup-against",
    "--save-index",
    "--graded",
]


def _sandbox_preflight(cfg: RunConfig) -> str:
    """The code sandbox's one-line description for the summary. A mode named
    explicitly (bwrap, rlimit) that is not usable fails the run now, not on
    every code attempt; under `auto` with no safe sandbox, code tasks are
    dropped at verifier_sanity (no_safe_sandbox) and the summary says so."""
    from tasksieve.transforms.verify.sandbox import runner as sandbox

    if cfg.verify.sandbox in ("bwrap", "rlimit"):
        try:
            sandbox.resolve_mode(cfg.verify.sandbox)
        except sandbox.NoSafeSandbox as e:
            raise RunError(f"sandbox mode {cfg.verify.sandbox!r} is not usable here: {e}") from None
    return sandbox.describe(cfg.verify.sandbox)


def bwrap_works() -> bool:
    from tasksieve.transforms.verify.sandbox import runner as sandbox

    try:
        return sandbox.resolve_mode("bwrap") == "bwrap"
    except sandbox.NoSafeSandbox:
        return False


def warn_about_config(cfg: RunConfig) -> tuple[str, ...]:
    """schemas/config.config_warnings, each printed as one line now; the
    run records them (runs.warnings)."""
    found = tuple(config_warnings(cfg, bwrap_works))
    for line in found:
        warn(line)
    return found


@dataclass(frozen=True)
class Invocation:
    """How a command was called, beyond its inputs, output folder and config."""

    runner: str | None = None
    beam_args: tuple[str, ...] = ()
    config_path: str | None = None
    rates_path: str | None = None
    dask_address: str | None = None
    dask_workers: int = 2


@dataclass(frozen=True)
class RunContext:
    """Everything a command resolved before its graph runs. Frozen: neither
    the graph nor `finish` can change what the run was started with."""

    command: str  # "run" or "dedup"
    run_id: str
    paths: tuple[str, ...]
    out: Path
    cfg: RunConfig
    rates: Rates
    how: Invocation
    pools: tuple[str, ...] = ()
    # `run` only: the model, the sampling plan, the attempt cache, the engines.
    model_id: str = ""
    plan: SamplePlan | None = None
    cache_dir: str | None = None
    backend_factory: Callable[[], Backend] | None = None
    judge_factory: Callable[[], Backend] | None = None
    sandbox_note: str | None = None
    # Suspicious settings (schemas/config.config_warnings), recorded in runs.warnings.
    warnings: tuple[str, ...] = ()
    # Where sentence embeddings persist across runs (None: nowhere).
    embedding_cache: str | None = None


def check_command(command: str, inputs: list[str], cfg: RunConfig, how: Invocation) -> None:
    """The checks that need no output folder: runner, Beam flags, and no
    folder tasksieve writes inside an input folder."""
    check_runner_and_flags(how.runner, list(how.beam_args))
    if command == "run":
        refuse_inside_inputs(cfg.attempt_cache, inputs, "--attempt-cache")
        refuse_unsafe_folder(cfg.attempt_cache, "--attempt-cache")
    if cfg.embedding_cache not in (None, "off"):
        refuse_inside_inputs(cfg.embedding_cache, inputs, "embedding_cache")
        refuse_unsafe_folder(cfg.embedding_cache, "embedding_cache")
    refuse_inside_inputs(cfg.dedup.save_index, inputs, "--save-index")
    refuse_unsafe_folder(cfg.dedup.save_index, "--save-index")


def prepare_dedup(paths: list[str], out: Path, cfg: RunConfig, how: Invocation, staging: Path) -> RunContext:
    """`tasksieve dedup`: rates and reference pools (hashed into `staging`,
    the run's private folder); no model."""
    run_id = new_run_id()
    rates = load_rates(how.rates_path or cfg.rates)
    pools = prepare_pools(cfg, staging)
    return RunContext(
        command="dedup",
        run_id=run_id,
        paths=tuple(paths),
        out=out,
        cfg=cfg,
        rates=rates,
        how=how,
        pools=pools,
        warnings=warn_about_config(cfg),
        embedding_cache=_embedding_cache(cfg, out),
    )


def _embedding_cache(cfg: RunConfig, out: Path) -> str | None:
    """The encoder's folder in the embedding cache (the configured folder,
    else tasksieve's folder in OUT), made a real folder as the attempt
    cache's are (a link planted there is removed); None for "off"."""
    if cfg.embedding_cache == "off":
        return None
    from tasksieve.transforms.same_problem.embed import CACHE_FOLDER

    if cfg.embedding_cache:
        check_writable_folder(Path(cfg.embedding_cache), "embedding_cache")
    root = Path(cfg.embedding_cache) if cfg.embedding_cache else out / "embedding_cache"
    try:
        if not cfg.embedding_cache:
            real_subdir(out, "embedding_cache", mode=0o700)
        return str(real_subdir(root, CACHE_FOLDER, mode=0o700))
    except (NotAFolder, OSError) as e:
        raise RunError(f"embedding cache {root} is not a writable folder: {e.strerror or e}") from None


def _cache_dir(cfg: RunConfig, out: Path, scripted: bool) -> str | None:
    """Where finished attempts persist. Replayed attempts were generated
    elsewhere: nothing to cache (unless a test scripts the backend)."""
    if cfg.model.backend == "replay" and not scripted:
        return None
    if not cfg.attempt_cache:
        # The default cache is tasksieve's folder in OUT: a link planted in
        # its place is removed, so no attempt is written through it.
        try:
            real_subdir(out, "attempt_cache")
        except (NotAFolder, OSError) as e:
            raise RunError(
                f"attempt cache {out / 'attempt_cache'} is not a writable folder: {e.strerror or e}"
            ) from None
    cache_dir = str(Path(cfg.attempt_cache) if cfg.attempt_cache else out / "attempt_cache")
    check_writable_folder(Path(cache_dir), "--attempt-cache" if cfg.attempt_cache else "attempt cache")
    try:  # the folder the cache marks finished runs in: a real one, never a planted link's target
        real_subdir(Path(cache_dir), "_finished")
    except OSError as e:
        raise RunError(f"attempt cache {cache_dir} is not usable: {e.strerror or e}") from None
    return cache_dir


def _sampling_engine(cfg: RunConfig, backend_factory: Callable[[], Backend] | None) -> tuple[Callable, str]:
    """(backend factory, model_id). A given factory (tests) may name its model
    without loading it: the driver of a cluster run must not load an engine."""
    if backend_factory is None:
        model_path, model_id = resolve_model(cfg)
        return functools.partial(get_backend, model_path, model_id, cfg.sampling, cfg.model), model_id
    return backend_factory, getattr(backend_factory, "model_id", None) or backend_factory().model_id


def _load_engine(factory: Callable, model_id: str) -> None:
    """In process, the engine is loaded now: a model that does not load fails
    before any stage runs, and is loaded once."""
    say(f"loading model {model_id} ...")
    try:
        factory()
    except ModelLoadError as e:
        raise RunError(str(e)) from None


def prepare_run(
    paths: list[str],
    out: Path,
    cfg: RunConfig,
    how: Invocation,
    backend_factory: Callable[[], Backend] | None = None,
    judge_factory: Callable[[], Backend] | None = None,
    *,
    staging: Path,
) -> RunContext:
    """`tasksieve run`: the cache, rates, model, sandbox, judge and pools, in
    the order that fails cheapest first."""
    run_id = new_run_id()
    cache_dir = _cache_dir(cfg, out, backend_factory is not None)
    rates = load_rates(how.rates_path or cfg.rates)
    factory, model_id = _sampling_engine(cfg, backend_factory)
    rates.for_model(model_id)  # a model without a price fails now, not after sampling
    sandbox_note = _sandbox_preflight(cfg)
    warnings = warn_about_config(cfg)
    judge_factory = judge_factory_for(cfg, judge_factory)
    if judge_factory is not None:
        judge_id = getattr(judge_factory, "model_id", None) or cfg.judge.model_id or judge_factory().model_id
        rates.for_model(judge_id)  # the judge's tokens are priced too
    plan = make_plan(cfg, run_id, model_id, cache_dir)
    if cfg.sampling.mode == "predicted":
        from tasksieve.pipeline.outputs.output_set import visible

        plan = dataclasses.replace(plan, history_db=str(visible(out, "curation.duckdb")))
    pools = prepare_pools(cfg, staging)  # a bad pool fails before the model loads
    if how.runner in (None, IN_PROCESS):
        _load_engine(factory, model_id)
        if judge_factory is not None and cfg.judge.backend == "openai":
            _load_engine(judge_factory, judge_id)  # a judge server that does not answer fails now
    if how.runner == DASK and cfg.sampling.groups == 1:
        # One group per worker, or a single worker would do all the sampling.
        cfg = cfg.model_copy(update={"sampling": cfg.sampling.model_copy(update={"groups": how.dask_workers})})
    return RunContext(
        command="run",
        run_id=run_id,
        paths=tuple(paths),
        out=out,
        cfg=cfg,
        rates=rates,
        how=how,
        pools=pools,
        model_id=model_id,
        plan=plan,
        cache_dir=cache_dir,
        backend_factory=factory,
        judge_factory=judge_factory,
        sandbox_note=sandbox_note,
        warnings=warnings,
        embedding_cache=_embedding_cache(cfg, out),
    )
