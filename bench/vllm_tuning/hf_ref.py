"""Plain transformers generate reference: fp32, batch of N, sampling."""
import os, time
if __name__ == "__main__":
    t0 = time.time()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    p = os.path.expanduser("~/.cache/tasksieve/models/SmolLM2-135M-Instruct")
    tok = AutoTokenizer.from_pretrained(p); tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(p, torch_dtype=getattr(torch, os.environ.get("DT", "float32"))).eval()
    load = time.time() - t0
    N = int(os.environ.get("N", "32")); MT = int(os.environ.get("MT", "128"))
    qs = [f"What is {a} + {b}?" for a in range(2, 10) for b in range(3, 5)]
    sysmsg = "You are a careful math assistant. Solve the problem step by step, then give the final answer as \\boxed{answer}."
    prompts = [tok.apply_chat_template([{"role": "system", "content": sysmsg}, {"role": "user", "content": qs[(i // 8) % len(qs)]}], tokenize=False, add_generation_prompt=True) for i in range(N)]
    enc = tok(prompts, return_tensors="pt", padding=True)
    print("prompt len", enc.input_ids.shape, "threads", torch.get_num_threads())
    torch.manual_seed(0)
    with torch.inference_mode():
        t0 = time.time()
        out = model.generate(**enc, do_sample=True, temperature=0.8, top_p=float(os.environ.get("TOPP", "0.95")), max_new_tokens=MT, pad_token_id=tok.pad_token_id or tok.eos_token_id)
        dt = time.time() - t0
    gen = out[:, enc.input_ids.shape[1]:]
    eos = tok.eos_token_id
    ntok = 0
    for row in gen.tolist():
        n = 0
        for t in row:
            n += 1
            if t == eos: break
        ntok += n
    print(f"RESULT hf dt={os.environ.get('DT','float32')} N={N} MT={MT} load={load:.1f}s gen={dt:.1f}s tokens={ntok} tok/s={ntok/dt:.1f}")
