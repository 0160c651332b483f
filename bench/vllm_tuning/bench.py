"""vLLM CPU throughput bench. Env: DT (dtype), N (requests), MT (max_tokens),
MNS (max_num_seqs), MNBT (max_num_batched_tokens), SEED=1 per-request seeds,
ATTN (attention backend name), PROFILE=1 cProfile the generate call."""
import os, time, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
if __name__ == "__main__":
    t0 = time.time()
    import torch
    from vllm import LLM, SamplingParams
    kw = dict(model=os.path.expanduser("~/.cache/tasksieve/models/SmolLM2-135M-Instruct"),
              dtype=os.environ.get("DT", "float32"), max_model_len=2048, enforce_eager=True,
              kv_cache_memory_bytes=2 << 30,
              max_num_batched_tokens=int(os.environ.get("MNBT", "65536")),
              max_num_seqs=int(os.environ.get("MNS", "256")))
    if os.environ.get("ATTN"):
        kw["attention_config"] = {"backend": os.environ["ATTN"]}
    llm = LLM(**kw)
    load = time.time() - t0
    print("torch threads", torch.get_num_threads(), "LD_PRELOAD", os.environ.get("LD_PRELOAD"))
    tok = llm.get_tokenizer()
    N = int(os.environ.get("N", "32")); MT = int(os.environ.get("MT", "128"))
    qs = [f"What is {a} + {b}?" for a in range(2, 10) for b in range(3, 5)]
    sysmsg = "You are a careful math assistant. Solve the problem step by step, then give the final answer as \\boxed{answer}."
    prompts = [tok.apply_chat_template([{"role": "system", "content": sysmsg}, {"role": "user", "content": qs[(i // 8) % len(qs)]}], tokenize=False, add_generation_prompt=True) for i in range(N)]
    seed = os.environ.get("SEED", "1") == "1"
    params = [SamplingParams(temperature=0.8, top_p=float(os.environ.get("TOPP", "0.95")), max_tokens=MT, seed=(1000 + i) if seed else None) for i in range(N)]
    # warmup
    llm.generate(prompts[:2], [SamplingParams(max_tokens=4, seed=1 if seed else None)] * 2, use_tqdm=False)
    t0 = time.time()
    if os.environ.get("PROFILE"):
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable()
    outs = llm.generate(prompts, params, use_tqdm=False)
    dt = time.time() - t0
    if os.environ.get("PROFILE"):
        pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    ntok = sum(len(o.outputs[0].token_ids) for o in outs)
    texts = [o.outputs[0].text for o in outs]
    print(f"RESULT dt={os.environ.get('DT','float32')} N={N} MT={MT} load={load:.1f}s gen={dt:.1f}s tokens={ntok} tok/s={ntok/dt:.1f} distinct={len(set(texts))}/{N}")
    for t in texts[:3]: print(repr(t[:200]))
