"""The judge gate: before any attempt of a rubric task is sampled, is its
judge worth trusting on it?

For each rubric task of a batch, in ONE judge.generate call:
- calibration: the judge rates every graded response (labels.py) twice,
  the criteria once in the rubric's order and once reversed; kappa and
  agreement against the graders come from the first, self-agreement from
  both (agreement.py);
- probes: the judge rates every probe of probes.py.

Then, per task, first that applies:
- `graded_attempts_invalid`: its labels from a --graded file do not fit;
- `judge_hackable`: the judge passed a probe that must fail (named);
- `judge_unreliable`: kappa under [judge] min_kappa (evidence: kappa, n,
  the criteria where judge and graders disagree);
- `judge_uncalibrated`: no usable labels and [judge] require_calibration;
- else kept, marked `judge_agreement` = measured / unmeasured.
Drops are at stage `verifier_sanity` (the rubric verifier is the judge:
this is its sanity check), before anything is paid for beyond the judge's
own calls. Each task leaves one record (`gate_record`) that finish.py
turns into judge_agreement rows and cost rows (`store.py`).
"""

from __future__ import annotations

import hashlib
import json

from tasksieve.transforms.backends.base import BackendUnavailable, GenRequest
from tasksieve.transforms.stage import drop_record
from tasksieve.transforms.verify.judge.agreement import self_agreement, summarise
from tasksieve.transforms.verify.judge.labels import attach_graded, graded_of
from tasksieve.transforms.verify.judge.probes import judge_probes
from tasksieve.transforms.verify.judge.prompt import judge_messages, parse_judgement

STAGE = "verifier_sanity"


def criteria_of(task: dict) -> list[str]:
    return [c.strip() for c in (task.get("rubric") or []) if isinstance(c, str) and c.strip()]


