"""`tasksieve validate`: how a delivery's rows relate, per vendor (issue 43).

From the near-dedup judgement `run` and `dedup` make (the drops
duplicates_within already computed, same_problem.relation's relations) and
each task's template group:

- duplicates: rows dropped as copies of another row (exact or near);
- variants: rows dropped as `near_variant`, the same text with quantities
  edited;
- siblings: kept rows that share their template group with another kept
  row of the delivery (one template filled anew: two problems, counted
  because a buyer pays an expert for each).

A vendor whose rows are more than `max_variant_share` (half) variants is
flagged as padding, with the variant rows named. The check fails only then.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from tasksieve.pipeline.validate.delivery_checks import check, offender, where

MAX_VARIANT_SHARE = 0.5


def relations(
    tasks: list[dict], exact_dropped: list[dict], near_dropped: dict, max_variant_share: float = MAX_VARIANT_SHARE
) -> dict:
    """`tasks`: the delivery's valid rows (with content_hash and
    template_group); `exact_dropped`: duplicates_within's exact offenders;
    `near_dropped`: its near-dedup drops by where (duplicates_within's
    near_out)."""
    rows = Counter(t["source"] for t in tasks)
    by_where = {where(t): t for t in tasks}
    dup, var = Counter(), Counter()
    variant_rows: dict = defaultdict(list)
    gone = set()
    for o in exact_dropped:
        t = by_where.get(o["where"])
        if t is not None:
            dup[t["source"]] += 1
            gone.add(o["where"])
    for loc, d in near_dropped.items():
        gone.add(loc)
        if d.get("drop_reason") == "near_variant":
            var[d["source"]] += 1
            ev = json.loads(d.get("drop_detail") or "{}")
            variant_rows[d["source"]].append((d["task_id"], loc, ev.get("variant_of"), ev.get("edited")))
        else:
            dup[d["source"]] += 1
    groups: dict = defaultdict(list)
    for t in tasks:
        if where(t) not in gone and t.get("template_group"):
            groups[t["template_group"]].append(t)
    sib = Counter()
    for members in groups.values():
        if len(members) > 1:
            for t in members:
                sib[t["source"]] += 1
    per_vendor, offenders, padded = {}, [], []
    for source in sorted(rows):
        n = rows[source]
        share = round(var[source] / n, 4) if n else 0.0
        per_vendor[source] = {
            "rows": n,
            "duplicates": dup[source],
            "variants": var[source],
            "siblings": sib[source],
            "variant_share": share,
            "padding": share > max_variant_share,
        }
        if share > max_variant_share:
            padded.append(source)
            for tid, loc, of, edited in variant_rows[source]:
                offenders.append(
                    offender(
                        tid,
                        loc,
                        f"padding: a variant of {of} (quantities edited: {edited})",
                        vendor=source,
                        variant_of=of,
                    )
                )
    observed = max((v["variant_share"] for v in per_vendor.values()), default=0.0)
    return check(
        "relations",
        "per vendor: rows that are duplicates, variants (the same text with quantities "
        "edited) and template siblings (one template filled anew); a vendor more than "
        f"{max_variant_share:.0%} variants is padding",
        observed,
        f"variant share <= {max_variant_share}",
        not padded,
        offenders,
        per_vendor=per_vendor,
        padding=padded,
    )
