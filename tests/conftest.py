import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))  # tests/fakes.py


def pytest_collection_modifyitems(config, items):
    """A test of the real vLLM engine is slow by nature: it belongs to the
    full suite, never to the fast tier (`-m "not slow"`)."""
    for item in items:
        if item.get_closest_marker("vllm") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory):
    """The bundled sample delivery, built once per test session."""
    from tasksieve.pipeline.setup.sample_data import write_sample

    out = tmp_path_factory.mktemp("sample")
    write_sample(out)
    return out / "deliveries"


@pytest.fixture(autouse=True)
def _no_remembered_answers():
    """Each test starts with no math answer kept from an earlier test
    (transforms/verify/answer_memo.py), so tests that count the worker's
    round trips count their own."""
    from tasksieve.transforms.verify import answer_memo

    answer_memo.forget()
    yield
