"""Engine settings on this machine, as ratios against the shipped default.

Each setting runs in its own process (one vLLM engine per process) on the
same chat-templated arithmetic prompts with distinct per-request seeds; the
figure of merit is completion tokens per second inside `generate`. The
baseline is tasksieve's CPU default (float32, top_p 1.0, every request in
one call), measured in the same run; every other row is a ratio to it.

    .venv/bin/python bench/engine_settings.py [--requests 128] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    "default (float32, top_p 1.0, one call)": {},
    "top_p 0.95": {"top_p": 0.95},
    "bfloat16": {"dtype": "bfloat16"},
    "4 calls of a quarter each": {"split": 4},
}


def worker(setting: dict, n: int, max_tokens: int) -> dict:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from vllm import LLM, SamplingParams

    from tasksieve.pipeline.setup.models import ensure_default_model

    llm = LLM(
        model=str(ensure_default_model()),
        dtype=setting.get("dtype", "float32"),
        max_model_len=1024,
        enforce_eager=True,
        kv_cache_memory_bytes=1 << 30,
        max_num_batched_tokens=65536,
        max_num_seqs=256,
    )
    tok = llm.get_tokenizer()
    prompts = [
        tok.apply_chat_template(
            [
                {"role": "system", "content": "Solve step by step, then give the final answer as \\boxed{answer}."},
                {"role": "user", "content": f"Calculate {2 + i % 8} + {3 + i % 5}."},
            ],
            tokenize=False,
            add_generation_prompt=True,
        )
        for i in range(n)
    ]
    params = [
        SamplingParams(temperature=0.8, top_p=setting.get("top_p", 1.0), max_tokens=max_tokens, seed=1000 + i)
        for i in range(n)
    ]
    llm.generate(prompts[:2], params[:2], use_tqdm=False)  # warm-up
    step = -(-n // setting.get("split", 1))
    t0 = time.perf_counter()
    outs = []
    for i in range(0, n, step):
        outs += llm.generate(prompts[i : i + step], params[i : i + step], use_tqdm=False)
    dt = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return {"tok_s": tokens / dt, "tokens": tokens, "seconds": dt, "distinct": len({o.outputs[0].text for o in outs})}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker), args.requests, args.max_tokens)))
        return
    rows = {}
    for name, setting in SETTINGS.items():
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                json.dumps(setting),
                "--requests",
                str(args.requests),
                "--max-tokens",
                str(args.max_tokens),
            ],
            capture_output=True,
            text=True,
        )
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        rows[name] = json.loads(line[len("RESULT ") :]) if line else None
    base = rows[next(iter(SETTINGS))]
    print(f"{'setting':<40}{'tokens/s':>10}{'ratio':>8}{'distinct samples':>18}")
    for name, r in rows.items():
        if r is None or base is None:
            print(f"{name:<40}{'failed':>10}")
            continue
        print(f"{name:<40}{r['tok_s']:>10.1f}{r['tok_s'] / base['tok_s']:>8.2f}{r['distinct']:>14}/{args.requests}")


if __name__ == "__main__":
    main()
