"""What every part of the same-problem hard-case set (same_problem_cases.py)
builds its cases with: names, sentence and number patterns, a bundled
benchmark's items, and a math or code case as a Task dict."""

from __future__ import annotations

import re

from tasksieve.transforms.decontam.benchmarks import ITEMS

NAMES = [
    "Priya",
    "Tomasz",
    "Aiko",
    "Kwame",
    "Lucia",
    "Dmitri",
    "Fatima",
    "Henrik",
    "Mei",
    "Oluwaseun",
    "Ines",
    "Ravi",
    "Sofia",
    "Bjorn",
    "Amara",
    "Chen",
]
SENTENCE = re.compile(r"(?<=[.?!])\s+")
NUMBER = re.compile(r"\d+")


def bench_items(name):
    return [i for i in ITEMS[name]() if not i["id"].endswith("/answer")]


def math_case(tid, prompt, answer, kind, **kw):
    return dict(
        {
            "task_id": tid,
            "domain": "math",
            "prompt": prompt,
            "answer": None if answer is None else str(answer),
            "kind": kind,
        },
        **kw,
    )


def code_case(tid, prompt, solution, entry, tests, kind, **kw):
    return dict(
        {
            "task_id": tid,
            "domain": "code",
            "prompt": prompt,
            "reference_solution": solution,
            "entry_point": entry,
            "tests": tests,
            "answer": None,
            "kind": kind,
        },
        **kw,
    )
