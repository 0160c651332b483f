"""Deciding near dedup's clusters (near.py's find_near_duplicates and
the batch engine's transforms/batch/clusters.py): which task of a cluster of confirmed edges
survives, and the drop record of every other one, naming the survivor (or
pool row, or, for a variant, the original and the quantities edited)."""

from __future__ import annotations

from tasksieve.transforms.dedup.exact import survivor_key
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.near_judge import Component, task_node
from tasksieve.transforms.same_problem.quantities import quantities
from tasksieve.transforms.stage import DROPPED, KEPT, drop_record

STAGE = "near_dedup"
POOL_STAGE = "against_pool"


def _cluster_rows(c: Component, members: list[str]) -> tuple[list[dict], list[dict]]:
    """(tasks by survivor_key, pool rows) of one cluster."""
    ts = sorted((c.by_node[n] for n in members if n in c.by_node), key=survivor_key)
    return ts, [c.pool_by_node[n] for n in members if n in c.pool_by_node]


def decide_clusters(
    c: Component, clusters: list[list[str]], via: dict, p: MinHashParams, threshold: float, keep_variants: int = 0
):
    """decide_cluster of each cluster in turn, with every similarity the
    drop details name measured first in one block (one compiled call, not
    one per dropped task)."""
    pairs = []
    for members in clusters:
        ts, pools = _cluster_rows(c, members)
        if len(members) > 1 and ts:
            ns = [task_node(t) for t in ts]
            pairs += [(n, r["node"]) for n in ns for r in pools] if pools else [(n, ns[0]) for n in ns[1:]]
    c.sh.remember(pairs)
    for members in clusters:
        yield from decide_cluster(c, members, via, p, threshold, keep_variants)


def decide_cluster(
    c: Component, members: list[str], via: dict, p: MinHashParams, threshold: float, keep_variants: int = 0
):
    """(tag, task) for the tasks of one cluster of confirmed edges, or all
    dropped when the cluster holds a reference-pool row. The cluster is
    groups of duplicates (via's duplicate roots) joined by variant edges:
    the first task by survivor_key is the original and kept, its
    duplicates dropped naming it (near_duplicate); every other group is a
    variant of it: the first `keep_variants` groups (by survivor_key) keep
    their first task, which takes the original's template group, and drop
    their duplicates naming it; the rest drop whole as near_variant."""
    ts, pools = _cluster_rows(c, members)
    if len(members) == 1 or not ts:
        for t in ts:
            yield KEPT, t
        return
    if pools:
        for t in ts:
            yield DROPPED, _pool_drop(c, t, pools, via)
        return
    groups: dict = {}
    for t in ts:
        groups.setdefault(via[task_node(t)][3], []).append(t)
    orig = ts[0]
    yield KEPT, orig
    for k, group in enumerate(groups.values()):
        first = group[0]
        if k == 0:  # the original's own duplicates
            for t in group[1:]:
                yield DROPPED, _near_drop(c, t, orig, via, p, threshold)
        elif k <= keep_variants:
            yield KEPT, dict(first, template_group=orig.get("template_group"))
            for t in group[1:]:
                yield DROPPED, _near_drop(c, t, first, via, p, threshold)
        else:
            for t in group:
                yield DROPPED, _variant_drop(c, t, orig, via)


def _variant_drop(c: Component, t: dict, orig: dict, via: dict) -> dict:
    """A task in a variant group past keep_variants: dropped, naming the
    original and the quantities edited between them."""
    n, on = task_node(t), task_node(orig)
    qa, qb = quantities(orig.get("prompt") or ""), quantities(t.get("prompt") or "")
    detail = {
        "variant_of": orig["task_id"],
        "variant_of_source": orig["source"],
        "similarity": c.sh.sim(n, on),
        "edited": {
            "original_only": sorted((qa - qb).elements())[:20],
            "variant_only": sorted((qb - qa).elements())[:20],
        },
        **_via(via, n, c.pool_by_node, c.by_node),
    }
    return drop_record(t, STAGE, "near_variant", detail)


def _pool_drop(c: Component, t: dict, pools: list[dict], via: dict) -> dict:
    """A task in a cluster with reference-pool rows: dropped, naming its closest pool row."""
    n = task_node(t)
    sims = {r["node"]: c.sh.sim(n, r["node"]) for r in pools}
    best = max(pools, key=lambda r: (c.hashes[n] == r["content_hash"], sims[r["node"]], r["node"]))
    exact = c.hashes[n] == best["content_hash"]
    detail = {
        "pool_task_id": best["task_id"],
        "pool_source": best["source"],
        "pool": best.get("pool"),
        "match": "exact" if exact else "near",
        "similarity": 1.0 if exact else sims[best["node"]],
        **_via(via, n, c.pool_by_node, c.by_node),
    }
    return drop_record(t, POOL_STAGE, "dedup_against_pool", detail)


def _near_drop(c: Component, t: dict, keep: dict, via: dict, p: MinHashParams, threshold: float) -> dict:
    """A task that is not its cluster's survivor: dropped, naming the survivor."""
    n, kn = task_node(t), task_node(keep)
    detail = {
        "duplicate_of": keep["task_id"],
        "duplicate_of_source": keep["source"],
        "similarity": c.sh.sim(n, kn),
        "number_overlap": c.sh.numbers(n, kn),
        "threshold": threshold,
        "shingle": f"{p.shingle}{p.size}",
        **_via(via, n, c.pool_by_node, c.by_node),
    }
    return drop_record(t, STAGE, "near_duplicate", detail)


def _via(via: dict, n: str, pool_by_node: dict, by_node: dict) -> dict:
    nb, s, how = via[n][:3]
    row = by_node.get(nb) or pool_by_node[nb]
    return {"matched_task_id": row["task_id"], "matched_source": row["source"], "matched_similarity": s, **how}
