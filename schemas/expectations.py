"""Field expectations for a vendor delivery, as a great-expectations suite.

The suite is built from the acceptance profile (schemas/profile.py), so the
buyer's thresholds and the checks that enforce them live in one place, next
to the other contracts. Each expectation carries `meta.check`, the summary
check it counts towards (schema, license, ranges, dates), and `meta.why`, a
sentence for the report.

GX validates a pandas DataFrame with one row per parsed record (see
`delivery_frame`). Not SQL: GX's SQL path does not work on DuckDB. The
context is ephemeral (in memory, nothing written but the Data Docs we ask
for) and analytics are switched off before GX is imported: no network.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from datetime import date, datetime, timedelta
from pathlib import Path

from tasksieve.schemas.profile import Profile
from tasksieve.schemas.records import DOMAINS
from tasksieve.schemas.records import REQUIRED_BY_DOMAIN, declared_domain

# Columns of the frame GX sees; its index is each row's "file:line".
TEXT_COLUMNS = (
    "task_id",
    "domain",
    "prompt",
    "answer",
    "tests",
    "entry_point",
    "reference_solution",
    "license",
    "created_at",
)
# ISO 8601 date, optionally with a time and a zone: 2026-10-01, 2026-10-01T09:00:00Z,
# 2026-10-01 09:00:00.123+02:00.
ISO_DATE = r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$"
_ISO = re.compile(ISO_DATE)

CHECKS = ("schema", "license", "ranges", "dates")


def _gx():
    # GX reads this at import; it would otherwise try to post usage events.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx

    return gx


def delivery_frame(raw_rows: list[dict]):
    """One DataFrame row per parsed record (unparseable rows have no fields
    to check; the contract check reports them). Text columns stay `object`
    with the values as delivered, so type expectations see a 5 where a
    string belongs; amounts are coerced to numbers for the range checks
    (a non-numeric amount is the contract check's to report)."""
    import pandas as pd

    recs = [r for r in raw_rows if r.get("record") is not None]
    cols: dict[str, list] = {}
    for name in TEXT_COLUMNS:
        cols[name] = [r["record"].get(name) for r in recs]
    # validate_row's defaults, so both judge the same row: no domain means math
    # when there is an answer; a numeric answer is its text.
    cols["domain"] = [declared_domain(r["record"]) for r in recs]
    cols["answer"] = [str(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else a for a in cols["answer"]]
    cols["rubric"] = [_rubric_text(r["record"].get("rubric")) for r in recs]
    # How many criteria have text: a rubric of blanks cannot grade anything.
    cols["rubric_criteria"] = [_criteria(r["record"].get("rubric")) for r in recs]
    frame = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in cols.items()})
    for name in ("expert_minutes", "expert_cost_usd"):
        frame[name] = pd.to_numeric(pd.Series([r["record"].get(name) for r in recs], dtype=object), errors="coerce")
    # The calendar day of created_at, for the plausible-date range. GX's
    # between compares datetimes, not ISO strings (it raises on str bounds).
    frame["created_day"] = pd.to_datetime(
        pd.Series([v[:10] if isinstance(v, str) and _ISO.match(v) else None for v in cols["created_at"]], dtype=object),
        errors="coerce",
    )
    # Each row's file:line as the index, unnamed: GX gives an unnamed
    # index's values of the failing rows as one list (and Data Docs show
    # them), where with a named index or an index column it reads them row
    # by row with DataFrame.at, ~10 s on a 100k delivery whose every row
    # misses a license (bench/README.md, "Measured design choices"). Set last: the
    # columns above were aligned on the default index.
    frame.index = pd.Index([f"{r['source_file']}:{r['line']}" for r in recs], dtype=object)
    return frame


def _criteria(value):
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    return sum(1 for c in items if isinstance(c, str) and c.strip())


def _rubric_text(value):
    # GX cannot hash lists; the criteria travel as JSON text.
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else value


