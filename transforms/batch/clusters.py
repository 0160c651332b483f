"""Near dedup of the batch path, last steps: confirmed edges (from the edge
shards of near.py) become clusters with one union-find, the clusters go
back to the hash shards that hold their members' rows, and each cluster
shard decides its clusters (dedup/near_decide.py's decide_clusters: the row
path's survivor and drop details)."""

from __future__ import annotations

from tasksieve.transforms.batch.chunks import Spill, as_chunk, pack, unpack
from tasksieve.transforms.batch.dedup import CHUNK, SHARDS, NearSettings
from tasksieve.transforms.batch.near import PackedParts, row_node
from tasksieve.transforms.batch.shards import shard_of
from tasksieve.transforms.dedup.near import edge_order
from tasksieve.transforms.dedup.near_decide import decide_clusters
from tasksieve.transforms.dedup.near_judge import Component, UnionFind, best_links
from tasksieve.transforms.stage import DROPPED, KEPT
from tasksieve.transforms.batch.tags import CLUSTERS, MEMBERS, TASK_ROWS


class ClustersFn(PackedParts):
    """Packed confirmed edges -> {src: {node: (cluster root, best link)}}:
    near.py's union-find and best_links, over confirmed edges only."""

    def extract_output(self, acc):
        confirmed, src_of = [], {}
        for part in acc:
            for e, how, s, src_a, src_b in unpack(part):
                confirmed.append((e, how, s))
                src_of[e[0]], src_of[e[1]] = src_a, src_b
        confirmed.sort(key=lambda c: edge_order(c[0]))
        uf = UnionFind()
        for e, _, _ in confirmed:
            uf.union(e[0], e[1])
        via = best_links(confirmed)
        out: dict = {}
        for n, src in src_of.items():
            out.setdefault(src, {})[n] = (uf.find(n), via[n])
        return out


def cluster_messages(clusters: dict, spill: Spill | None = None):
    for src, members in clusters.items():
        yield src, (CLUSTERS, pack(members, spill))


def route_clusters(kv, spill: Spill | None = None, shards: int = SHARDS, chunk: int = CHUNK):
    """One hash shard's pending rows and their clusters -> (MEMBERS,
    (cluster shard, [(root, kind, row, link)])); tasks whose candidate
    edges were all refused leave as KEPT chunks."""
    clusters, pending = {}, []
    for kind, v in kv[1]:
        if kind == CLUSTERS:
            clusters.update(unpack(v))
        else:
            pending += unpack(v)
    members: dict = {}
    rest = []
    for kind, r in pending:
        n = row_node(kind, r)
        if n in clusters:
            root, link = clusters[n]
            members.setdefault(shard_of(root, shards), []).append((root, kind, r, link))
        elif kind == TASK_ROWS:
            rest.append(r)
    for shard, ms in members.items():
        yield MEMBERS, (shard, pack(ms, spill))
    for i in range(0, len(rest), chunk):
        yield KEPT, as_chunk(rest[i : i + chunk], spill)


def resolve_clusters(kv, near: NearSettings, spill: Spill | None = None):
    """One cluster shard -> near_decide.decide_clusters of its clusters (one
    Component for the shard, so the drop details' similarities are one
    block): one KEPT chunk and one DROPPED chunk."""
    by_root: dict = {}
    for part in kv[1]:
        for root, kind, r, link in unpack(part):
            by_root.setdefault(root, []).append((kind, r, link))
    members = [m for root in sorted(by_root) for m in by_root[root]]
    c = Component([r for k, r, _ in members if k == TASK_ROWS], [r for k, r, _ in members if k != TASK_ROWS], near.p)
    via = {row_node(k, r): link for k, r, link in members}
    clusters = [[row_node(k, r) for k, r, _ in by_root[root]] for root in sorted(by_root)]
    kept, dropped = [], []
    for tag, t in decide_clusters(c, clusters, via, near.p, near.threshold, near.keep_variants):
        (kept if tag == KEPT else dropped).append(t)
    if kept:
        yield KEPT, as_chunk(kept, spill)
    if dropped:
        yield DROPPED, as_chunk(dropped, spill)
