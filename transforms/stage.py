"""Splitting one PCollection into several, portably.

Stages emit (tag, element) pairs and `split_tagged` fans them out with one
filter per tag. Beam's multi-output ParDo (`with_outputs`/`TaggedOutput`)
would be the idiom, but not every runner honours it: Beam 2.77's DaskRunner
hands every output of such a ParDo to every consumer (checked: a two-tag
FlatMap delivered all elements to the tagged consumer). A tag carried in
the element means the same thing on every runner.
"""

from __future__ import annotations

import apache_beam as beam


def _select(tagged, tag):
    if tagged[0] == tag:
        yield tagged[1]


def split_tagged(tagged_pcoll, label: str, tags: tuple[str, ...]) -> dict:
    """{tag: PCollection of the elements carrying that tag}."""
    return {tag: tagged_pcoll | f"{label}[{tag}]" >> beam.FlatMap(_select, tag) for tag in tags}
