"""Asking ahead, in batches, what `BenchmarkIndex.judge` will need for a
chunk's unsettled tasks, so that judging them one by one finds it ready.

Two things judge may wait on: sentence embeddings (cosines to number-poor
word candidates and to quantity candidates, where the bag-of-pieces bound
leaves them open; embed.py keeps them) and
math-verify comparisons of the task's answer with a candidate's (a worker
subprocess; answer_memo keeps them). Embeddings come first, in one batch:
a comparison is asked only where its outcome could still confirm the
candidate (`rules.confirmable`, judge_item's lazy rule) given the cosine
judge will use, and for a number-poor candidate that is the meaning. On the
bench pool that left 102 of 659 comparisons, each a math-verify parse of a
symbolic benchmark answer (bench/README.md, "Asked ahead").

Only the speed depends on this: what is asked for a candidate judge never
reaches costs time, not a decision; what is not asked, judge asks itself.
"""

from __future__ import annotations

from tasksieve.transforms.decontam.index import BenchmarkIndex, Probe
from tasksieve.transforms.same_problem.quantities import containment
from tasksieve.transforms.same_problem.rules import confirmable, math_request


def _plan(index: BenchmarkIndex, task: dict, probe: Probe) -> tuple:
    """The candidates judge may reach, as it proposes them: words, the answer,
    quantities; and the number-poor word candidates, judged with a cosine."""
    by_words = [i for i, _ in probe.lexical[: index.max_candidates]]
    poor = [i for i in by_words if index.number_poor(i)] if index.semantic else []
    sem = [i for i, _ in index.semantic_candidates(probe)] if index.semantic else []
    by_answer = index.answer_candidates(task, probe.quantities, set(by_words))
    return by_words, poor, sem, by_answer


def ask_ahead(index: BenchmarkIndex, tasks: list[dict], probes: list[Probe] | None = None) -> None:
    """Embeds, then asks the comparisons that could confirm, for `tasks`
    (their probes, if computed: BenchmarkIndex.probe_of)."""
    if not index.items or not index.confirm or not tasks:
        return
    from tasksieve.transforms.verify.math_answers import ask_all

    probes = probes or [index.probe_of(task) for task in tasks]
    plans = [_plan(index, task, probe) for task, probe in zip(tasks, probes)]
    # The cosines judge will use: the encoder's, None where the bag-of-pieces
    # bound puts one below its bar (judge's _cosines finds the same).
    asked, needs = [], []
    for probe, (_, poor, sem, _) in zip(probes, plans):
        for i in poor + sem:
            asked.append((probe.text, index.meta[i].text))
            needs.append(index.poor_need(i, probe.words) if i in poor else index.rules.semantic_min)
    found = {}
    if asked:
        from tasksieve.transforms.same_problem.embed import get_model

        found = dict(zip(asked, get_model().cosines(asked, needs)))
    requests = []
    for task, probe, (by_words, poor, sem, by_answer) in zip(tasks, probes, plans):
        cos = {i: found[(probe.text, index.meta[i].text)] for i in sem + poor}
        judged = [(i, cos.get(i)) for i in by_words]  # a cosine for the number-poor ones only
        judged += [(i, cos[i]) for i in sem if cos[i] is not None and cos[i] >= index.rules.semantic_min]
        judged += [(i, None) for i in by_answer]
        for i, c in judged:
            item = index.meta[i]
            if not item.answer:
                continue
            share, back = containment(item.quantities, probe.quantities), containment(probe.quantities, item.quantities)
            if not confirmable(item, share, back, probe.words, index.idf, index.rules, c):
                continue  # False whatever the comparison says: judge_item will not ask it
            request = math_request(task.get("answer"), item.answer)
            if request is not None:
                requests.append(request)
    ask_all(requests, index.rules.answer_timeout_s)()
