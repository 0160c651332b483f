import os, time
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
if __name__ == "__main__":
    import torch
    import vllm._custom_ops as ops
    shapes = [(960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576)]
    for M in (32, 128):
        for N, K in shapes:
            w = torch.randn(N, K); x = torch.randn(M, K)
            h = ops.create_onednn_mm(w.t(), 32)
            for f, name in ((lambda: ops.onednn_mm(h, x, None), "onednn"), (lambda: torch.nn.functional.linear(x, w), "F.linear")):
                f(); t = time.perf_counter(); r = 20
                for _ in range(r): f()
                dt = (time.perf_counter() - t) / r
                print(f"M={M} N={N} K={K} {name}: {dt*1e3:.2f} ms  {2*M*N*K/dt/1e9:.1f} GFLOP/s")
    x = torch.randn(32, 49152)
    t = time.perf_counter(); [x.sort(dim=-1) for _ in range(5)]; print("sort 32x49152", (time.perf_counter()-t)/5*1e3, "ms")
    print("threads", torch.get_num_threads())
