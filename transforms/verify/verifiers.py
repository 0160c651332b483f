"""Verifiers: (task, completion) -> verdict, for every domain.

A verdict is a dict with passed, score (0..1), extracted_answer, error,
verifier, verify_seconds, and the rubric judge's judge_model_id,
judge_prompt_tokens, judge_completion_tokens, judge_seconds (None for the
other domains). A verifier never raises: a crash, a timeout or a hostile
attempt is recorded in `error` and the attempt counts as not passed.

- math: math-verify equivalence (math_answers.py, deadline in a worker process);
- exact: normalised exact match, or a /regex/ reference matched in full;
- code: the task's tests run against the attempt in the sandbox (sandbox/runner.py);
- rubric: an LLM judge, through the same Backend interface as the sampler,
  rates each criterion YES/NO; score = share met, pass at the threshold.

`verify_attempts` verifies a whole wave at once: code and math in a thread
pool (each verification is a separate process, so threads suffice), every
rubric judge prompt of the wave in ONE judge.generate call.
"""

from __future__ import annotations

import ast
import hashlib
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.backends.base import (
    REQUEST_FAILED,
    Backend,
    BackendUnavailable,
    GenRequest,
    GenResult,
    ServerRefused,
)
from tasksieve.transforms.normalize import normalize_text
from tasksieve.transforms.verify.sandbox import runner as sandbox
from tasksieve.transforms.verify import math_answers as vm
from tasksieve.transforms.verify.answer_form import has_invisible
from tasksieve.transforms.verify.judge import prompt as judge_prompt
from tasksieve.transforms.verify.math_answers import extract_final_answers

VERIFIABLE = ("math", "exact", "code", "rubric")
# finish_reason of a judge reply its server failed: no verdict, whatever it holds.
# ("length", cut off, is a verdict only when every criterion was rated.)
JUDGE_FAILED = ("error", "abort", REQUEST_FAILED)
JUDGE_FIELDS = ("judge_model_id", "judge_prompt_tokens", "judge_completion_tokens", "judge_seconds")
# Source longer than this is not compiled or run: no real answer is this long.
MAX_CODE_CHARS = 100_000
EXTRACTED_KEEP_CHARS = 4000
# Characters extract_code may compile while cutting prose off the end of an unfenced
# completion: 200 cuts of a 100,000-character one were ~25 s of the parent's CPU.
EXTRACT_COMPILE_BUDGET = 1_000_000


def _verdict(verifier: str, **kw) -> dict:
    out = {
        "passed": False,
        "score": 0.0,
        "extracted_answer": None,
        "error": None,
        "verifier": verifier,
        "verify_seconds": 0.0,
        **{f: None for f in JUDGE_FIELDS},
    }
    out.update(kw)
    return out


# --- exact ---------------------------------------------------------------------------------

MAX_REGEX_CHARS = 1000
MAX_EXACT_CANDIDATE_CHARS = 1000


def is_regex_reference(reference: str) -> bool:
    return len(reference) > 2 and reference.startswith("/") and reference.endswith("/")


def verify_exact(reference: str, completion: str, prompt: str = "", timeout_s: float = vm.DEFAULT_TIMEOUT_S) -> dict:
    """Normalised exact match of the final answer (every one, when there are
    several); a reference written as /pattern/ is a regular expression
    matched in full, in a worker process under a deadline (a nested
    quantifier can backtrack for hours on model output)."""
    t0 = time.perf_counter()
    answers, _ = extract_final_answers(completion, prompt, math_only=False)
    out = _verdict("exact", extracted_answer=" | ".join(answers) if answers else None)
    if is_regex_reference(reference):
        if len(reference) > MAX_REGEX_CHARS:
            out["error"] = f"reference regex is over {MAX_REGEX_CHARS} characters"
            return out

        def check(a):
            if len(a) > MAX_EXACT_CANDIDATE_CHARS:
                return {"ok": False, "error": None}
            return vm.regex_with_deadline(reference[1:-1], a.strip(), timeout_s)
    else:

        def check(a):
            return {"ok": normalize_text(a) == normalize_text(reference), "error": None}

    ans = vm.all_answers_pass(
        answers,
        lambda a: (
            {"ok": False, "error": "invisible_character"}
            if has_invisible(a) and not has_invisible(reference)
            else check(a)
        ),
    )
    out.update(passed=bool(ans["ok"]), score=1.0 if ans["ok"] else 0.0, error=ans.get("error"))
    out["verify_seconds"] = time.perf_counter() - t0
    return out


