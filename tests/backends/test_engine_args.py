"""[model] engine arguments reach vLLM's engine (transforms/backends/vllm.py),
and an unknown key is a config error that says what was meant."""

import dataclasses

import pytest

from tasksieve.schemas.config import ConfigError, ModelConfig, RunConfig, SamplingConfig, load_config
from tasksieve.transforms.backends.vllm import engine_kwargs

GPU = {
    "tensor_parallel_size": 2,
    "gpu_memory_utilization": 0.85,
    "enable_prefix_caching": True,
    "max_num_seqs": 512,
    "dtype": "bfloat16",
}


def test_every_engine_argument_is_passed_through():
    cfg = RunConfig.model_validate({"model": GPU})
    kw = engine_kwargs("/m", cfg.sampling, cfg.model, cpu=False)
    for name, value in GPU.items():
        assert kw[name] == value, name
    assert "kv_cache_memory_bytes" not in kw  # on a GPU vLLM sizes its cache from gpu_memory_utilization


def test_unset_gpu_arguments_keep_vllm_defaults_and_cpu_sizes_its_cache():
    kw = engine_kwargs("/m", SamplingConfig(), ModelConfig(), cpu=True)
    assert "gpu_memory_utilization" not in kw and "enable_prefix_caching" not in kw
    assert kw["dtype"] == "float32" and kw["tensor_parallel_size"] == 1
    assert kw["kv_cache_memory_bytes"] == 2 * 2**30


def test_every_engine_field_changes_the_engine_arguments():
    base = engine_kwargs("/m", SamplingConfig(), ModelConfig(), cpu=True)
    changed = {
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "kv_cache_gib": 4.0,
        "max_num_batched_tokens": 1024,
        "max_num_seqs": 8,
        "tensor_parallel_size": 4,
        "gpu_memory_utilization": 0.5,
        "enable_prefix_caching": False,
    }
    assert set(changed) == set(ModelConfig.ENGINE_FIELDS)
    for name, value in changed.items():
        assert engine_kwargs("/m", SamplingConfig(), ModelConfig(**{name: value}), cpu=True) != base, name


def test_an_unknown_key_names_the_close_match_and_the_passed_arguments(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[model]\ntensor_parralel_size = 2\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "unknown key 'tensor_parralel_size'" in msg and "did you mean 'tensor_parallel_size'" in msg
    assert "gpu_memory_utilization" in msg
    with pytest.raises(ValueError, match="unknown key 'swap_space'"):
        ModelConfig.model_validate({"swap_space": 4})
    with pytest.raises(ValueError):
        ModelConfig.model_validate({"gpu_memory_utilization": 1.5})


@pytest.mark.slow
def test_the_arguments_are_vllm_engine_arguments():
    from vllm.engine.arg_utils import EngineArgs

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    cfg = RunConfig.model_validate({"model": GPU})
    for cpu in (True, False):
        assert set(engine_kwargs("/m", cfg.sampling, cfg.model, cpu=cpu)) - {"model"} <= known