def _seed(*parts) -> int:
    h = hashlib.sha256("\x00".join(map(str, parts)).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def _rubric_author(task: dict) -> str | None:
    """meta.rubric_author (or a delivery column of that name, kept in meta.extra)."""
    try:
        meta = json.loads(task.get("meta") or "{}")
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
    author = meta.get("rubric_author") or extra.get("rubric_author")
    return str(author)[:200] if author else None


class _Asks:
    """The judge requests of a batch and, once answered, their verdicts."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.requests: list[GenRequest] = []
        self.meta: list[tuple] = []  # (n_criteria, order, nonce)

    def add(self, task: dict, criteria: list[str], response: str, order: tuple, tag: str) -> int:
        messages, nonce = judge_messages(task["prompt"], criteria, response, self.max_chars, order)
        self.requests.append(GenRequest(messages=messages, seed=_seed("gate", task.get("content_hash"), tag)))
        self.meta.append((len(criteria), order, nonce))
        return len(self.requests) - 1

    def answer(self, judge) -> list:
        if not self.requests:
            return []
        try:
            results = judge.generate(self.requests)
        except BackendUnavailable:
            raise  # the run stops and resumes; nothing is decided on a dead judge
        except Exception as e:  # a judge that fails decides nothing in the task's favour
            return [(None, f"judge failed: {type(e).__name__}", None) for _ in self.requests]
        out = []
        for res, (n, order, nonce) in zip(results, self.meta):
            if res.error:
                out.append((None, f"judge failed: {res.error}"[:200], res))
                continue
            ratings, err = parse_judgement(res.completion, n, order, nonce)
            out.append((ratings, err, res))
        return out


def _passes(ratings, threshold: float) -> bool:
    return bool(ratings) and sum(ratings) / len(ratings) >= threshold


def _probe_passes(probe, ratings, threshold: float) -> bool:
    """Whether the judge let the probe through: any YES for an all-NO probe,
    else a pass at the task's threshold."""
    if probe.all_no:
        return bool(ratings) and any(ratings)
    return _passes(ratings, threshold)


def screen(
    tasks: list[dict], judge, judge_cfg, verify_cfg, run_id: str, graded_file: dict | None = None
) -> tuple[list[dict], list[dict], list[dict]]:
    """(kept tasks, dropped results, gate records) for a batch of tasks. Only
    rubric tasks are looked at; the others pass through unchanged."""
    kept, dropped, records = [], [], []
    asks = _Asks(verify_cfg.judge_max_chars)
    plans = []
    for task in tasks:
        if task.get("domain") != "rubric":
            kept.append(task)
            continue
        task, label_problem = attach_graded(task, graded_file)
        criteria = criteria_of(task)
        graded = [] if label_problem else graded_of(task)
        forward = tuple(range(len(criteria)))
        backward = tuple(reversed(forward))
        calib = [
            (
                g,
                asks.add(task, criteria, g["response"], forward, f"cal:{i}"),
                asks.add(task, criteria, g["response"], backward, f"cal-rev:{i}") if len(criteria) > 1 else None,
            )
            for i, g in enumerate(graded)
        ]
        probes = [
            (p, asks.add(task, criteria, p.text, forward, f"probe:{p.name}"))
            for p in (judge_probes(task["prompt"], criteria, graded) if judge_cfg.probes else [])
        ]
        plans.append((task, criteria, graded, label_problem, calib, probes))
    answers = asks.answer(judge) if plans else []
    model_id = getattr(judge, "model_id", None)
    for task, criteria, graded, label_problem, calib, probes in plans:
        rec = _decide(task, criteria, graded, label_problem, calib, probes, answers, judge_cfg, verify_cfg, model_id)
        records.append(dict(rec, run_id=run_id))
        if rec["verdict"] in ("trusted", "unmeasured"):
            kept.append(
                dict(
                    task,
                    judge_agreement="measured" if rec["verdict"] == "trusted" else "unmeasured",
                    judge_kappa=rec["kappa"],
                )
            )
        else:
            d = drop_record(task, STAGE, rec["verdict"], rec["evidence"], sort_keys=False)
            dropped.append(
                dict(
                    d,
                    run_id=run_id,
                    status="dropped",
                    judge_kappa=rec["kappa"],
                    judge_agreement="measured" if rec["kappa"] is not None else "unmeasured",
                )
            )
    return kept, dropped, records


def _decide(task, criteria, graded, label_problem, calib, probes, answers, judge_cfg, verify_cfg, model_id) -> dict:
    threshold = verify_cfg.rubric_pass_threshold
    tokens = [0, 0, 0.0]
    for _, i, j in calib:
        for k in (i, j):
            if k is not None and answers[k][2] is not None:
                r = answers[k][2]
                tokens[0] += r.prompt_tokens
                tokens[1] += r.completion_tokens
                tokens[2] += r.gen_seconds
    for _, i in probes:
        if answers[i][2] is not None:
            r = answers[i][2]
            tokens[0] += r.prompt_tokens
            tokens[1] += r.completion_tokens
            tokens[2] += r.gen_seconds
    labels, firsts, seconds = [], [], []
    for g, i, j in calib:
        ratings = answers[i][0] or [False] * len(criteria)  # unrated: not met
        for c, (h, v) in enumerate(zip(g["criteria_met"], ratings)):
            labels.append({"criterion": c + 1, "grader": g.get("grader"), "human": h, "judge": v})
        if j is not None:
            firsts += ratings
            seconds += answers[j][0] or [False] * len(criteria)
    probe_results = {p.name: _probe_passes(p, answers[i][0], threshold) for p, i in probes}
    hacked = [p for p, _ in probes if p.must_fail and probe_results[p.name]]
    human = [lab["human"] for lab in labels]
    judged = [lab["judge"] for lab in labels]
    stats = summarise(human, judged, judge_cfg.bootstrap, judge_cfg.min_labels_for_interval)
    disagree: dict[int, int] = {}
    for lab in labels:
        if lab["human"] != lab["judge"]:
            disagree[lab["criterion"]] = disagree.get(lab["criterion"], 0) + 1
    evidence = {
        "judge": model_id,
        "kappa": stats["kappa"],
        "n_labels": stats["n_labels"],
        "agreement": stats["agreement"],
        "min_kappa": judge_cfg.min_kappa,
        "disagreeing_criteria": [
            {"criterion": c, "text": criteria[c - 1][:200], "disagreements": n} for c, n in sorted(disagree.items())
        ],
        "probes_passed": [p.name for p in hacked],
    }
    if label_problem:
        verdict, evidence = "graded_attempts_invalid", dict(evidence, problem=label_problem)
    elif hacked:
        verdict = "judge_hackable"
        evidence = dict(evidence, probe=hacked[0].name, what=f"the judge passes {hacked[0].what}")
    elif stats["kappa"] is not None and stats["kappa"] < judge_cfg.min_kappa:
        verdict = "judge_unreliable"
    elif stats["kappa"] is None and judge_cfg.require_calibration:
        verdict = "judge_uncalibrated"
        evidence = dict(
            evidence, why="no graded_attempts with both met and unmet criteria; [judge] require_calibration = true"
        )
    else:
        verdict = "trusted" if stats["kappa"] is not None else "unmeasured"
    return {
        "task_id": task.get("task_id"),
        "source": task.get("source"),
        "content_hash": task.get("content_hash"),
        "judge_model_id": model_id,
        "rubric_author": _rubric_author(task),
        "verdict": verdict,
        "evidence": evidence,
        "labels": labels,
        **stats,
        "self_agreement": self_agreement(firsts, seconds) if firsts else None,
        "probes": probe_results,
        "judge_prompt_tokens": tokens[0],
        "judge_completion_tokens": tokens[1],
        "judge_seconds": tokens[2],
    }