# --- code ----------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_CODE_START = re.compile(r"^(?:async\s+def|def|class|import|from|@)\b")


def compile_error(source: str, label: str) -> str | None:
    """'syntax error: ...' when `source` does not compile (compile only:
    nothing runs in this process)."""
    if len(source) > MAX_CODE_CHARS:
        return f"syntax error: {label} is over {MAX_CODE_CHARS} characters"
    try:
        compile(source, f"<{label}>", "exec")
        return None
    except SyntaxError as e:
        return f"syntax error in {label}: {e.msg} (line {e.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        return f"syntax error in {label}: {type(e).__name__}: {e}"[:300]


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^[ \t]*(?:async\s+def|def|class)\s+{re.escape(name)}\b", code, re.M) is not None


def extract_code(completion: str, entry_point: str) -> str:
    """The program in a completion. Fenced blocks (```python, ```py or bare
    ```; an unclosed fence runs to the end): the last one that defines the
    entry point, else all of them joined. No fence: from the first line that
    starts code (def/class/import/from/@) on, with trailing prose lines cut
    until it compiles; "" when there is no code at all."""
    blocks = [
        body for lang, body in _FENCE.findall(completion or "") if lang.lower() in ("", "python", "py", "python3")
    ]
    if blocks:
        defining = [b for b in blocks if _defines(b, entry_point)]
        return (defining[-1] if defining else "\n\n".join(blocks)).strip("\n")
    text = completion or ""
    if compile_error(text, "attempt") is None:
        return text
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        # "Sure! def f(x): ..." : code that starts mid-line, or no code at all.
        at = text.find(f"def {entry_point}")
        return text[at:] if at >= 0 else ""
    lines = lines[start:]
    budget = EXTRACT_COMPILE_BUDGET
    for end in range(len(lines), max(0, len(lines) - 200), -1):
        # Only cut at a line that is not indented: prose after the code.
        if end < len(lines) and lines[end][:1] in (" ", "\t"):
            continue
        candidate = "\n".join(lines[:end])
        budget -= len(candidate)
        if budget < 0:  # compiled in this (unsandboxed) process, outside any deadline
            break
        if compile_error(candidate, "attempt") is None:
            return candidate
    return "\n".join(lines)


