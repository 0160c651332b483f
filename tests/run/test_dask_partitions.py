"""The Dask runner keeps its partition count bounded (pipeline/run/dask_runner.py):
Beam's own translation sums partitions at every Flatten, which made the
bundled sample schedule ~150,000 Dask tasks. Checked on the translated bag
graph, computed with Dask's synchronous scheduler (no cluster needed)."""

import apache_beam as beam
import dask
from apache_beam.runners.dask.dask_runner import DaskRunner
from apache_beam.runners.dask.overrides import dask_overrides

from tasksieve.pipeline.run.dask_runner import BoundedDaskRunner


def _graph(flattens):
    p = beam.Pipeline()
    a = p | "A" >> beam.Create(range(40))
    b = p | "B" >> beam.Create(range(100, 140))
    x = (a, b) | "F0" >> beam.Flatten()
    for i in range(1, flattens + 1):  # each Flatten of the stream with a copy of itself
        x = (x, x | f"Plus{i}" >> beam.Map(lambda v, i=i: v + 1000 * i)) | f"F{i}" >> beam.Flatten()
    grouped = x | "Key" >> beam.Map(lambda v: (v % 7, v)) | "Group" >> beam.GroupByKey()
    grouped | "Sum" >> beam.MapTuple(lambda k, vs: (k, sum(vs), len(vs)))
    p.replace_all(dask_overrides())
    return p


def _bags(visitor, flattens=4):
    p = _graph(flattens)
    p.visit(visitor)
    bags = {node.full_label: bag for node, bag in visitor.bags.items() if hasattr(bag, "npartitions")}
    return bags


def _result(bags):
    (out,) = dask.compute(bags["Sum"], scheduler="processes", num_workers=2)
    return sorted(out)


def _expected(flattens):
    xs = list(range(40)) + list(range(100, 140))
    for i in range(1, flattens + 1):
        xs = xs + [v + 1000 * i for v in xs]
    return sorted((k, sum(v for v in xs if v % 7 == k), sum(1 for v in xs if v % 7 == k)) for k in range(7))


def test_no_step_holds_more_than_the_bound_and_the_results_are_beams_own():
    kwargs = {"npartitions": 4}
    plain = _bags(DaskRunner.to_dask_bag_visitor(kwargs))
    bounded = _bags(BoundedDaskRunner(parts=3).to_dask_bag_visitor(kwargs))
    assert max(b.npartitions for b in plain.values()) >= 64  # what the bound is for
    assert max(b.npartitions for b in bounded.values()) <= 3
    assert bounded["Group/GroupByKey"].npartitions == 3  # a shuffle spreads its keys over the bound, not fewer
    assert _result(bounded) == _expected(4)


def test_a_single_partition_input_is_spread_over_the_bound_by_a_shuffle():
    bounded = _bags(BoundedDaskRunner(parts=4).to_dask_bag_visitor({}), flattens=0)
    assert bounded["A"].npartitions == 1 and bounded["Key"].npartitions == 2
    assert bounded["Group/GroupByKey"].npartitions == 4
    assert _result(bounded) == _expected(0) == _result(_bags(DaskRunner.to_dask_bag_visitor({}), flattens=0))