def build_suite(profile: Profile, name: str = "tasksieve_delivery"):
    """The expectation suite for `profile` (not yet added to a context)."""
    gx = _gx()
    suite = gx.ExpectationSuite(name=name)

    def add(exp_cls, check: str, why: str, **kwargs):
        suite.add_expectation(exp_cls(meta={"check": check, "why": why}, **kwargs))

    for part in (
        _schema_expectations,
        _required_by_domain,
        _length_expectations,
        _license_expectations,
        _range_expectations,
        _date_expectations,
    ):
        part(add, profile.fields)
    return suite


def _schema_expectations(add, f) -> None:
    """Schema and types."""
    import great_expectations.expectations as gxe

    for col in ("task_id", "prompt"):
        add(gxe.ExpectColumnValuesToNotBeNull, "schema", f"every row has a {col}", column=col)
    add(
        gxe.ExpectColumnValuesToBeInTypeList,
        "schema",
        "task_id is text (or an integer)",
        column="task_id",
        type_list=["str", "int"],
    )
    for col in ("prompt", "answer", "tests", "entry_point", "reference_solution", "license", "created_at"):
        add(gxe.ExpectColumnValuesToBeInTypeList, "schema", f"{col} is text", column=col, type_list=["str"])
    add(gxe.ExpectColumnValuesToBeUnique, "schema", "task_id is unique within the delivery", column="task_id")
    add(
        gxe.ExpectColumnValuesToNotBeNull,
        "schema",
        "every row names its domain (or has an answer: math)",
        column="domain",
    )
    add(
        gxe.ExpectColumnValuesToBeInSet,
        "schema",
        f"domain is one of {', '.join(f.allowed_domains)}",
        column="domain",
        value_set=list(f.allowed_domains),
    )


def _required_by_domain(add, f) -> None:
    """Required fields per domain: present and not blank."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    for domain in DOMAINS:
        for col in REQUIRED_BY_DOMAIN[domain]:
            cond = Column("domain") == domain
            add(
                gxe.ExpectColumnValuesToNotBeNull,
                "schema",
                f"a {domain} task has '{col}'",
                column=col,
                row_condition=cond,
                condition_parser="pandas",
            )
            if col == "rubric":
                add(
                    gxe.ExpectColumnValuesToBeBetween,
                    "schema",
                    "a rubric task has a criterion with text",
                    column="rubric_criteria",
                    min_value=1,
                    row_condition=cond,
                    condition_parser="pandas",
                )
            else:
                add(
                    gxe.ExpectColumnValuesToMatchRegex,
                    "schema",
                    f"a {domain} task's '{col}' is not blank",
                    column=col,
                    regex=r"\S",
                    row_condition=cond,
                    condition_parser="pandas",
                )


def _length_expectations(add, f) -> None:
    """Non-empty and bounded lengths."""
    import great_expectations.expectations as gxe

    add(
        gxe.ExpectColumnValueLengthsToBeBetween,
        "schema",
        f"prompt is {f.min_prompt_chars}..{f.max_prompt_chars} characters",
        column="prompt",
        min_value=f.min_prompt_chars,
        max_value=f.max_prompt_chars,
    )
    for col in ("answer", "tests", "reference_solution", "rubric"):
        add(
            gxe.ExpectColumnValueLengthsToBeBetween,
            "schema",
            f"{col} is at most {f.max_field_chars} characters",
            column=col,
            min_value=0,
            max_value=f.max_field_chars,
        )


def _license_expectations(add, f) -> None:
    import great_expectations.expectations as gxe

    if f.require_license:
        add(gxe.ExpectColumnValuesToNotBeNull, "license", "every row names its license", column="license")
    add(
        gxe.ExpectColumnValuesToBeInSet,
        "license",
        f"license is one of {', '.join(f.allowed_licenses)}",
        column="license",
        value_set=list(f.allowed_licenses),
    )


def _range_expectations(add, f) -> None:
    """Plausible effort and price."""
    import great_expectations.expectations as gxe

    add(
        gxe.ExpectColumnValuesToBeBetween,
        "ranges",
        f"expert_minutes is {f.expert_minutes_min:g}..{f.expert_minutes_max:g}",
        column="expert_minutes",
        min_value=f.expert_minutes_min,
        max_value=f.expert_minutes_max,
    )
    add(
        gxe.ExpectColumnValuesToBeBetween,
        "ranges",
        f"expert_cost_usd is {f.expert_cost_usd_min:g}..{f.expert_cost_usd_max:g}",
        column="expert_cost_usd",
        min_value=f.expert_cost_usd_min,
        max_value=f.expert_cost_usd_max,
    )


def _date_expectations(add, f) -> None:
    """Dates: ISO 8601, not before the profile's earliest day, not in the future."""
    import great_expectations.expectations as gxe

    earliest = datetime.combine(f.earliest_created_at, datetime.min.time())
    latest = datetime.combine(date.today() + timedelta(days=1), datetime.min.time())  # a day of slack for time zones
    add(
        gxe.ExpectColumnValuesToMatchRegex,
        "dates",
        "created_at is an ISO 8601 date",
        column="created_at",
        regex=ISO_DATE,
    )
    add(
        gxe.ExpectColumnValuesToBeBetween,
        "dates",
        f"created_at is between {f.earliest_created_at.isoformat()} and today",
        column="created_day",
        min_value=earliest,
        max_value=latest,
    )


