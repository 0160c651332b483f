"""Beam's DaskRunner with its partition count held in check.

Beam 2.77 translates a Flatten into `dask.bag.concat`, whose partition
count is the *sum* of its inputs', and a GroupByKey into a task shuffle
that keeps (or grows) its input's. tasksieve's graph flattens many streams
(drops, results, costs, every sink before the last step), so on the
bundled sample of 98 rows the last steps had 1,728 partitions and the run
scheduled ~150,000 Dask tasks: 130 s on a 2-worker cluster for what the
in-process runner does in 2.5 s, all of it scheduler and unpickling work.

Here every bag leaves a step with at most `parts` partitions (Flatten's
concat merged back down), and every GroupByKey shuffles `parts` partitions
(its input is split or merged to that many first), so keyed steps, such as
sampling by group, are spread over the workers.
`parts` defaults to twice the cluster's worker threads. Partitions are
only how Dask splits the work: each element is processed by the same DoFn
whatever partition it lands in, so results do not depend on `parts`
(tests/run/test_runners.py compares against the in-process runner).
"""

from __future__ import annotations

from apache_beam.runners.dask import transform_evaluator as te
from apache_beam.runners.dask.dask_runner import DaskRunner


def default_parts(threads: int) -> int:
    return max(2, 2 * threads)


class BoundedDaskRunner(DaskRunner):
    """DaskRunner whose bags never hold more than `parts` partitions; `parts`
    None: twice the worker threads of the cluster the run connects to."""

    def __init__(self, parts: int | None = None):
        super().__init__()
        self.parts = parts

    def run_pipeline(self, pipeline, options):
        if self.parts is None:
            import dask.distributed as ddist

            from apache_beam.runners.dask.dask_runner import DaskOptions

            address = options.view_as(DaskOptions).address
            with ddist.Client(address, set_as_default=False) as client:
                self.parts = default_parts(sum(client.nthreads().values()))
        return super().run_pipeline(pipeline, options)

    def to_dask_bag_visitor(self, bag_kwargs=None):
        visitor = DaskRunner.to_dask_bag_visitor(bag_kwargs)
        parts = self.parts or 2

        class Bounded(type(visitor)):
            def visit_transform(self, node) -> None:
                if type(node.transform) is te._GroupByKeyOnly:
                    self.bags[node] = _group(self._input(node), parts)
                    return
                super().visit_transform(node)
                bag = self.bags.get(node)
                if bag is not None and getattr(bag, "npartitions", 0) > parts:
                    self.bags[node] = bag.repartition(npartitions=parts)

            def _input(self, node):
                (only,) = node.inputs
                return self.bags[only.producer]

        return Bounded()


def _group(bag, parts: int):
    """Beam's GroupByKey on a bag, as transform_evaluator.GroupByKey does it,
    on `parts` partitions (the task shuffle keeps its input's count)."""

    def key(item):
        return item[0]

    def value(item):
        k, v = item
        return k, [te.defenestrate(elm[1]) for elm in v]

    if bag.npartitions != parts:
        bag = bag.repartition(npartitions=parts)
    return bag.groupby(key, shuffle="tasks").map(value)
