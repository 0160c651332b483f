"""Decontamination of a batch of tasks: cheap candidate evidence first, the
full judgement (`stage.check_task`) only for tasks it cannot settle.

Every decision is the one check_task makes. `BenchmarkIndex.judge` drops a
task only through one of its three candidate generators, and `settled_clean`
shows for each that it cannot fire:
- words (`_lexical`, exactly as judge computes them): none, or every one
  judge would look at (`max_candidates`) is an item with `min_numbers`
  quantities or more (judged on numbers, never on the cosine) that no
  answer comparison could confirm on the task's numbers (rules.confirmable,
  the rule judge_item's lazy answers use too): judge_item's verdict is then
  False whatever the answers and the meaning say, unless the code rule can
  run, which is left to the full check;
- the answer (`_by_answer`): none of `answer_candidates`, the items it
  would judge (asked here without judge's exclusion of the word candidates
  it has judged already: a superset);
- meaning (`_by_quantities`, exactly as judge computes it, less the word
  candidates): none left.
With `confirm` off judge is `match`: any word candidate goes to the full check.
Each task's words and candidates are computed once (`batch_probe.probes_of`)
and shared by the three. Cleared candidates cost no answer comparison
(math-verify runs in a subprocess) and no embedding; only unsettled tasks
pay for them, and those are asked for ahead in batches
(ask_ahead.py: one embedding batch, then math-verify over the worker
pool for the comparisons that could still confirm given those meanings), then judged one by one.
"""

from __future__ import annotations

from tasksieve.transforms.decontam.ask_ahead import ask_ahead
from tasksieve.transforms.decontam.batch_probe import probes_of, quantity_candidates
from tasksieve.transforms.decontam.benchmarks import words
from tasksieve.transforms.decontam.index import BenchmarkIndex, Probe
from tasksieve.transforms.decontam.stage import check_task
from tasksieve.transforms.same_problem.quantities import containment
from tasksieve.transforms.same_problem.rules import confirmable


def _words_cleared(index: BenchmarkIndex, task: dict, cands: list, tq) -> bool:
    """Every word candidate judge confirms or clears is cleared on numbers alone."""
    rules = index.rules
    for idx, _ in cands[: index.max_candidates]:
        item = index.meta[idx]
        if index.number_poor(idx):
            return False  # judged on text and meaning
        if rules.run_code and item.tests and task.get("reference_solution"):
            return False  # the code rule decides
        share, back = containment(item.quantities, tq), containment(tq, item.quantities)
        if confirmable(item, share, back, [], index.idf, rules, None):  # on numbers: no words, no meaning
            return False
    return True


def settled_clean(index: BenchmarkIndex, task: dict, probe: Probe | None = None) -> bool:
    """True only when check_task(task, index) is certainly None.
    `probe`: the task's (BenchmarkIndex.probe_of), if already computed."""
    if not index.items:
        return True
    if not index.confirm:
        return not index._lexical(words(task.get("prompt") or ""))
    probe = probe or index.probe_of(task)
    cands, tq = probe.lexical, probe.quantities
    if cands and not _words_cleared(index, task, cands, tq):
        return False
    if index.answer_candidates(task, tq):
        return False
    if not index.semantic:
        return True
    proposed = {idx for idx, _ in cands}
    return not any(i not in proposed for i, _ in index.by_quantities(probe))


def decontaminate_rows(tasks: list, index: BenchmarkIndex) -> tuple[list, list]:
    """(clean tasks, dropped records), each as check_task decides."""
    clean, dropped = [], []
    # Each task's words and candidates once, for the prefilter, ask_ahead and judge alike.
    probes = probes_of(index, tasks) if index.items and index.confirm else [None] * len(tasks)
    if index.items and index.confirm and index.semantic:
        quantity_candidates(index, probes)  # the chunk's at once, before the prefilter asks
    open_ = [not settled_clean(index, task, probe) for task, probe in zip(tasks, probes)]
    # What the full checks will ask, asked ahead in batches (ask_ahead.py).
    unsettled = [i for i, o in enumerate(open_) if o]
    ask_ahead(index, [tasks[i] for i in unsettled], [probes[i] for i in unsettled])
    for task, probe, unsettled in zip(tasks, probes, open_):
        found = check_task(task, index, probe) if unsettled else None
        if found is None:
            clean.append(task)
        else:
            dropped.append(found)
    return clean, dropped
