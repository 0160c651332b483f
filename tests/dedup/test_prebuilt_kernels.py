"""Issue 14: the near-dedup kernels built ahead of time
(transforms/dedup/kernels_build.py) give the JIT kernels' bits, fall back
to them on argument types they were not built for, and are loaded only
when built from this very kernels.py, numba and CPU: never a stale build."""

import importlib.metadata
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tasksieve.transforms.dedup import kernels

from tasksieve.transforms.dedup import kernels_build

from tasksieve.transforms.batch import sketch
from tasksieve.transforms.dedup import signatures as sg
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.normalize import normalize_text

PARAMS = (
    MinHashParams(),
    MinHashParams(num_perm=112, bands=14, rows=8),
    MinHashParams(shingle="char", size=1),
    MinHashParams(shingle="word", size=2),
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler here: kernels_build cannot build, runs use the JIT kernels")
    folder = tmp_path_factory.mktemp("prebuilt")
    return folder, kernels_build.build(folder)


@pytest.fixture
def use(monkeypatch):
    """Point the loader at a folder (its cached answer cleared before and after)."""

    def point(folder):
        monkeypatch.setattr(kernels, "PREBUILT_DIR", folder)
        kernels._prebuilt.cache_clear()

    yield point
    kernels._prebuilt.cache_clear()


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    words = "alpha beta gamma 12 delta 3.5 epsilon zeta 東京 x ( ) . , ½ Ⅻ ﬁ 𝔸𝔹ℂ".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 120))) for _ in range(n)]
    return [normalize_text(t) for t in texts] + ["", "a", "ab", "q" * 5000, "ab ab ab ab ab ab", "ab" * 3000]


def _all_kernels(texts, p):
    """What every caller of the kernels computes from them: signatures and
    set sizes, window counts, and the block Jaccards of many pairs (runs of
    a node, a node with itself, repeated pairs)."""
    sigs, sizes, sketches = sg.signatures_sizes_sketches(texts, p)
    rng = random.Random(7)
    n = len(texts)
    pairs = sorted((rng.randrange(n), rng.randrange(n)) for _ in range(2000)) + [(0, 0), (n - 1, n - 2), (n - 3, 5)]
    ea, eb = (np.array(x, dtype=np.int64) for x in zip(*pairs))
    inter, lens = sg.jaccard_counts(texts, ea, eb, p)
    shared = sketch.shared_at_most(sketches, ea, eb)
    return (sigs, sizes, sg.signatures(texts, p), inter, lens, sketches, *sg.sizes_and_sketches(texts, p), shared)


@pytest.mark.slow
def test_prebuilt_kernels_give_the_jit_bits(built, use, monkeypatch):
    folder, _ = built
    use(folder)
    assert kernels.get() is kernels._prebuilt() is not None  # the build is what runs
    texts = _texts(11, 400)
    for p in PARAMS:
        got = _all_kernels(texts, p)
        monkeypatch.setattr(kernels, "prebuilt", False)
        assert kernels.get() is kernels._compile()
        want = _all_kernels(texts, p)
        monkeypatch.setattr(kernels, "prebuilt", True)
        assert all(g.dtype == w.dtype and np.array_equal(g, w) for g, w in zip(got, want)), p
        if p == PARAMS[0]:  # varied set sizes, and pairs that share windows
            assert len(set(want[1].tolist())) > 100 and (want[3] > 0).mean() > 0.5
    # Every window hash in one table slot (a slot multiplier of 0): what a
    # delivery written against a fixed multiplier would aim for.
    codes, offsets = sg._codes(texts, PARAMS[0])
    outs = []
    for k in (kernels._prebuilt(), kernels._compile()):
        keys, stamp, shift = sg._table(texts)
        out = np.zeros(offsets[-1] + len(texts), dtype=np.uint32)
        nwin, lens = np.empty(len(texts), dtype=np.int64), np.empty(len(texts), dtype=np.int64)
        sketches = np.zeros((len(texts), sketch.BUCKETS), dtype=np.uint8)
        k.window_hashes(codes, offsets, 5, out, nwin, lens, keys, stamp, 1, np.uint64(0), shift, sketches)
        outs.append((out, nwin, lens, sketches))
    assert all(np.array_equal(a, b) for a, b in zip(*outs)) and outs[0][3].any()


def test_other_argument_types_take_the_jit_kernel(built, use):
    """int32 offsets are not what the build takes: the call goes to the JIT
    kernel, which gives what the int64 call gives."""
    use(built[0])
    texts = _texts(12, 50)
    codes, offsets = sg._codes(texts, PARAMS[0])
    got = []
    for offs in (offsets, offsets.astype(np.int32)):
        keys, stamp, shift = sg._table(texts)
        out = np.zeros(offsets[-1] + len(texts), dtype=np.uint32)
        nwin, lens = np.empty(len(texts), dtype=np.int64), np.empty(len(texts), dtype=np.int64)
        kernels.get().window_hashes(
            codes, offs, 5, out, nwin, lens, keys, stamp, 1, sg._SLOT_MULT, shift, sketch.NO_SKETCHES
        )
        got.append((out, nwin, lens))
    assert all(np.array_equal(a, b) for a, b in zip(*got)) and got[0][2].min() > 0


