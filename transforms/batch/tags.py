"""The batch engine's message tags, in one place: every Beam element
between two of its steps is (tag, payload) or (shard, (tag, payload)),
and a step routes on the tag. The strings are only names; each must be
distinct within the messages one step reads (kept and dropped tasks are
stage.KEPT and stage.DROPPED, shared with the rest of the graph).

Read .. exact dedup (dedup.py):
    ROWS        rows read from one source (a count, for the accounting check)
    QUARANTINE  a quarantine entry (a row that broke the contract, or a repeated id)
    TASKS       a chunk of valid tasks, to their content hash's shard
    IDS         a chunk of id records, to their id's shard (repeated_ids)
    REPEATS     the later rows of repeated ids, back to their hash shard
Near dedup's records (dedup.py, candidates.py):
    BUCKETS     band and sentence bucket records, to their bucket shard
    SEMANTIC    quantity-key records of the meaning stage
    BATCH       the rows a holder (hash shard or pool row group) keeps until asked
    SKETCHES    the rows' sketches (sketch.py), kept by their holder
Near dedup's edges (near.py):
    EDGES       candidate edges, to their edge shard
    ASKS        an edge shard asking a holder for its rows' sketches
    SKETCHED    the sketches a holder sends back
    NEEDS       an edge shard asking a holder for the rows its edges join
    EDGE_ROWS   those rows, sent to the edge shard
    PENDING     rows with an edge, waiting for their clusters
Clusters (clusters.py):
    CLUSTERS    the cluster map's part for one holder
    MEMBERS     a cluster's members, to their cluster shard
Kinds of held rows (within BATCH and the rows sent on):
    TASK_ROWS   delivery tasks
    POOL_ROWS   reference-pool rows
"""

ROWS, QUARANTINE, TASKS, IDS, REPEATS = "rows", "quarantine", "tasks", "ids", "repeats"
BUCKETS, BATCH, SEMANTIC, SKETCHES = "buckets", "batch", "semantic", "sketches"
NEEDS, EDGES, EDGE_ROWS, PENDING = "needs", "edges", "edge_rows", "pending"
ASKS, SKETCHED = "asks", "sketched"
CLUSTERS, MEMBERS = "clusters", "members"
TASK_ROWS, POOL_ROWS = "task", "pool"
