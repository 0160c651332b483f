"""Semantic candidates for near dedup, and the whole near-dedup judgement
in memory (for `tasksieve validate`). Beam-free.

Paraphrases (synonyms, voice change, clause order, units written
differently) share few character shingles, so MinHash misses them; but a
paraphrase states the same quantities. So tasks are grouped by their
quantity multiset (`same_problem.pair_quantity_key`), and only within a
group are meanings compared (sentence embeddings, embed.py): a template
sibling with other numbers is never even compared, and a task whose numbers
no other task states is never embedded. Pairs that the character shingles
already link are not embedded either, nor texts whose every pair the
bag-of-pieces bound (same_problem/meaning_bound.py) puts below the bar. What comes out are candidate edges
(a, b, cosine); `near.resolve_component` confirms them with the
same-problem rules (`same_problem.judge_pair`: same quantities, agreeing
answers, code behaviour) next to the MinHash edges, so one judgement decides
for `run`, `dedup` and `validate`.
"""

from __future__ import annotations

from tasksieve.transforms.dedup.minhash import MinHashParams, jaccard_of, shingle_hashes
from tasksieve.transforms.same_problem.rules import Rules, pair_quantity_key

POOL_PREFIX = "pool\x1f"
# A group larger than this (e.g. thousands of number-free prompts) is compared
# by nearest neighbours in blocks; beyond MAX_GROUP it is skipped (logged in evidence-free silence
# would hide it, so the caller counts it).
MAX_GROUP = 50_000
_LEXICAL_CHECK_UP_TO = 32


def quantity_key(text: str) -> str:
    return pair_quantity_key(text)


def bag_ahead(groups) -> None:
    """Bag-of-pieces vectors (meaning_bound.py) of every text that
    semantic_edges may compare, in one call: one call per group would pass
    over the bound's weights once per group."""
    texts = [t for members in groups if 2 <= len(members) <= MAX_GROUP for _, t in members]
    if texts:
        from tasksieve.transforms.same_problem.embed import get_model

        get_model().bag_vectors(list(dict.fromkeys(texts)))


def semantic_edges(
    members: list[tuple[str, str]],
    key: str,
    p: MinHashParams,
    threshold: float,
    rules: Rules,
    within: bool = True,
    k: int = 5,
) -> list[tuple[str, str, float]]:
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
        # Each member's shingles once: a group of m members has m(m-1)/2 pairs.
        out, open_pairs, shingles = [], [], [shingle_hashes(t, p.shingle, p.size) for _, t in members]
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                if allowed(i, j):
                    if jaccard_of(shingles[i], shingles[j]) >= threshold:
                        out.append(edge(i, j, None))
                    else:
                        open_pairs.append((i, j))
        if open_pairs:
            from tasksieve.transforms.same_problem.embed import get_model

            bar = rules.pair_min if key.split("|")[0] else rules.pair_alone_min
            found = get_model().cosines([(members[i][1], members[j][1]) for i, j in open_pairs], bar)
            for (i, j), c in zip(open_pairs, found):
                if c is not None and c >= bar:  # None: the bag-of-pieces bound says below bar
                    out.append(edge(i, j, round(c, 4)))
        return out
    from tasksieve.transforms.same_problem.embed import get_model, neighbours

    bar = rules.pair_min if key.split("|")[0] else rules.pair_alone_min
    vecs = get_model().neighbour_vectors([t for _, t in members], bar, pools, within)
    return [edge(i, j, round(c, 4)) for i, j, c in neighbours(vecs, bar, k=k, allowed=allowed)]
