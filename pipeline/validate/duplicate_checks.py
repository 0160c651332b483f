"""The duplicate checks of `tasksieve validate`: duplicates within the
delivery and against earlier pools, judged by the pipeline's own exact and
near dedup (transforms/dedup/: the same rule, never restated here). Each
returns a check in delivery_checks.py's shape."""

from __future__ import annotations

import json
from collections import defaultdict

from tasksieve.pipeline.validate.delivery_checks import check, offender, rate, where
from tasksieve.transforms.dedup.exact import pick_survivor


def _near(tasks: list[dict], pool_rows: list[dict], within: bool, dedup, rules) -> dict:
    """{task_id-where: dropped row} of the pipeline's near-dedup judgement
    (dedup/near.py find_near_duplicates: MinHash + quantity-grouped
    meanings, confirmed by the same-problem rules)."""
    from tasksieve.transforms.batch.candidates import band_edges
    from tasksieve.transforms.dedup.near import find_near_duplicates
    from tasksieve.transforms.dedup.minhash import params_from_config

    out = {}
    for tag, row in find_near_duplicates(
        tasks,
        pool_rows,
        params_from_config(dedup),
        dedup.threshold,
        dedup.number_overlap,
        dedup.number_guard_below,
        dedup.semantic,
        rules,
        within=within,
        max_bucket_pairs=dedup.max_bucket_pairs,
        candidates=band_edges,
    ):
        if tag == "dropped":
            out[where(row)] = row
    return out


def _near_reason(d: dict, name_of) -> tuple[str, dict]:
    ev = json.loads(d["drop_detail"])
    gen = ev.get("generator", "minhash")
    if gen == "semantic":
        sp = ev.get("same_problem", {})
        how = f"same meaning (cosine {sp.get('cosine')}) and the same quantities" + (
            ", equivalent answers" if sp.get("answer", {}).get("equivalent") else ""
        )
    else:
        how = f"{ev.get('matched_similarity', ev.get('similarity'))} of its 5-character shingles shared"
    return how, ev


def duplicates_within(tasks: list[dict], max_rate: float, dedup=None, rules=None) -> dict:
    """Copies of another task of the delivery: exact (same normalised prompt
    + reference, the pipeline's hash and survivor rule) and, with `dedup`
    settings, near copies by the pipeline's near-dedup judgement (reworded,
    paraphrased; same evidence as `run`). Every copy but one counts."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        groups[t["content_hash"]].append(t)
    offenders, survivors = [], []
    for group in groups.values():
        if len(group) < 2:
            survivors.extend(group)
            continue
        keep, dropped = pick_survivor(group)
        survivors.append(keep)
        for d in dropped:
            offenders.append(
                offender(
                    d["task_id"],
                    where(d),
                    f"same prompt and reference as {keep['task_id']} ({where(keep)})",
                    duplicate_of=keep["task_id"],
                    duplicate_of_where=where(keep),
                    match="exact",
                )
            )
    near = 0
    if dedup is not None and dedup.near:
        by_key = {(t["source"], t["task_id"]): t for t in survivors}
        for loc, d in sorted(_near(survivors, [], True, dedup, rules).items()):
            how, ev = _near_reason(d, None)
            keep = by_key.get((ev["duplicate_of_source"], ev["duplicate_of"]))
            kw = where(keep) if keep else "?"
            offenders.append(
                offender(
                    d["task_id"],
                    loc,
                    f"near copy of {ev['duplicate_of']} ({kw}): {how}",
                    duplicate_of=ev["duplicate_of"],
                    duplicate_of_where=kw,
                    match="near",
                    evidence=ev,
                )
            )
            near += 1
    observed = rate(len(offenders), len(tasks))
    return check(
        "duplicates_within",
        "tasks repeating another task of this delivery (normalised prompt + reference, "
        "or the same problem reworded: the pipeline's near-dedup judgement)",
        observed,
        f"<= {max_rate}",
        observed <= max_rate,
        offenders,
        duplicates=len(offenders),
        exact=len(offenders) - near,
        near=near,
        valid_tasks=len(tasks),
    )


def duplicates_against_pool(
    tasks: list[dict],
    pool: dict | None,
    pool_unusable: int,
    max_rate: float,
    pool_rows: list[dict] | None = None,
    dedup=None,
    rules=None,
) -> dict:
    name, desc = "duplicates_against_pool", "tasks already in the buyer's pool (--against), exact or reworded"
    if pool is None:
        return check(name, desc, None, f"<= {max_rate}", None, [], why="no --against pool given")
    offenders = [
        offender(
            t["task_id"],
            where(t),
            f"already in the pool as {pool[t['content_hash']][0]} ({pool[t['content_hash']][1]})",
            duplicate_of=pool[t["content_hash"]][0],
            duplicate_of_where=pool[t["content_hash"]][1],
            match="exact",
        )
        for t in tasks
        if t["content_hash"] in pool
    ]
    near = 0
    if dedup is not None and pool_rows:
        exact = {o["where"] for o in offenders}
        rest = [t for t in tasks if where(t) not in exact]
        for loc, d in sorted(_near(rest, pool_rows, False, dedup, rules).items()):
            ev = json.loads(d["drop_detail"])
            how, _ = _near_reason(d, None)
            offenders.append(
                offender(
                    d["task_id"],
                    loc,
                    f"near copy of pool task {ev['pool_task_id']} ({ev.get('pool')}): {how}",
                    duplicate_of=ev["pool_task_id"],
                    duplicate_of_where=ev.get("pool"),
                    match="near",
                    evidence=ev,
                )
            )
            near += 1
    observed = rate(len(offenders), len(tasks))
    return check(
        name,
        desc,
        observed,
        f"<= {max_rate}",
        observed <= max_rate,
        offenders,
        in_pool=len(offenders),
        exact=len(offenders) - near,
        near=near,
        pool_tasks=len(pool),
        pool_rows_unusable=pool_unusable,
    )
