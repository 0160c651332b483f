"""One exported row per learnable task, for each trainer format. Pure
functions of a task row (the learnable set's fields plus provenance): no
I/O, so each format is tested on its own.

Every format carries a `verifier` spec (JSON: domain, prompt, answer,
tests, entry_point, reference_solution, rubric, content_hash): what
`tasksieve.rewards` needs to score an attempt exactly as curation did. The
prompt a trainer shows the model is the curation run's own chat (its
system prompt for the domain, then the task's prompt), so the pass rates
measured by curation describe the prompts the trainer samples.

Formats (documented inputs, cited in docs/export.md):
- verl: `data_source`, `prompt` (chat messages), `ability`,
  `reward_model` {style, ground_truth}, `extra_info` (provenance, tests,
  entry point, criteria, the verifier spec);
- trl (GRPOTrainer): a conversational `prompt` column plus the columns its
  reward functions receive as keyword arguments;
- openrlhf: `prompt` (chat messages, for --apply_chat_template with
  --input_key prompt) and `label` (the verifier spec, --label_key label);
- hf: the learnable fields, the chat prompt and the provenance, flat.
"""

from __future__ import annotations

import json

FORMATS = ("verl", "trl", "openrlhf", "hf")
# Fields of the verifier spec: all a verifier reads of a task.
VERIFIER_FIELDS = ("domain", "prompt", "answer", "tests", "entry_point", "reference_solution", "rubric", "content_hash")
# Provenance every exported row keeps, whatever the format.
PROVENANCE = ("task_id", "source", "license", "content_hash", "run_id", "model_id")
STATS = ("pass_rate", "n_attempts", "n_pass", "difficulty")


def verifier_spec(task: dict) -> str:
    """The task's verifier inputs as one JSON string (sorted keys: the same
    task always gives the same bytes)."""
    spec = {f: task.get(f) for f in VERIFIER_FIELDS}
    spec["rubric"] = list(spec["rubric"] or [])
    return json.dumps(spec, sort_keys=True, ensure_ascii=False)


def chat(task: dict, system_prompt: str | None) -> list[dict]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": task["prompt"]}]


def ground_truth(task: dict) -> str:
    """What verl calls the ground truth: the reference answer (math,
    exact), the tests (code), the criteria as a JSON list (rubric)."""
    domain = task.get("domain")
    if domain == "code":
        return task.get("tests") or ""
    if domain == "rubric":
        return json.dumps(list(task.get("rubric") or []), ensure_ascii=False)
    return task.get("answer") or ""


def _provenance(task: dict) -> dict:
    return {f: task.get(f) for f in PROVENANCE + STATS}


def verl_row(task: dict, index: int, system_prompt: str | None) -> dict:
    extra = {
        "split": "train",
        "index": index,
        "domain": task.get("domain"),
        "tests": task.get("tests"),
        "entry_point": task.get("entry_point"),
        "criteria": list(task.get("rubric") or []),
        "verifier": verifier_spec(task),
        **_provenance(task),
    }
    return {
        "data_source": f"tasksieve/{task.get('source') or 'unknown'}",
        "prompt": chat(task, system_prompt),
        "ability": task.get("domain"),
        "reward_model": {
            "style": "model" if task.get("domain") == "rubric" else "rule",
            "ground_truth": ground_truth(task),
        },
        "extra_info": extra,
    }


def trl_row(task: dict, index: int, system_prompt: str | None) -> dict:
    return {
        "prompt": chat(task, system_prompt),
        "domain": task.get("domain"),
        "answer": task.get("answer"),
        "tests": task.get("tests"),
        "entry_point": task.get("entry_point"),
        "criteria": list(task.get("rubric") or []),
        "verifier": verifier_spec(task),
        **_provenance(task),
    }


def openrlhf_row(task: dict, index: int, system_prompt: str | None) -> dict:
    return {
        "prompt": chat(task, system_prompt),
        "label": verifier_spec(task),
        "domain": task.get("domain"),
        **_provenance(task),
    }


def hf_row(task: dict, index: int, system_prompt: str | None) -> dict:
    keep = (
        "task_id",
        "source",
        "batch_id",
        "domain",
        "prompt",
        "answer",
        "tests",
        "entry_point",
        "reference_solution",
        "rubric",
        "license",
        "created_at",
        "meta",
        "content_hash",
    )
    row = {f: task.get(f) for f in keep}
    row["rubric"] = list(row["rubric"] or [])
    return {**row, "messages": chat(task, system_prompt), "verifier": verifier_spec(task), **_provenance(task)}


ROW_BUILDERS = {"verl": verl_row, "trl": trl_row, "openrlhf": openrlhf_row, "hf": hf_row}


def is_noncommercial(license_id: str | None) -> bool:
    """A licence that forbids commercial use (CC *-NC-*, 'non-commercial',
    'research only'). Unknown or missing licences are not assumed free."""
    text = (license_id or "").lower().replace("_", "-")
    return "-nc" in text or "noncommercial" in text.replace("-", "") or "research-only" in text.replace(" ", "-")


def license_allowed(license_id: str | None, allowed: list[str] | None) -> bool:
    """`allowed` lists licence ids (case-insensitive); the word `commercial`
    admits any known licence that does not forbid commercial use. No
    filter admits every row; with a filter a missing licence is refused."""
    if not allowed:
        return True
    if not license_id or not license_id.strip():
        return False
    wanted = {a.strip().lower() for a in allowed}
    if license_id.strip().lower() in wanted:
        return True
    return "commercial" in wanted and not is_noncommercial(license_id)


def split_name(value: str | None) -> str:
    """A split name `datasets` accepts (letters, digits, underscores)."""
    name = "".join(ch if ch.isalnum() else "_" for ch in (value or "unknown")).strip("_")
    return name or "unknown"
