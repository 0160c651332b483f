"""A scripted backend for graph tests that must not load a model.

It answers arithmetic prompts ("Calculate 5 + 3.") by evaluating them, and
decides per operator whether to be right: '+' always right, '*' always
wrong, '-' right on even seeds only. That gives all three outcomes
deterministically. Code prompts ("Write a Python function add(a, b) that
returns a + b.") get a fenced solution, right on even seeds only. As the
rubric judge (a prompt from verifiers.judge_messages) it rates every
criterion YES on even seeds and NO on odd ones. The real engine is tested
in test_e2e_vllm.py.
"""

from __future__ import annotations

import re

from tasksieve.transforms.backends.base import GenResult

_EXPR = re.compile(r"Calculate (.+)\.$", re.IGNORECASE)
_CODE = re.compile(r"Write a Python function (\w+)\(a, b\) that returns a ([-+*]) b")


def _code_answer(m, seed: int) -> str:
    name, op = m.group(1), m.group(2)
    body = f"a {op} b" if seed % 2 == 0 else f"a {op} b + 1"
    return f"Here is the function:\n```python\ndef {name}(a, b):\n    return {body}\n```\nIt works."


def _judge_answer(prompt: str, seed: int) -> str:
    criteria = prompt.split("Criteria:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    word = "YES" if seed % 2 == 0 else "NO"
    return "\n".join(f"{i}: {word}" for i in range(1, len(criteria) + 1))


class ScriptedBackend:
    model_id = "scripted@test"
    solves_products = False

    def __init__(self):
        self.calls = 0
        self.requests = 0

    def generate(self, requests, on_result=None):
        self.calls += 1
        self.requests += len(requests)
        out = []
        for r in requests:
            prompt = dict(r.messages)["user"]
            m = _EXPR.search(prompt.strip())
            code = _CODE.search(prompt)
            if prompt.startswith("Task:") and "Criteria:\n" in prompt:
                text = _judge_answer(prompt, r.seed)
            elif code:
                text = _code_answer(code, r.seed)
            elif not m:
                text = "I am not sure."
            else:
                expr = m.group(1).replace("×", "*")
                value = eval(expr, {"__builtins__": {}})  # test data only: digits and operators
                right = ("+" in expr) or ("-" in expr and r.seed % 2 == 0) or (self.solves_products and r.seed % 3 == 0)
                text = f"The answer is \\boxed{{{value if right else value + 1}}}"
            out.append(
                GenResult(
                    completion=text, prompt_tokens=20, completion_tokens=10, finish_reason="stop", gen_seconds=0.01
                )
            )
        return out


class BetterScriptedBackend(ScriptedBackend):
    """A 'newer model': also solves a third of the products."""

    model_id = "scripted@v2"
    solves_products = True


_SHARED = {}


def scripted_backend():
    """Process-wide instance, like the real factory."""
    return _SHARED.setdefault("b", ScriptedBackend())


def better_scripted_backend():
    return _SHARED.setdefault("v2", BetterScriptedBackend())


def counting_backend():
    """Like the real factory: one backend per process, created on first use.
    Each creation appends this process's pid to $TASKSIEVE_TEST_LOADS, so a
    test can count engine loads per worker."""
    import os

    if "counting" not in _SHARED:
        _SHARED["counting"] = ScriptedBackend()
        with open(os.environ["TASKSIEVE_TEST_LOADS"], "a") as fh:
            fh.write(f"{os.getpid()}\n")
    return _SHARED["counting"]


counting_backend.model_id = ScriptedBackend.model_id


def arithmetic_tasks(*prompts):
    """Math tasks for the scripted backend ("Calculate 5 + 3."), each with
    its true answer and a short content hash h0, h1, ..."""
    return [
        {
            "task_id": f"t{i}",
            "source": "v",
            "domain": "math",
            "prompt": p,
            "answer": str(eval(p[10:-1])),  # test data only: digits and operators
            "content_hash": f"h{i}",
        }
        for i, p in enumerate(prompts)
    ]


def sample_plan(mode: str, k: int, waves=(2, 2, 4), lo: float = 0.0, hi: float = 1.0):
    """The sampling stage's plan for the sampling tests: a fixed run id,
    model and seed, the given policy, k, waves and pass-rate band."""
    from tasksieve.schemas.config import BandConfig, SamplingConfig
    from tasksieve.transforms.sample.stage import SamplePlan

    return SamplePlan(
        run_id="r",
        model_id="m@1",
        sampler_key="sk",
        sampling=SamplingConfig(mode=mode, k=k, waves=list(waves), seed=0, system_prompt="sys"),
        band=BandConfig(min_pass_rate=lo, max_pass_rate=hi),
    )