def run_expectations(raw_rows: list[dict], profile: Profile, docs_dir: Path | None) -> dict:
    """Validate the delivery's parsed rows with GX.

    Returns {"results": [per expectation: expectation, column, check, why,
    success, unexpected_count, row_refs, error], "data_docs": {built, index,
    note}}. With `docs_dir`, GX's Data Docs are built there."""
    frame = delivery_frame(raw_rows)
    ctx, checkpoint = _checkpoint(profile)
    if len(frame) == 0:
        return {
            "results": [],
            "data_docs": {"built": False, "index": None, "note": "no parsed rows: nothing for GX to validate"},
        }
    run = checkpoint.run(batch_parameters={"dataframe": frame})
    results = [_result_row(r) for vr in run.run_results.values() for r in vr.results]
    if docs_dir is not None:
        docs_dir = Path(docs_dir).resolve()  # GX's filesystem store refuses a relative folder
        _build_inert_docs(ctx, docs_dir)
    return {"results": results, "data_docs": _docs_status(docs_dir)}


def _ephemeral_context():
    """A quiet in-memory GX context without the temp-dir docs site it makes
    of its own (we build ours where the user asked)."""
    gx = _gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.disable(logging.INFO)  # GX announces its temp docs folder at INFO: noise for a vendor
    try:
        ctx = gx.get_context(mode="ephemeral")
    finally:
        logging.disable(logging.NOTSET)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    for name, cfg in list((ctx.variables.data_docs_sites or {}).items()):
        base = (cfg.get("store_backend") or {}).get("base_directory")
        ctx.delete_data_docs_site(name)
        if base and Path(base).is_dir() and Path(base).parent == Path(tempfile.gettempdir()):
            shutil.rmtree(base, ignore_errors=True)
    return ctx


def _checkpoint(profile: Profile):
    """(context, checkpoint): the profile's suite over a whole-dataframe
    batch. No Data Docs action: the docs are built afterwards from inert
    copies of what GX stored (_build_inert_docs)."""
    gx = _gx()

    ctx = _ephemeral_context()
    suite = ctx.suites.add(build_suite(profile))
    batch_def = (
        ctx.data_sources.add_pandas("delivery")
        .add_dataframe_asset("rows")
        .add_batch_definition_whole_dataframe("whole_delivery")
    )
    vdef = ctx.validation_definitions.add(gx.ValidationDefinition(name="delivery", data=batch_def, suite=suite))
    return ctx, ctx.checkpoints.add(
        gx.Checkpoint(
            name="delivery",
            validation_definitions=[vdef],
            actions=[],
            # COMPLETE: GX names every offending row, not a sample, by its index
            # value, its file:line (delivery_frame).
            result_format={"result_format": "COMPLETE"},
        )
    )


