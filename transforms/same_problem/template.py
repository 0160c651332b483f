"""The template a task fills (`template_group`), set on every task when it
is hashed (normalize.py). Imports nothing of the package, so normalize.py
may call it without a cycle; same_problem/relation.py decides the
relations between tasks of one template."""

from __future__ import annotations

import hashlib
import re

# Names, and each sentence's first word: a capital that starts a word. Written
# as `\b[A-Z][a-z][\w'-]*` would be, but led by the capital and checked
# behind it (no word character before), so `re` jumps to candidate capitals
# instead of trying a word boundary at every position: the pattern runs in
# half the time on the bench pool's prompts, and every task is hashed with it.
CAPITALISED = re.compile(r"[A-Z](?<!\w[A-Z])[a-z][\w'-]*")
_MASK_DIGITS = re.compile(r"\d+(?:[.,/]\d+)*")


def template_group(prompt: str) -> str:
    """The template a task fills: a digest of its prompt with every number
    (digits) and every capitalised word (names, and each sentence's first
    word) masked. Siblings and variants of one template share it, and near
    dedup gives a kept variant its original's (near_decide.decide_cluster).
    `select` treats a group as one cluster for its caps."""
    masked = " ".join(_MASK_DIGITS.sub("#", CAPITALISED.sub("N", prompt or "")).lower().split())
    return "tg" + hashlib.sha256(masked.encode("utf-8", "surrogatepass")).hexdigest()[:14]
