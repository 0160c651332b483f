"""When to stop sampling a task: the per-task stopping rule, Beam-free.

`fixed` asks for all k attempts at once. `sequential` asks in waves and stops
a task as soon as it has both a pass and a fail. With the default band
(learnable = at least one pass and one fail) the keep/drop decision is the
same as `fixed` with the same k: a task that has shown both outcomes is
learnable whatever the remaining attempts say, and a task that has not shown
both is sampled until k, exactly as `fixed` would.

With a narrowed band (say 0.1 <= pass rate <= 0.9) early stopping would
change decisions, so `sequential` then samples all k, like `fixed`.
"""

from __future__ import annotations

import hashlib
import json


def default_band(min_pass_rate: float, max_pass_rate: float) -> bool:
    return min_pass_rate <= 0.0 and max_pass_rate >= 1.0


def next_wave(mode: str, k: int, waves: list[int], n_done: int, n_pass: int, band_is_default: bool = True) -> int:
    """How many more attempts to ask for now; 0 means the task is decided."""
    remaining = k - n_done
    if remaining <= 0:
        return 0
    if mode == "fixed" or not band_is_default:
        return remaining
    if mode != "sequential":
        raise ValueError(f"unknown sampling mode {mode!r}")
    if 0 < n_pass < n_done:
        return 0  # a pass and a fail: learnable, whatever comes next
    # Which wave are we in? Walk the schedule; the last size repeats.
    done_so_far, i = 0, 0
    while True:
        size = waves[min(i, len(waves) - 1)]
        if done_so_far + size > n_done:
            return min(done_so_far + size - n_done, remaining)
        done_so_far += size
        i += 1


def attempt_seed(base_seed: int, content_hash: str, attempt_idx: int) -> int:
    """A distinct, reproducible seed per attempt: identical seeds make
    identical samples, and a resumed run must redraw the same attempt."""
    h = hashlib.sha256(f"{base_seed}:{content_hash}:{attempt_idx}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def sampler_key(params: dict) -> str:
    """Hash of everything that changes what an attempt would be."""
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