def calls_check(tests: str) -> bool:
    """HumanEval style: the tests define check(candidate) and leave calling
    it to the harness. Plain assert programs (and tests that call check
    themselves) run as they are."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    defines = any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)
    calls = any(
        isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id == "check"
        for n in tree.body
    )
    return defines and not calls


def code_case(task: dict, solution: str) -> dict:
    """A sandbox case. `support` is the task's reference solution: the
    harness takes the helpers the tests use (HumanEval's `poly`) from it,
    never from the attempt."""
    tests = task.get("tests") or ""
    return {
        "solution": solution,
        "tests": tests,
        "entry_point": (task.get("entry_point") or "").strip(),
        "call_check": calls_check(tests),
        "support": task.get("reference_solution") or "",
    }


def limits_of(settings: VerifyConfig) -> sandbox.Limits:
    return sandbox.Limits(
        cpu_seconds=settings.code_cpu_seconds,
        wall_seconds=settings.code_wall_seconds,
        memory_mb=settings.code_memory_mb,
        output_bytes=settings.code_output_kb * 1024,
    )


def _syntax_error(code: str) -> str | None:
    """None when the attempt compiles, else `syntax_error (line N)`: the
    compiler's message can quote attempt text, which never goes into a
    verdict. Over MAX_CODE_CHARS nothing is compiled at all."""
    if len(code) > MAX_CODE_CHARS:
        return f"syntax_error (over {MAX_CODE_CHARS} characters)"
    try:
        compile(code, "<attempt>", "exec")
        return None
    except SyntaxError as e:
        return f"syntax_error (line {e.lineno})" if e.lineno else "syntax_error"
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return "syntax_error"


def verify_code(task: dict, completion: str, settings: VerifyConfig | None = None) -> dict:
    settings = settings or VerifyConfig()
    t0 = time.perf_counter()
    entry = (task.get("entry_point") or "").strip()
    code = extract_code(completion, entry)
    out = _verdict("code", extracted_answer=code[:EXTRACTED_KEEP_CHARS])
    try:
        if not code.strip():
            out["error"] = "no_code"
        elif (syntax := _syntax_error(code)) is not None:
            out["error"] = syntax
        else:
            res = sandbox.run_cases([code_case(task, code)], limits_of(settings), settings.sandbox).results[0]
            out.update(passed=res.passed, score=1.0 if res.passed else 0.0, error=res.error)
    except sandbox.NoSafeSandbox:
        out["error"] = "no_safe_sandbox"
    except Exception as e:  # the sandbox itself failed: the attempt is marked, the run goes on
        out["error"] = f"verifier_error: {type(e).__name__}"
    out["verify_seconds"] = time.perf_counter() - t0
    return out


# --- rubric --------------------------------------------------------------------------------

# The prompt, its fence and the reply parser: transforms/verify/judge/prompt.py.
JUDGE_SYSTEM = judge_prompt.JUDGE_SYSTEM


def criteria_of(task: dict) -> list[str]:
    return [c.strip() for c in (task.get("rubric") or []) if isinstance(c, str) and c.strip()]


def judge_messages(task: dict, completion: str, max_chars: int = 8000) -> tuple:
    """The judge's messages for one attempt: the response fenced as data."""
    return judge_prompt.judge_messages(task["prompt"], criteria_of(task), completion or "", max_chars)[0]


def parse_judgement(text: str, n_criteria: int, nonce: str | None = None) -> tuple[list[bool] | None, str | None]:
    return judge_prompt.parse_judgement(text, n_criteria, None, nonce)


def judge_seed(task: dict, completion: str, seed: int | None) -> int:
    h = hashlib.sha256(f"judge:{seed}:{task.get('content_hash')}:{completion}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def verify_rubric_batch(
    items: list[tuple[dict, str]], judge: Backend | None, settings: VerifyConfig, seeds: list[int | None] | None = None
) -> list[dict]:
    """All rubric attempts of a wave, judged in one judge.generate call."""
    if not items:
        return []
    if judge is None:
        return [_verdict("rubric", error="no judge backend configured") for _ in items]
    asked = rubric_requests(items, settings, seeds)
    try:
        results = judge.generate([req for req, _ in asked])
    except (BackendUnavailable, ServerRefused):
        raise  # a judge server that is gone or refuses us stops the run: its silence is no verdict
    except Exception as e:  # the judge failed: no attempt of the wave is judged (not measured), the run goes on
        why = f"judge failed: {type(e).__name__}: {e}"[:500]
        return [_verdict("rubric", error=why, passed=None, score=None, unmeasured=True) for _ in items]
    return [
        rubric_verdict(task, nonce, res, judge, settings) for (task, _), (_, nonce), res in zip(items, asked, results)
    ]


def rubric_requests(
    items: list[tuple[dict, str]], settings: VerifyConfig, seeds: list[int | None] | None = None
) -> list[tuple[GenRequest, str]]:
    """The judge's request for each (task, completion), with the nonce its
    answer must carry. Split from the call so that a queue can send them
    beside the sampling requests (transforms/sample/verify_behind.py)."""
    seeds = seeds or [None] * len(items)
    out = []
    for (t, c), s in zip(items, seeds):
        messages, nonce = judge_prompt.judge_messages(t["prompt"], criteria_of(t), c or "", settings.judge_max_chars)
        out.append((GenRequest(messages=messages, seed=judge_seed(t, c, s)), nonce))
    return out


def rubric_verdict(task: dict, nonce: str, res: GenResult, judge: Backend, settings: VerifyConfig) -> dict:
    """The verdict from the judge's answer to `rubric_requests`' request."""
    t0 = time.perf_counter()
    v = _verdict(
        "rubric",
        judge_model_id=judge.model_id,
        judge_prompt_tokens=res.prompt_tokens,
        judge_completion_tokens=res.completion_tokens,
        judge_seconds=res.gen_seconds,
        extracted_answer=(res.completion or "")[:EXTRACTED_KEEP_CHARS],
    )
    failed = res.error or (
        res.finish_reason in JUDGE_FAILED and f"reply ended with finish_reason {res.finish_reason!r}"
    )
    if not failed and not (res.completion or "").strip():
        failed = "an empty reply"
    ratings, err = (None, None) if failed else parse_judgement(res.completion, len(criteria_of(task)), nonce)
    if not failed and err and res.finish_reason == "length":
        # Cut off before it rated every criterion: what it did not rate was
        # never judged (a reply cut after the last rating is a verdict).
        failed = f"reply cut off (finish_reason 'length'): {err}"
    if failed:
        # The judge's server failed, or its reply was cut off or empty: the
        # attempt was not judged. Not a fail: stage.attempt_row leaves it out
        # of the task's counts (passed is null) and the task is not measured.
        v.update(error=f"judge failed: {failed}"[:500], passed=None, score=None, unmeasured=True)
    else:
        v["error"] = err
        if ratings:
            score = sum(ratings) / len(ratings)
            v.update(score=score, passed=score >= settings.rubric_pass_threshold)
    v["verify_seconds"] = time.perf_counter() - t0
    return v


# --- one interface -------------------------------------------------------------------------


def verify_one(task: dict, completion: str, settings: VerifyConfig | None = None) -> dict:
    """Any domain but rubric (which needs a judge: verify_attempts)."""
    settings = settings or VerifyConfig()
    domain = task["domain"]
    try:
        if domain == "math":
            return dict(
                _verdict("math"),
                **vm.verify_math(task["answer"], completion, settings.math_timeout_s, task.get("prompt") or ""),
            )
        if domain == "exact":
            return verify_exact(task["answer"], completion, task.get("prompt") or "", settings.math_timeout_s)
        if domain == "code":
            return verify_code(task, completion, settings)
        return _verdict(domain, error=f"no verifier for domain {domain!r}")
    except Exception as e:
        return _verdict(domain, error=f"verifier_error: {type(e).__name__}")


def verify_attempts(
    items: list[tuple[dict, str]],
    judge: Backend | None = None,
    settings: VerifyConfig | None = None,
    seeds: list[int | None] | None = None,
) -> list[dict]:
    """Verdicts for a wave of (task, completion) pairs, in order. Code and
    math run `settings.parallel` at a time; rubric attempts go to the judge
    in one batched call while those run."""
    settings = settings or VerifyConfig()
    vm.configure(settings.parallel)
    seeds = seeds or [None] * len(items)
    verdicts: list[dict | None] = [None] * len(items)
    rubric = [i for i, (t, _) in enumerate(items) if t["domain"] == "rubric"]
    others = [i for i, (t, _) in enumerate(items) if t["domain"] != "rubric"]
    with ThreadPoolExecutor(max_workers=settings.parallel) as pool:
        futures = {i: pool.submit(verify_one, items[i][0], items[i][1], settings) for i in others}
        judged = verify_rubric_batch([items[i] for i in rubric], judge, settings, [seeds[i] for i in rubric])
        for i, v in zip(rubric, judged):
            verdicts[i] = v
        for i, f in futures.items():
            verdicts[i] = f.result()
    return verdicts


def verifier_for(domain: str) -> Callable[[dict, str], dict] | None:
    """A single-attempt verifier (default settings) for the domains that
    need no judge; None for rubric and unknown domains."""
    if domain in ("math", "exact", "code"):
        return verify_one
    return None
