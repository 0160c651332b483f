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
- the answer (`_by_answer`): an item with the task's answer, enough
  quantities and all of them in the task, which every candidate there has;
- meaning (`_by_quantities`, exactly as judge computes it, less the word
  candidates): none left.
With `confirm` off judge is `match`: any word candidate goes to the full check.
Cleared candidates cost no answer comparison (math-verify runs in a
subprocess) and no embedding; only unsettled tasks pay for them, and those
are asked for ahead in batches (BenchmarkIndex.prepare: math-verify over
the worker pool, then one embedding batch), then judged one by one; judge
compares answers only where they could confirm.
"""

from __future__ import annotations

from tasksieve.transforms.decontam.benchmarks import words
from tasksieve.transforms.decontam.index import BenchmarkIndex, answer_key
from tasksieve.transforms.decontam.stage import check_task
from tasksieve.transforms.same_problem.quantities import containment, quantities
from tasksieve.transforms.same_problem.rules import confirmable


def _words_cleared(index: BenchmarkIndex, task: dict, cands: list, tq) -> bool:
    """Every word candidate judge confirms or clears is cleared on numbers alone."""
    rules = index.rules
    for idx, _ in cands[: index.max_candidates]:
        item = index.meta[idx]
        if sum(item.quantities.values()) < rules.min_numbers:
            return False  # judged on text and meaning
        if rules.run_code and item.tests and task.get("reference_solution"):
            return False  # the code rule decides
        share, back = containment(item.quantities, tq), containment(tq, item.quantities)
        if confirmable(item, share, back, [], index.idf, rules, None):  # on numbers: no words, no meaning
            return False
    return True


def _answer_candidate(index: BenchmarkIndex, task: dict, tq) -> bool:
    """A necessary condition of `_by_answer` proposing any item."""
    key = answer_key(task.get("answer"))
    if key is None or key not in index.by_answer:
        return False
    for idx in index.by_answer[key][:64]:
        q = index.meta[idx].quantities
        total = sum(q.values())
        if total >= index.rules.min_numbers and sum((q & tq).values()) >= total:
            return True
    return False


def settled_clean(index: BenchmarkIndex, task: dict) -> bool:
    """True only when check_task(task, index) is certainly None."""
    if not index.items:
        return True
    text = task.get("prompt") or ""
    cands = index._lexical(words(text))
    if not index.confirm:
        return not cands
    tq = quantities(text)
    if cands and not _words_cleared(index, task, cands, tq):
        return False
    if _answer_candidate(index, task, tq):
        return False
    if not index.semantic:
        return True
    proposed = {idx for idx, _ in cands}
    return not any(i not in proposed for i, _ in index._by_quantities(tq))


def decontaminate_rows(tasks: list, index: BenchmarkIndex) -> tuple[list, list]:
    """(clean tasks, dropped records), each as check_task decides."""
    clean, dropped = [], []
    open_ = [not settled_clean(index, task) for task in tasks]
    # What the full checks will ask, asked ahead in batches (index.prepare).
    index.prepare([task for task, o in zip(tasks, open_) if o])
    for task, unsettled in zip(tasks, open_):
        found = check_task(task, index) if unsettled else None
        if found is None:
            clean.append(task)
        else:
            dropped.append(found)
    return clean, dropped
