"""The hard-case set for the same-problem judgement (issue 13), built
deterministically from templates written for it and from the bundled
benchmarks. Used by bench/same_problem.py (all of it) and
tests/dedup/test_same_problem.py (a sample).

    lookalikes()   clean tasks that share words with a benchmark item but are
                   not it (must be kept): stock GSM8K phrases, AIME boilerplate,
                   other-year competition problems, HumanEval-style docstrings
                   (new functions, and HumanEval docstrings edited to ask for
                   another behaviour), a GSM8K item's opening scenario with new
                   numbers and a new question
    rewordings()   benchmark items reworded (must be dropped), one kind each:
                   reorder, names, objects, names+objects, wrapper, numbers as
                   words, LaTeX restyled, paraphrase, HumanEval renamed,
                   HumanEval reflowed; translations (es/fr/de) separately
    paraphrase_pairs() / sibling_pairs()
                   near dedup: one problem worded two ways (synonyms, voice,
                   clause order, units written differently), and two problems
                   from one template (other names and numbers: must both stay)

Every case is a Task dict (prompt, answer or tests/entry_point/
reference_solution) plus `kind` and, for rewordings, the benchmark item it
rewords. Answers are computed, not guessed, except where noted.
"""

from __future__ import annotations

from same_problem_lookalikes import lookalikes
from same_problem_pairs import paraphrase_pairs, shares_gsm8k_8gram, sibling_pairs
from same_problem_rewordings import canonical, rewordings, translations
from tasksieve.transforms.decontam.benchmarks import ITEMS

__all__ = [
    "ITEMS",
    "canonical",
    "lookalikes",
    "paraphrase_pairs",
    "rewordings",
    "shares_gsm8k_8gram",
    "sibling_pairs",
    "translations",
]