def test_only_the_exact_argument_types_go_to_a_build():
    """What the JIT would type otherwise (a plain int as int64 where a build
    takes uint64, another dtype, a read-only array) goes to the JIT."""
    arr = np.zeros(3, dtype=np.uint32)
    frozen = arr.copy()
    frozen.flags.writeable = False
    assert kernels._takes("u4[:]", arr) and kernels._takes("u4[:, :]", np.zeros((2, 2), dtype=np.uint32))
    assert not any(
        kernels._takes("u4[:]", x)
        for x in (frozen, arr.astype(np.int64), arr.astype(">u4"), [0, 1], np.zeros((2, 2), dtype=np.uint32))
    )
    assert kernels._takes("u8", np.uint64(5)) and not kernels._takes("u8", 5)
    assert kernels._takes("i8", 5) and kernels._takes("i8", np.int64(-5))
    assert not any(kernels._takes("i8", x) for x in (1 << 63, np.int32(5), 5.0, True, np.uint64(5)))
    codes, _ = sg._codes(["abc", "de"], PARAMS[0])
    assert kernels._takes("u4[:]", codes)  # what the batch path passes is taken


def test_a_damaged_build_is_not_loaded(use, tmp_path):
    (tmp_path / kernels.prebuilt_path(kernels.prebuilt_name(), tmp_path).name).write_bytes(b"\x7fELF truncated")
    use(tmp_path)
    assert kernels._prebuilt() is None and kernels.get() is kernels._compile()


def test_a_build_for_other_kernels_numba_or_cpu_is_never_loaded(built, use, monkeypatch, tmp_path):
    folder, path = built
    use(folder)
    name = kernels.prebuilt_name()
    assert path.name.startswith(name + ".")
    edited = tmp_path / "kernels.py"
    edited.write_bytes(open(kernels.__file__, "rb").read() + b"\n# one more line\n")
    version = importlib.metadata.version
    changes = [
        lambda: monkeypatch.setattr(kernels, "__file__", str(edited)),
        lambda: monkeypatch.setattr(importlib.metadata, "version", lambda d: "0.0.1" if d == "numba" else version(d)),
        lambda: monkeypatch.setattr(kernels, "_cpu_flags", lambda: b"fpu sse sse2"),
    ]
    for change in changes:
        change()
        kernels._prebuilt.cache_clear()
        assert kernels.prebuilt_name() not in (None, name)
        assert kernels._prebuilt() is None and kernels.get() is kernels._compile()
        monkeypatch.undo()
        use(folder)
    # No CPU flags to read (not Linux): no build is trusted at all.
    monkeypatch.setattr(kernels, "_cpu_flags", lambda: None)
    kernels._prebuilt.cache_clear()
    assert kernels.prebuilt_name() is None and kernels.get() is kernels._compile()


@pytest.mark.slow
def test_a_build_replaces_older_ones_whole(built, tmp_path):
    """Another version's module is removed, no temporary file is left, and a
    build that exists is not made again."""
    folder = tmp_path / "prebuilt"
    folder.mkdir()
    stale = kernels.prebuilt_path("kernels_00000000000000000000", folder)
    stale.write_bytes(b"not a module")
    shutil.copy(built[1], folder / built[1].name)
    mtime = (folder / built[1].name).stat().st_mtime_ns
    assert kernels_build.build(folder) == folder / built[1].name
    assert (folder / built[1].name).stat().st_mtime_ns == mtime and stale.exists()  # kept: nothing built
    target = kernels_build.build(folder, force=True)
    assert sorted(p.name for p in folder.iterdir()) == [target.name]


def test_vllm_can_load_after_the_compiled_kernels():
    """numba's llvmlite answers any attribute with a C-function wrapper; vLLM's
    CPU worker scans every module's objects with `vars(x).get(...)` and failed
    to load the model once the kernels had run. Replays that scan (vLLM 0.32,
    triton_utils/dispatcher.py) after the kernels, with the guard the vLLM
    backend applies before loading."""
    from tasksieve.transforms.backends.vllm import guard_llvmlite

    # The JIT kernels: an ahead-of-time build (kernels_build.py) loads no llvmlite.
    assert kernels._compile() is not None and "llvmlite.binding.ffi" in sys.modules
    guard_llvmlite()
    for module in list(sys.modules.values()):
        for value in list((getattr(module, "__dict__", None) or {}).values()):
            if hasattr(value, "__dict__"):
                vars(value).get("kernel")


def test_the_vllm_guard_is_a_no_op_where_numba_never_ran():
    code = (
        "import sys\nfrom tasksieve.transforms.backends.vllm import guard_llvmlite\nguard_llvmlite()\n"
        "assert 'llvmlite.binding.ffi' not in sys.modules\nprint('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
