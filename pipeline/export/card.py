"""The dataset card (README.md) every export carries: what is in it, where
it came from and how it was curated, so a copy on a training cluster keeps
its meaning."""

from __future__ import annotations

from collections import Counter


def _table(counter: Counter, head: str) -> list[str]:
    lines = [f"| {head} | tasks |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))]
    return lines


def pass_rate_histogram(rows: list[dict], bins: int = 10) -> list[str]:
    counts = [0] * bins
    for r in rows:
        p = r.get("pass_rate")
        if p is not None:
            counts[min(bins - 1, max(0, int(p * bins)))] += 1
    top = max(counts) or 1
    return [f"{i / bins:.1f}-{(i + 1) / bins:.1f} | {'#' * round(20 * c / top):<20} {c}" for i, c in enumerate(counts)]


def dataset_card(rows: list[dict], manifest: dict) -> str:
    fmt = manifest["format"]
    lines = [
        "---",
        "tags: [tasksieve, rl, grpo]",
        "---",
        "",
        f"# tasksieve export ({fmt})",
        "",
        f"{manifest['rows']} tasks that the model `{manifest['model_id']}` solved sometimes but not always "
        f"(tasksieve run `{manifest['run_id']}`"
        + (f", selection `{manifest['selection_id']}`" if manifest.get("selection_id") else "")
        + ").",
        "",
        "How it was curated: the deliveries were validated, exact and near duplicates and benchmark-contaminated "
        "items removed, each task's verifier checked against hack probes, then several attempts per task were "
        "sampled and verified; a task is here because its pass rate was strictly between 0 and 1. Each row's "
        "`pass_rate`, `n_attempts` and `n_pass` are that measurement; `run_id` and `model_id` name it.",
        "",
        "Rewards: `tasksieve.rewards` scores an attempt with the verifier curation used (math-verify rules, "
        "the sandboxed code harness, the rubric judge), from the row's `verifier` spec; see docs/export.md.",
        "",
    ]
    lines += ["## Domains", ""] + _table(Counter(r.get("domain") for r in rows), "domain") + [""]
    lines += ["## Sources", ""] + _table(Counter(r.get("source") for r in rows), "source") + [""]
    lines += ["## Licences", ""] + _table(Counter(r.get("license") or "(none given)" for r in rows), "licence")
    if manifest.get("licenses_filter"):
        lines.append(
            f"\nFiltered with --licenses {' '.join(manifest['licenses_filter'])}: "
            f"{manifest['refused_by_license']} tasks left out."
        )
    lines += ["", "## Pass rates", "", "```"] + pass_rate_histogram(rows) + ["```", ""]
    lines += (
        ["## Files", ""]
        + [f"- `{f}`" for f in manifest.get("files", [])]
        + ["- `export.json`: this export's manifest", ""]
    )
    return "\n".join(lines)
