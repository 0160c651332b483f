"""Word weights for text evidence: inverse document frequency over the
benchmark items (and a background of clean tasks, if given), so that
boilerplate ("where m and n are relatively prime", "Return True if")
weighs little in `coverage` (rules.judge_item's text branch)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher


@dataclass
class Idf:
    """Inverse document frequency of words over the benchmark items (and a
    background of clean tasks, if given)."""

    docs: int = 0
    df: Counter = field(default_factory=Counter)
    # The last coverages asked, by the identity of both word lists (held, so
    # no other list takes an id): decontamination asks one (item, task)
    # pair up to three times (poor_need, confirmable, judge_item).
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def add(self, words) -> None:
        self.docs += 1
        self.df.update(set(words))
        self._memo.clear()

    def weight(self, word: str) -> float:
        return math.log((self.docs + 1) / (self.df.get(word, 0) + 1)) + 0.1  # never quite zero

    def coverage(self, item_words: list[str], task_words: list[str]) -> float:
        """IDF-weighted share of the item's words found in order in the task."""
        if not item_words:
            return 0.0
        key = (id(item_words), id(task_words))
        kept = self._memo.get(key)
        if kept is not None and kept[0] is item_words and kept[1] is task_words:
            return kept[2]
        if len(self._memo) >= 4096:
            self._memo.clear()
        cov = self._coverage(item_words, task_words)
        self._memo[key] = (item_words, task_words, cov)
        return cov

    def _coverage(self, item_words: list[str], task_words: list[str]) -> float:
        blocks = SequenceMatcher(None, item_words, task_words, autojunk=False).get_matching_blocks()
        hit = sum(self.weight(w) for b in blocks for w in item_words[b.a : b.a + b.size])
        return round(hit / sum(self.weight(w) for w in item_words), 4)
