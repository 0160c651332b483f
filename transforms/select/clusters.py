"""Topics of a pool: prompt embeddings, k-means, representative prompts.

The embeddings are the dedup stages' own (transforms/same_problem/embed.py: Universal
Sentence Encoder multilingual, unit-length 512-d vectors, numpy only), so
"similar" means the same here as in semantic dedup. Clustering is
spherical k-means (cosine) with k-means++ seeding from a fixed seed: cheap
(a few thousand prompts in well under a second once embedded), and with
the rows in a fixed order (the caller sorts by task_id) it gives the same
clusters every time. Clusters are numbered by size, largest first.
"""

from __future__ import annotations

import math

import numpy as np

MAX_AUTO_CLUSTERS = 64


def embed_prompts(prompts: list[str]) -> np.ndarray:
    """(n, d) unit vectors from the dedup stages' embedding model."""
    from tasksieve.transforms.same_problem.embed import get_model  # loads the model only when diversity is asked for

    return get_model().encode(list(prompts)).astype(np.float32)


def auto_k(n: int) -> int:
    """sqrt(n/2) clusters (the usual rule of thumb), 1 to MAX_AUTO_CLUSTERS."""
    return max(1, min(MAX_AUTO_CLUSTERS, n, round(math.sqrt(n / 2))))


def _seed_centres(vecs: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++: each new centre drawn in proportion to its cosine distance
    from the nearest centre so far; stops early when every row sits on a
    centre (a pool of copies has fewer topics than asked)."""
    n = vecs.shape[0]
    centres = [int(rng.integers(n))]
    dist = np.clip(1.0 - vecs @ vecs[centres[0]], 0.0, None)
    while len(centres) < k:
        total = float(dist.sum())
        if total <= 1e-12:
            break
        nxt = int(rng.choice(n, p=dist / total))
        centres.append(nxt)
        dist = np.minimum(dist, np.clip(1.0 - vecs @ vecs[nxt], 0.0, None))
    return vecs[centres].copy()


def _normalize(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def kmeans(vecs: np.ndarray, k: int, seed: int = 0, iters: int = 50) -> np.ndarray:
    """Cluster label per row (0 = largest cluster). Deterministic for a
    given row order and seed."""
    n = vecs.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    centres = _seed_centres(vecs, min(k, n), np.random.default_rng(seed))
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(iters):
        new = np.argmax(vecs @ centres.T, axis=1)  # ties go to the lower centre: stable
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(centres.shape[0]):
            members = vecs[labels == c]
            if members.shape[0]:  # an emptied cluster keeps its centre
                centres[c] = members.sum(axis=0)
        centres = _normalize(centres)
    return _renumber(labels)


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Clusters by size (largest first), then by their first row: stable ids."""
    ids, first, counts = np.unique(labels, return_index=True, return_counts=True)
    order = sorted(range(len(ids)), key=lambda i: (-counts[i], first[i]))
    remap = {int(ids[i]): rank for rank, i in enumerate(order)}
    return np.array([remap[int(x)] for x in labels], dtype=np.int64)


def representatives(vecs: np.ndarray, labels: np.ndarray, per_cluster: int = 3) -> dict[int, list[int]]:
    """Per cluster, the rows nearest its mean direction (ties by row order)."""
    reps: dict[int, list[int]] = {}
    for c in np.unique(labels).tolist():
        rows = np.nonzero(labels == c)[0]
        centre = _normalize(vecs[rows].sum(axis=0, keepdims=True))[0]
        sims = vecs[rows] @ centre
        order = np.lexsort((rows, -np.round(sims, 9)))
        reps[int(c)] = rows[order[:per_cluster]].tolist()
    return reps
