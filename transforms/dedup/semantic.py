"""Semantic candidates for near dedup, and the whole near-dedup judgement
in memory (for `tasksieve validate`). Beam-free.

Paraphrases (synonyms, voice change, clause order, units written
differently) share few character shingles, so MinHash misses them; but a
paraphrase states the same quantities. So tasks are grouped by their
quantity multiset (`same_problem.pair_quantity_key`), and only within a
group are meanings compared (sentence embeddings, embed.py): a template
sibling with other numbers is never even compared, and a task whose numbers
no other task states is never embedded. Pairs that the character shingles
already link are not embedded either. What comes out are candidate edges
(a, b, cosine); `dedup_near.resolve_component` confirms them with the
same-problem rules (`same_problem.judge_pair`: same quantities, agreeing
answers, code behaviour) next to the MinHash edges, so one judgement decides
for `run`, `dedup` and `validate`.
"""

from __future__ import annotations

from collections import defaultdict

from tasksieve.transforms.dedup.minhash import MinHashParams, jaccard
from tasksieve.transforms.same_problem.rules import Rules, pair_quantity_key

POOL_PREFIX = "pool\x1f"
# A group larger than this (e.g. thousands of number-free prompts) is compared
# by nearest neighbours in blocks; beyond MAX_GROUP it is skipped (logged in evidence-free silence
# would hide it, so the caller counts it).
MAX_GROUP = 50_000
_LEXICAL_CHECK_UP_TO = 32


def quantity_key(text: str) -> str:
    return pair_quantity_key(text)


def semantic_edges(members: list[tuple[str, str]], key: str, p: MinHashParams, threshold: float, rules: Rules,
                   within: bool = True, k: int = 5) -> list[tuple[str, str, float]]:
    """Candidate edges among (node, normalised text) members of one quantity
    group: each member's up to k nearest members at or above the group's
    cosine bar. Pool-pool pairs never; task-task pairs only `within`."""
    members = sorted(set(members))
    if len(members) < 2 or len(members) > MAX_GROUP:
        return []
    pools = [n.startswith(POOL_PREFIX) for n, _ in members]
    if all(pools) or (not within and not any(pools)):
        return []

    def allowed(i, j):
        both = pools[i] + pools[j]
        return both == 1 or (both == 0 and within)

    def edge(i, j, c):
        a, b = members[i][0], members[j][0]
        return (a, b, c) if a < b else (b, a, c)

    if len(members) <= _LEXICAL_CHECK_UP_TO:
        # Pairs the shingles already link (exact Jaccard, not the MinHash
        # estimate) are passed on with the cosine left to compute only if
        # the lexical confirmation rejects them; only the others are embedded now.
        out, open_pairs = [], []
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                if allowed(i, j):
                    if jaccard(members[i][1], members[j][1], p.shingle, p.size) >= threshold:
                        out.append(edge(i, j, None))
                    else:
                        open_pairs.append((i, j))
        if open_pairs:
            from tasksieve.transforms.same_problem.embed import get_model

            idx = sorted({x for pair in open_pairs for x in pair})
            vecs = dict(zip(idx, get_model().encode([members[x][1] for x in idx])))
            bar = rules.pair_min if key.split("|")[0] else rules.pair_alone_min
            for i, j in open_pairs:
                c = float(vecs[i] @ vecs[j])
                if c >= bar:
                    out.append(edge(i, j, round(c, 4)))
        return out
    from tasksieve.transforms.same_problem.embed import get_model, neighbours

    vecs = get_model().encode([t for _, t in members])
    bar = rules.pair_min if key.split("|")[0] else rules.pair_alone_min
    return [edge(i, j, round(c, 4)) for i, j, c in neighbours(vecs, bar, k=k, allowed=allowed)]


def find_near_duplicates(tasks: list[dict], pool_rows: list[dict], p: MinHashParams, threshold: float,
                         min_numbers: float = 0.5, guard_below: float = 0.9, semantic: bool = True,
                         rules: Rules | None = None, within: bool = True, max_bucket_pairs: int = 32):
    """The near-dedup stage in memory: the same candidate generators
    (MinHash bands, quantity-grouped meanings) and the same confirmation
    (`resolve_component`) as the Beam stage. Yields (tag, task) like it."""
    from tasksieve.transforms.dedup.near import (KEPT_TAG, UnionFind, bucket_pairs, edge_order, pool_records,
                                                 resolve_component, task_node, task_records)
    from tasksieve.transforms.dedup.minhash import text_of

    rules = rules or Rules()
    buckets: dict = defaultdict(list)
    for t in tasks:
        for key, node in task_records(t, p, bool(pool_rows)):
            buckets[key].append(node)
    for r in pool_rows:
        for key, node in pool_records(r):
            buckets[key].append(node)
    edges = set()
    for members in buckets.values():
        edges.update(bucket_pairs(members, max_bucket_pairs, within))
    if semantic:
        groups: dict = defaultdict(list)
        for t in tasks:
            text = text_of(t)
            groups[quantity_key(text)].append((task_node(t), text))
        for r in pool_rows:
            groups[quantity_key(r["text"])].append((r["node"], r["text"]))
        for key, members in groups.items():
            edges.update(semantic_edges(members, key, p, threshold, rules, within))
    uf = UnionFind()
    for e in edges:
        uf.union(e[0], e[1])
    comps: dict = defaultdict(list)
    for e in sorted(edges, key=edge_order):
        comps[uf.find(e[0])].append(e)
    by_root_tasks: dict = defaultdict(list)
    by_root_pool: dict = defaultdict(list)
    in_comp = set()
    for t in tasks:
        n = task_node(t)
        if n in uf.parent:
            by_root_tasks[uf.find(n)].append(t)
            in_comp.add(n)
        else:
            yield KEPT_TAG, t
    for r in pool_rows:
        if r["node"] in uf.parent:
            by_root_pool[uf.find(r["node"])].append(r)
    for root, comp_edges in comps.items():
        yield from resolve_component(by_root_tasks.get(root, []), by_root_pool.get(root, []), comp_edges, p, threshold,
                                     min_numbers, guard_below, rules=rules)
