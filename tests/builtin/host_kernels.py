"""The builtin coder's kernels run on the CPU, launch by launch, as they run on a GPU.

Each generated launcher (pointwise, reduction and scan groups) and its kernels are compiled as
host C++: g++ with the CUDA headers, whose bf16/fp16 types work on the host, and a small model of
CUDA's execution (SHIM below). The launcher itself picks the grid, the block and the float4 or
scalar path, as on a GPU. The GPU-free tests feed each launcher the captured graph's values
(tests/builtin/interp.py) and compare what it writes with the graph's, so the index math of
views, broadcasts and gathers and the reductions' block and warp combining are checked on
machines without a GPU, and so is the flash attention kernel, its tensor-core and ldmatrix
instructions emulated lane by lane (ATTENTION_HOST). GEMMs and cuDNN are not run here.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stitch_lsp.compiler.attention import ATTENTION_PREAMBLE, COMBINE_KERNEL
from stitch_lsp.compiler.codegen import Codegen, GroupKernel
from stitch_lsp.compiler.templates import PREAMBLE, REDUCED_PREAMBLE

# The CUDA execution model on the host. A launch runs its blocks one after another; each block
# runs its threads as fibers (ucontext) on one OS thread. A thread runs until it waits: at
# __syncthreads, released when every live thread of the block is there, or at a warp exchange
# (a shuffle, an MMA's or an ldmatrix's operands passed through memory), released when every
# live lane of its warp is there. Threads that wait for one that never comes (a barrier in
# divergent code) end the launch as failed. Runs are deterministic. The runtime calls the
# launchers make are answered here: device 0, 4 SMs (so grid-stride loops take several trips),
# and the launch's status.
SHIM = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <functional>
#include <vector>
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __forceinline__
#define __forceinline__ inline
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
static uint3 threadIdx, blockIdx, blockDim, gridDim;
static bool stitch_failed = false;
struct StitchFiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
  int wait = 0;  // 0 runnable, 1 at __syncthreads, 2 at a warp exchange
};
static ucontext_t stitch_sched;
static std::vector<StitchFiber> stitch_fibers;
static unsigned stitch_cur = 0;
static std::function<void()> stitch_body;
static void stitch_yield(int why) {
  stitch_fibers[stitch_cur].wait = why;
  swapcontext(&stitch_fibers[stitch_cur].ctx, &stitch_sched);
}
inline void __syncthreads() { stitch_yield(1); }
inline void stitch_warp_sync() { stitch_yield(2); }
static void stitch_entry() {
  stitch_body();
  stitch_fibers[stitch_cur].done = true;
  swapcontext(&stitch_fibers[stitch_cur].ctx, &stitch_sched);
}
static unsigned long long stitch_lanes[1024];
inline unsigned stitch_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
template <typename T> inline T stitch_exchange(T v, int partner) {
  const unsigned tid = stitch_tid(), n = blockDim.x * blockDim.y * blockDim.z;
  unsigned src = (tid & ~31u) + (unsigned)partner;
  if (partner < 0 || partner > 31 || src >= n) src = tid;
  memcpy(&stitch_lanes[tid], &v, sizeof(T));
  stitch_warp_sync();
  T r;
  memcpy(&r, &stitch_lanes[src], sizeof(T));
  stitch_warp_sync();
  return r;
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int o) {
  return stitch_exchange(v, (int)((stitch_tid() & 31u) ^ (unsigned)o));
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) {
  return stitch_exchange(v, src & 31);
}
template <typename T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
  const int lane = (int)(stitch_tid() & 31u);
  return stitch_exchange(v, lane >= (int)d ? lane - (int)d : lane);
}
template <typename T> inline T __ldg(const T* p) { return *p; }
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }  // CUDA's is within 2 ulp of this
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
extern "C" {
cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = 4; return cudaSuccess; }
cudaError_t cudaGetLastError(void) {
  const bool bad = stitch_failed;
  stitch_failed = false;
  return bad ? cudaErrorLaunchFailure : cudaSuccess;
}
}
template <typename F> void stitch_launch(dim3 g, dim3 b, F body) {
  gridDim = make_uint3(g.x, g.y, g.z);
  blockDim = make_uint3(b.x, b.y, b.z);
  const unsigned n = b.x * b.y * b.z;
  stitch_body = body;
  stitch_fibers.resize(n);
  for (auto& f : stitch_fibers) f.stack.resize(1 << 16);
  for (unsigned z = 0; z < g.z; ++z)
    for (unsigned y = 0; y < g.y; ++y)
      for (unsigned x = 0; x < g.x; ++x) {
        blockIdx = make_uint3(x, y, z);
        for (unsigned t = 0; t < n; ++t) {
          StitchFiber& f = stitch_fibers[t];
          f.done = false;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, stitch_entry, 0);
        }
        // Run every runnable thread to its next wait; release a warp whose live lanes all wait
        // at an exchange, and the block when all its live threads wait at __syncthreads.
        for (;;) {
          bool ran = false, live = false;
          for (unsigned t = 0; t < n; ++t) {
            StitchFiber& f = stitch_fibers[t];
            if (f.done || f.wait != 0) continue;
            stitch_cur = t;
            threadIdx = make_uint3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
            swapcontext(&stitch_sched, &f.ctx);
            ran = true;
          }
          bool released = false, block_ready = true;
          for (unsigned w = 0; w < n; w += 32) {
            bool warp_ready = false, mixed = false;
            for (unsigned t = w; t < w + 32 && t < n; ++t) {
              const StitchFiber& f = stitch_fibers[t];
              if (f.done) continue;
              live = true;
              if (f.wait == 2) warp_ready = true;
              else mixed = true;
              if (f.wait != 1) block_ready = false;
            }
            if (warp_ready && !mixed) {
              for (unsigned t = w; t < w + 32 && t < n; ++t) stitch_fibers[t].wait = 0;
              released = true;
            }
          }
          if (!live) break;
          if (block_ready) {
            for (auto& f : stitch_fibers) f.wait = 0;
            released = true;
          }
          if (!ran && !released) {  // every live thread waits for one that never comes
            stitch_failed = true;
            break;
          }
        }
      }
}
"""

