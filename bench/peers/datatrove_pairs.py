"""datatrove's MinHash dedup (bench/peers/datatrove_minhash.py: its 4
stages, its defaults) run once per pair of tasks, each pair alone as a
two-task delivery; runs in the peers venv (`bench/same_problem.py` starts
it).

    python datatrove_pairs.py PAIRS.json WORK

PAIRS.json: [[{"task_id", "prompt"}, {"task_id", "prompt"}], ...]. Prints one
JSON line: {"removed": [[ids removed from pair 0], ...], "seconds": s}."""

import json
import sys
import time
from pathlib import Path

from loguru import logger

from datatrove_minhash import removed_ids


def main(pairs_path: str, work: str) -> None:
    logger.remove()  # datatrove logs every stage of every pair; the scores are what matter here
    logger.add(sys.stderr, level="ERROR")
    pairs = json.loads(Path(pairs_path).read_text())
    t0 = time.perf_counter()
    out = []
    for i, pair in enumerate(pairs):
        data = Path(work) / f"pair{i:04d}" / "data"
        data.mkdir(parents=True)
        with open(data / "pair.jsonl", "w", encoding="utf-8") as fh:
            for t in pair:
                fh.write(json.dumps({"task_id": t["task_id"], "prompt": t["prompt"]}) + "\n")
        out.append(removed_ids(str(data), str(data.parent / "dt"), 1))
    print(json.dumps({"removed": out, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