# Data Docs and hostile deliveries. GX's renderer writes many values into its
# pages unescaped (table cells of unexpected values, list items, the row
# index, i.e. file names; only some template parameters are escaped), so a
# delivery's `license` of "<script>..." ran in a buyer's browser. GX's many
# rendering paths are not ours to patch one by one; instead GX never sees a
# character that HTML, an attribute or a script could act on: every string
# in what GX renders from (the stored validation result and suite) has
# < > & " ' ` replaced by look-alikes. The look-alikes survive escaping and
# non-escaping paths alike (no double-escaped "&amp;lt;"), and a reader sees
# the value's shape. The exact values are in summary.json and report.html.
INERT_CHARS = {"<": "\u2039", ">": "\u203a", "&": "\uff06", '"': "\uff02", "'": "\uff07", "`": "\uff40"}
_INERT = str.maketrans(INERT_CHARS)


def inert(value):
    """`value` with every string in it (dict keys too) made inert for HTML."""
    if isinstance(value, str):
        return value.translate(_INERT)
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [inert(v) for v in value]
    return value


def _build_inert_docs(ctx, docs_dir: Path) -> None:
    """Data Docs in `docs_dir`, rendered from inert copies of the stored
    suite and validation results (what GX's site builder reads)."""
    for store in (ctx.expectations_store, ctx.validation_results_store):
        backend = store._store_backend  # holds each object as its serialized JSON
        for key in backend.list_keys():
            if key == (".ge_store_backend_id",):
                continue
            value = backend.get(key)
            if not isinstance(value, str):  # fail closed: never render what could not be made inert
                raise RuntimeError(f"GX's {type(store).__name__} holds a {type(value).__name__}, not JSON text")
            backend.set(key, json.dumps(inert(json.loads(value))), overwrite=True)
    site = "tasksieve"
    ctx.add_data_docs_site(
        site_name=site,
        site_config={
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
        },
    )
    ctx.build_data_docs(site_names=[site])


def _result_row(r) -> dict:
    cfg = r.expectation_config
    index_list = r.result.get("unexpected_index_list") or []
    return {
        "expectation": cfg.type,
        "column": cfg.kwargs.get("column"),
        "check": cfg.meta.get("check"),
        "why": cfg.meta.get("why"),
        "success": bool(r.success),
        "unexpected_count": r.result.get("unexpected_count"),
        "row_refs": [i for i in index_list if isinstance(i, str)],  # the frame's index: file:line
        # GX could not evaluate it (a bad value type, say): a failure, with GX's reason.
        "error": _exception_message(r.exception_info),
    }


def _docs_status(docs_dir: Path | None) -> dict:
    if docs_dir is None:
        return {"built": False, "index": None, "note": "not requested"}
    index = Path(docs_dir) / "index.html"
    if index.is_file():
        return {
            "built": True,
            "index": str(index),
            "note": "built offline; its pages load Bootstrap, jQuery and fonts from public CDNs, "
            "so without a network they open unstyled (the content is all there); delivery values "
            "are shown with < > & \" ' ` replaced by look-alikes (\u2039 \u203a \uff06 \uff02 \uff07 "
            "\uff40) so that no value can act as markup; summary.json and report.html hold them exactly",
        }
    return {"built": False, "index": None, "note": "GX did not write Data Docs (no index.html)"}


def _exception_message(info) -> str | None:
    """GX's exception_info is flat, or keyed by metric id; either way the
    first raised exception's message, or None."""
    if not info:
        return None
    items = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for item in items:
        if item.get("raised_exception"):
            return str(item.get("exception_message") or "GX raised an exception")[:300]
    return None