_LAUNCH = re.compile(r"([\w:]+(?:<[^;{}]*?>)?)<<<(.*?)>>>\((.*?)\);", re.S)


def _top_level_split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*parts, cur.strip()]


def host_launches(source: str) -> str:
    """`kernel<<<grid, block, smem, stream>>>(args);` as a host launch of every thread."""

    def launch(m: re.Match[str]) -> str:
        grid, block = _top_level_split(m[2])[:2]
        return f"stitch_launch(dim3({grid}), dim3({block}), [=] {{ {m[1]}({m[3]}); }});"

    return _LAUNCH.sub(launch, source)


@dataclass
class HostKernel:
    """One generated launcher and its kernels built for the host."""

    kernel: GroupKernel
    lib: Any

    def run(self, pointers: list[int]) -> int:
        fn = getattr(self.lib, self.kernel.name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] * (len(pointers) + 1)
        return int(fn(*pointers, None))


def nvcc_include() -> Path | None:
    """The CUDA toolkit's headers (the bf16/fp16 types), where nvcc and g++ are installed."""
    import os

    nvcc = shutil.which("nvcc")
    if nvcc is None or shutil.which("g++") is None:
        return None
    homes = [os.environ.get("CUDA_HOME", ""), str(Path(nvcc).resolve().parent.parent)]
    for home in [*homes, "/usr/local/cuda"]:
        inc = Path(home) / "include"
        if home and (inc / "cuda_bf16.h").exists():
            return inc
    return None


# The kinds of group whose kernels run here: everything but the vendor calls (GEMMs, cuDNN).
EMULATED = ("pointwise", "reduction", "scan", "attention")


def emulated_kernels(cg: Codegen) -> list[GroupKernel]:
    return [k for k in cg.kernels if k.group.kind in EMULATED]


