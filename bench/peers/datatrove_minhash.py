"""datatrove's MinHash dedup (its 4 stages, its defaults: 5-word shingles,
14 buckets x 8 hashes) on a folder of JSONL tasks; runs in the peers venv
(`bench/dedup.py` starts it). Prints one JSON line: removed task ids."""

import json
import sys
import time
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashes import xxhash as dt_xxhash
from datatrove.utils.word_tokenizers import WordTokenizer

# datatrove 0.10.1 hands str to xxhash, which xxhash 4.x refuses ("Strings
# must be encoded before hashing"): encode first, same hash values.
_xx64, _xx32 = dt_xxhash.xxhash64, dt_xxhash.xxhash32
dt_xxhash.xxhash64 = lambda s: _xx64(s.encode("utf-8") if isinstance(s, str) else s)
dt_xxhash.xxhash32 = lambda s: _xx32(s.encode("utf-8") if isinstance(s, str) else s)


class SplitTokenizer(WordTokenizer):
    """Whitespace tokens. datatrove's English tokenizer is NLTK's, which needs
    the `punkt` data downloaded at first use; this machine has no network.
    datatrove tokenizes *after* its own normalisation (lower case,
    punctuation removed), where NLTK's tokens are the whitespace tokens."""

    def __init__(self):
        super().__init__("en")

    def word_tokenize(self, text):
        return text.split()

    def sent_tokenize(self, text):
        return [text]

    def span_tokenize(self, text):
        raise NotImplementedError


def removed_ids(data: str, work: str, shards: int) -> list[str]:
    """Runs datatrove's 4 MinHash stages on the JSONL files in `data`
    (scratch files under `work`); returns the ids datatrove removes."""
    w = Path(work)
    cfg = MinhashConfig()  # datatrove defaults: 5-grams of words, 14 x 8

    def reader():
        return JsonlReader(data, text_key="prompt", id_key="task_id", glob_pattern="*.jsonl")

    kw = dict(workers=1, logging_dir=str(w / "logs"), skip_completed=False)  # not the cwd
    LocalPipelineExecutor(
        pipeline=[
            reader(),
            MinhashDedupSignature(output_folder=str(w / "sigs"), config=cfg, language=SplitTokenizer()),
        ],
        tasks=shards,
        **kw,
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(input_folder=str(w / "sigs"), output_folder=str(w / "buckets"), config=cfg)],
        tasks=cfg.num_buckets,
        **kw,
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(input_folder=str(w / "buckets"), output_folder=str(w / "remove"), config=cfg)],
        tasks=1,
        **kw,
    ).run()
    LocalPipelineExecutor(
        pipeline=[
            reader(),
            MinhashDedupFilter(
                input_folder=str(w / "remove"), exclusion_writer=JsonlWriter(str(w / "removed"), compression=None)
            ),
        ],
        tasks=shards,
        **kw,
    ).run()
    removed = []
    for f in sorted((w / "removed").glob("*.jsonl")):
        removed += [json.loads(line)["id"] for line in f.open()]
    return removed


def main(data: str, work: str, shards: int) -> None:
    t0 = time.perf_counter()
    removed = removed_ids(data, work, shards)
    print(json.dumps({"removed": removed, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