def build(kernels: list[GroupKernel], include: Path, cache: Path | None = None) -> Any:
    """One shared library with every launcher of `kernels` (one g++ run: the headers are parsed
    once), cached by content."""
    preamble = PREAMBLE.replace("#include <cuda_runtime.h>", "")
    src = "\n".join(
        [
            SHIM,
            preamble,
            REDUCED_PREAMBLE.replace("#include", "// #include"),
            "__global__ void stitch_count_batch(long long* n) { n[0] += 1; }",
            *(
                [attention_for_host(ATTENTION_PREAMBLE), COMBINE_KERNEL]
                if any(k.group.kind == "attention" for k in kernels)
                else []
            ),
            *(host_launches(k.source) for k in kernels),
        ]
    )
    folder = cache or Path(tempfile.gettempdir()) / "stitch-host-kernels"
    folder.mkdir(parents=True, exist_ok=True)
    so = folder / f"program_{hashlib.sha256(src.encode()).hexdigest()[:20]}.so"
    if not so.exists():  # built under a private name, then renamed: workers share the folder
        import os

        cpp = so.with_suffix(f".{os.getpid()}.cpp")
        cpp.write_text(src)
        tmp = cpp.with_suffix(".so")
        cmd = ["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-w"]
        done = subprocess.run(
            [*cmd, f"-I{include}", str(cpp), "-o", str(tmp)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"host build failed\n{done.stderr[-3000:]}")
        os.replace(tmp, so)
        cpp.unlink()
    return ctypes.CDLL(str(so))


def _storage(t: Any, ctype: str) -> Any:
    """A value as a kernel's pointer reads it: contiguous, in the pointer's C type."""
    import torch

    base = ctype.replace("const", "").replace("*", "").replace("__restrict__", "").strip()
    dtype = {
        "float": torch.float32,
        "__nv_bfloat16": torch.bfloat16,
        "__half": torch.float16,
        "bool": torch.bool,
        "long long": torch.int64,
        "int": torch.int32,
    }[base]
    return t.detach().to(dtype).contiguous().clone()


def seeded_problem(path: Path, name: str) -> tuple[Any, list[Any]]:
    """A problem's model (eval mode) and inputs, seeded as the sweep and the tests both use."""
    import torch

    from .helpers import import_path

    mod = import_path(path, name)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    torch.manual_seed(1)
    return model, list(mod.get_inputs())


def check_program(path: Path, model: Any, inputs: list[Any], include: Path) -> list[str]:
    """Every pointwise, reduction and scan launcher of the builtin coder's program for `path`,
    run on the CPU from the captured graph's values: the outputs that differ from the graph's
    (empty: all agree), and a line starting with 'skipped' per launcher that could not be fed
    (an input the interpreter does not hold as one tensor)."""
    import torch

    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.stages import plan_stages
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import _model_value, run_graph_env

    graph = capture(path)
    apply_rewrites(graph)
    cg = Codegen(graph, plan_stages(graph))
    cg.cuda_source(with_gemm=False)
    # A running-stat update (a training batch norm's buffers) changes the model's buffers in
    # place: its kernel reads them as they were before the forward, and writes what the graph
    # left in them.
    stored = {
        vid: _model_value(model, leaf.path).detach().clone()
        for vid, leaf in graph.leaves.items()
        if leaf.kind == "buffer" and leaf.path
    }
    with torch.no_grad():
        env = run_graph_env(graph, model, inputs)
    problems: list[str] = []
    kernels = emulated_kernels(cg)
    lib = build(kernels, include) if kernels else None
    for k in kernels:
        launched = _launch(k, lib, graph, env, stored)
        if launched is None:
            problems.append(f"skipped {k.name}: an input is not one tensor")
            continue
        rc, outs = launched
        if rc != 0:
            problems.append(f"{k.name}: the launch failed ({rc}: a barrier some thread missed)")
            continue
        for vid, got in outs:
            want = env[vid].detach().to(got.dtype).reshape(got.shape)
            tol = 1e-5 if got.dtype == torch.float32 else 1e-2
            if not torch.allclose(got.float(), want.float(), tol, tol, equal_nan=True):
                diff = (got.float() - want.float()).abs().max().item()
                problems.append(f"{k.name} ({k.group.kind}) writes %{vid} off by {diff:.3g}")
    return problems


def chained_output(graph: Any, model: Any, inputs: list[Any], include: Path) -> Any:
    """The program's first output with every emulated launch fed what the launches before it
    wrote (check_program feeds each the graph's values instead): the error the kernels' own
    rounding adds up to. For graphs whose launches are all emulated (no GEMM or convolution)."""
    import torch

    from stitch_lsp.compiler.stages import plan_stages

    from .interp import run_graph_env

    cg = Codegen(graph, plan_stages(graph))
    cg.cuda_source(with_gemm=False)
    with torch.no_grad():
        env = run_graph_env(graph, model, inputs)
    kernels = emulated_kernels(cg)
    lib = build(kernels, include)
    for k in kernels:
        launched = _launch(k, lib, graph, env, {})
        assert launched is not None and launched[0] == 0, k.name
        for vid, got in launched[1]:
            env[vid] = got.reshape(graph.shape_of(vid)).clone()
    return env[graph.outputs[0].vid]


def _launch(
    k: GroupKernel, lib: Any, graph: Any, env: dict[int, Any], stored: dict[int, Any]
) -> tuple[int, list[tuple[int, Any]]] | None:
    """Run one launcher on the host with its inputs from `env` (an in-place buffer as `stored`
    holds it, where it does): (status, what it wrote by vid), or None where an input is not one
    tensor."""
    import torch

    bufs: list[Any] = []
    outs: list[tuple[int, Any]] = []
    for a in k.args:
        if a.role == "ws":
            bufs.append(torch.zeros(max(a.nbytes, 1), dtype=torch.uint8))
            continue
        value = env.get(a.vid)
        if a.role == "out":
            bufs.append(_storage(torch.zeros(graph.shape_of(a.vid)), a.ctype))
            outs.append((a.vid, bufs[-1]))
        elif isinstance(value, torch.Tensor):
            bufs.append(_storage(stored.get(a.vid, value) if a.role == "inout" else value, a.ctype))
            if a.role == "inout":
                outs.append((a.vid, bufs[-1]))
        else:
            return None
    return HostKernel(k, lib).run([b.data_ptr() for b in bufs]), outs


# The tensor-core and async-copy instructions of the flash attention kernel, emulated: an MMA,
# an ldmatrix or a shuffle exchanges its operands through memory between two barriers, as the
# warp's lanes do in hardware, and each lane computes its own fragment (fp32 accumulation).
ATTENTION_HOST = r"""
template <typename T> inline float stitch_h2f(uint32_t w, int hi);
template <> inline float stitch_h2f<__nv_bfloat16>(uint32_t w, int hi) {
  const uint16_t x = hi ? (uint16_t)(w >> 16) : (uint16_t)(w & 0xffffu);
  __nv_bfloat16 b;
  memcpy(&b, &x, 2);
  return __bfloat162float(b);
}
template <> inline float stitch_h2f<__half>(uint32_t w, int hi) {
  const uint16_t x = hi ? (uint16_t)(w >> 16) : (uint16_t)(w & 0xffffu);
  __half h;
  memcpy(&h, &x, 2);
  return __half2float(h);
}
static uint32_t stitch_mma_a[1024][4], stitch_mma_b[1024][2];
// D (16x8) += A (16x16, row) * B (16x8, col): PTX's m16n8k16 fragment layout, lane = 4 g + t.
template <typename T>
inline void stitch_mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  const unsigned tid = stitch_tid(), base = tid & ~31u, lane = tid & 31u;
  for (int i = 0; i < 4; ++i) stitch_mma_a[tid][i] = a[i];
  stitch_mma_b[tid][0] = b0;
  stitch_mma_b[tid][1] = b1;
  stitch_warp_sync();
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float acc = 0.f;
    for (int k = 0; k < 16; ++k) {
      const int areg = (row >> 3) + 2 * (k >> 3), alane = (row & 7) * 4 + ((k & 7) >> 1);
      const float av = stitch_h2f<T>(stitch_mma_a[base + alane][areg], k & 1);
      const int breg = k >> 3, blane = col * 4 + ((k & 7) >> 1);
      const float bv = stitch_h2f<T>(stitch_mma_b[base + blane][breg], k & 1);
      acc += av * bv;
    }
    c[e] += acc;
  }
  stitch_warp_sync();
}
static const unsigned short* stitch_ldsm_row[1024];
// ldmatrix: lanes 8m..8m+7 address the rows of matrix m; lane l gets, of each matrix, the pair
// (row l/4, columns 2(l%4), +1), or with .trans (rows 2(l%4), +1 of column l/4).
inline void stitch_ldsm(uint32_t* r, const unsigned short* p, int count, bool trans) {
  const unsigned tid = stitch_tid(), base = tid & ~31u, lane = tid & 31u;
  stitch_ldsm_row[tid] = p;
  stitch_warp_sync();
  for (int m = 0; m < count; ++m) {
    unsigned short lo, hi;
    if (!trans) {
      const unsigned short* row = stitch_ldsm_row[base + 8 * m + lane / 4];
      lo = row[2 * (lane % 4)];
      hi = row[2 * (lane % 4) + 1];
    } else {
      lo = stitch_ldsm_row[base + 8 * m + 2 * (lane % 4)][lane / 4];
      hi = stitch_ldsm_row[base + 8 * m + 2 * (lane % 4) + 1][lane / 4];
    }
    r[m] = (uint32_t)lo | ((uint32_t)hi << 16);
  }
  stitch_warp_sync();
}
inline void stitch_ldsm4(uint32_t* r, const unsigned short* p) { stitch_ldsm(r, p, 4, false); }
inline void stitch_ldsm2(uint32_t* r, const unsigned short* p) { stitch_ldsm(r, p, 2, false); }
inline void stitch_ldsm4t(uint32_t* r, const unsigned short* p) { stitch_ldsm(r, p, 4, true); }
inline void stitch_ldsm2t(uint32_t* r, const unsigned short* p) { stitch_ldsm(r, p, 2, true); }
inline void stitch_cp16(unsigned short* s, const unsigned short* g, bool full) {
  if (full) memcpy(s, g, 16);
  else memset(s, 0, 16);
}
inline void stitch_cp_commit() {}
template <int N> inline void stitch_cp_wait() {}
template <typename F> cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) {
  return cudaSuccess;
}
"""

# What ATTENTION_HOST replaces: the functions built on inline PTX.
_PTX_FUNCTIONS = (
    "stitch_mma16816",
    "stitch_ldsm4",
    "stitch_ldsm2",
    "stitch_ldsm4t",
    "stitch_ldsm2t",
    "stitch_cp16",
    "stitch_cp_commit",
    "stitch_cp_wait",
)


def _top_level_items(text: str) -> list[str]:
    """C++ text cut into its top-level declarations (strings and comments skipped for braces)."""
    items, start, depth, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        if ch == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and not text[i + 1 :].lstrip().startswith(";"):
                items.append(text[start : i + 1])
                start = i + 1
        elif ch == ";" and depth == 0:
            items.append(text[start : i + 1])
            start = i + 1
        i += 1
    return [*items, text[start:]]


def attention_for_host(preamble: str) -> str:
    """The flash kernel's preamble with its PTX functions replaced by ATTENTION_HOST's, and its
    dynamic shared memory (if any) as a static array."""
    kept = []
    for item in _top_level_items(preamble):
        head = item.split("{", 1)[0]
        if any(re.search(rf"\b{name}\b\s*(<[^()]*>)?\s*\(", head) for name in _PTX_FUNCTIONS):
            continue
        kept.append(item)
    out = re.sub(r"__shared__ (alignas\(\d+\))", r"\1 __shared__", "".join(kept))
    out = re.sub(
        r"extern __shared__ [^;]*?(\w+)\[\];",
        r"static unsigned short \1[1 << 17];",
        out,
    )
    # the helpers the kernel calls come first, after the types they use
    at = out.index("__device__ __forceinline__ float stitch_mask_f(bool")
    return out[:at] + ATTENTION_HOST + out[at:]
