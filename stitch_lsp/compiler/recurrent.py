"""Recurrent modules (nn.RNN, nn.LSTM, nn.GRU) as one IR node, and the CUDA that runs them.

Per layer, the input projections of every time step and direction are one cuBLAS GEMM each
(all T*B rows at once). Then, per time step, one GEMM computes h_{t-1} W_hh^T for every
direction (strided-batched over the directions), and one fused kernel adds both biases, applies
the gate nonlinearities, updates the states and writes h_t straight into its strided place in
the output sequence (each direction into its half). PyTorch's gate order and bias placement
are kept: LSTM (i, f, g, o); GRU (r, z, n) with r applied to (W_hn h + b_hn).

One-direction stacks of layers (35_LSTM, 39_GRU: 6 layers, 512 steps) run as a layer wavefront
instead: layer l computes time t while layer l+1 computes t-1, so T + L - 1 steps replace L * T,
each step one batched GEMM per side (hidden, input) for every active layer plus one fused gate
kernel. Layer 0's input projection is still one GEMM over all steps; deeper layers' input
projections join the per-step batched GEMM, since their inputs appear one step at a time.

This module is torch-free: capture lives in recurrent_capture.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stitch_lsp.compiler.ir import Graph, Node, Shape, Unsupported, Use

MODES = {"rnn_tanh": 0, "rnn_relu": 1, "lstm": 2, "gru": 3}
GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}
MAX_PICKS = 4  # selected time steps (`out[:, t]`) one launch can write besides the sequence


@dataclass(frozen=True)
class RnnSpec:
    """Everything the launcher is specialised to."""

    mode: str  # rnn_tanh | rnn_relu | lstm | gru
    layers: int
    directions: int
    seq_len: int
    batch: int
    input_size: int
    hidden: int
    bias: bool
    batch_first: bool
    has_h0: bool
    has_c0: bool

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def seq_shape(self) -> Shape:
        t, b, w = self.seq_len, self.batch, self.directions * self.hidden
        return (b, t, w) if self.batch_first else (t, b, w)

    @property
    def state_shape(self) -> Shape:
        return (self.layers * self.directions, self.batch, self.hidden)

    def weight_names(self) -> list[str]:
        """Parameter names in the order the launcher takes them (PyTorch's own names)."""
        names = []
        for layer in range(self.layers):
            for d in range(self.directions):
                sfx = f"l{layer}" + ("_reverse" if d else "")
                names += [f"weight_ih_{sfx}", f"weight_hh_{sfx}"]
                if self.bias:
                    names += [f"bias_ih_{sfx}", f"bias_hh_{sfx}"]
        return names


@dataclass
class RnnOutputs:
    """Which results the graph reads; the rest stay in the workspace (or are never written)."""

    seq: int | None = None  # vid of the full output sequence
    h_n: int | None = None
    c_n: int | None = None
    picks: list[tuple[int, int]] = field(default_factory=list)  # (time index, vid)
    h_at: list[tuple[int, int]] = field(default_factory=list)  # (h_n row, vid)
    c_at: list[tuple[int, int]] = field(default_factory=list)


def rnn_out(graph: Graph, rnn: Node, which: str, shape: Shape, index: int = 0) -> Use:
    """A second result of the recurrent node: h_n, c_n, a time step, or one row of h_n/c_n."""
    node = graph.add(
        "rnn_out",
        which,
        [Use(rnn.vid, rnn.shape)],
        shape,
        rnn.origin,
        rnn.line,
        which=which,
        index=index,
    )
    return Use(node.vid, shape)


def index_result(graph: Graph, base: Use, idx: object) -> Use | None:
    """`out[:, t, :]`, `out[t]`, `h_n[k]` on a recurrent result, or None when it is not one.

    Time steps are written by the step kernel when they are produced; rows of h_n/c_n are
    copied at the end. Other indexing is left to the general capture.
    """
    node = graph.node(base.vid)
    if node is None or tuple(base.shape) != tuple(node.shape):
        return None
    if node.kind == "rnn":
        spec: RnnSpec = node.params["spec"]  # type: ignore[assignment]
        parts = idx if isinstance(idx, tuple) else (idx,)
        tdim = 1 if spec.batch_first else 0
        full = slice(None)
        if len(parts) <= tdim or len(parts) > 3:
            return None
        t = parts[tdim]
        others = parts[:tdim] + parts[tdim + 1 :]
        if isinstance(t, bool) or not isinstance(t, int) or any(p != full for p in others):
            return None
        shape = (spec.batch, spec.directions * spec.hidden)
        return rnn_out(graph, node, "seq_at", shape, t % spec.seq_len)
    is_row = isinstance(idx, int) and not isinstance(idx, bool)
    if node.kind == "rnn_out" and node.fn in ("h_n", "c_n") and is_row:
        rnn = graph.node(node.uses[0].vid)
        assert rnn is not None
        which = "h_at" if node.fn == "h_n" else "c_at"
        return rnn_out(graph, rnn, which, node.shape[1:], int(idx) % node.shape[0])  # type: ignore[call-overload]
    return None


def outputs_needed(graph: Graph, rnn: Node, needed: set[int]) -> RnnOutputs:
    outs = RnnOutputs()
    if rnn.vid in needed:
        outs.seq = rnn.vid
    for n in graph.nodes:
        if n.kind != "rnn_out" or n.uses[0].vid != rnn.vid or n.vid not in needed:
            continue
        which, index = str(n.params["which"]), int(n.params["index"])  # type: ignore[call-overload]
        if which == "h_n":
            outs.h_n = n.vid
        elif which == "c_n":
            outs.c_n = n.vid
        elif which == "seq_at":
            outs.picks.append((index, n.vid))
        elif which == "h_at":
            outs.h_at.append((index, n.vid))
        elif which == "c_at":
            outs.c_at.append((index, n.vid))
    if len(outs.picks) > MAX_PICKS:
        raise Unsupported(f"{rnn.origin}: more than {MAX_PICKS} single time steps are read")
    return outs


RNN_COMMON = r"""
// ---- recurrent step: gates, nonlinearities and state update of one time step (all directions)
struct StitchRnnBias {
  const float* ih[2];
  const float* hh[2];
};
struct StitchRnnPick {  // time steps the graph reads on their own (`out[:, t, :]`)
  int n;
  int t[4];
  float* dst[4];
};
__device__ __forceinline__ float stitch_rnn_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// One cell: a = x W_ih^T + b_ih and w = h W_hh^T + b_hh for each gate; updates c, returns h_t.
template <int MODE, int G>
__device__ __forceinline__ float stitch_rnn_cell(const float (&a)[G], const float (&w)[G],
                                                 float* c, float h_prev) {
  if constexpr (MODE == 0) {
    return tanhf(a[0] + w[0]);
  } else if constexpr (MODE == 1) {
    const float v = a[0] + w[0];
    return v > 0.f ? v : 0.f;
  } else if constexpr (MODE == 2) {
    const float ig = stitch_rnn_sigmoid(a[0] + w[0]);
    const float fg = stitch_rnn_sigmoid(a[1] + w[1]);
    const float gg = tanhf(a[2] + w[2]);
    const float og = stitch_rnn_sigmoid(a[3] + w[3]);
    const float cn = fg * c[0] + ig * gg;
    c[0] = cn;
    return og * tanhf(cn);
  } else {  // GRU: r gates (W_hn h + b_hn), as PyTorch
    const float rg = stitch_rnn_sigmoid(a[0] + w[0]);
    const float zg = stitch_rnn_sigmoid(a[1] + w[1]);
    const float ng = tanhf(a[2] + rg * w[2]);
    return (1.f - zg) * ng + zg * h_prev;
  }
}

"""

RNN_STEP = r"""
// MODE: 0 RNN tanh, 1 RNN relu, 2 LSTM (i, f, g, o), 3 GRU (r, z, n). One thread per
// (direction, batch row, hidden unit). xg holds x W_ih^T for every step ([D][rows][G*H], rows in
// the module's layout), hg holds h_{t-1} W_hh^T ([D][B][G*H]; absent while the state is zero).
// h and c are the layer's states [D][B][H], updated in place; seq gets h_t at its strided place.
template <int MODE, int D, bool BIAS, bool BATCH_FIRST, bool HG>
__global__ void __launch_bounds__(256) stitch_rnn_step(
    int T, int B, int H, int s, const float* __restrict__ xg, const float* __restrict__ hg,
    StitchRnnBias bias, float* __restrict__ h, float* __restrict__ c, float* __restrict__ seq,
    StitchRnnPick pick) {
  constexpr int G = MODE == 2 ? 4 : (MODE == 3 ? 3 : 1);
  const int n = D * B * H;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    const int j = e % H;
    const int b = (e / H) % B;
    const int d = e / (H * B);
    const int t = d == 0 ? s : T - 1 - s;
    const long long row = BATCH_FIRST ? (long long)b * T + t : (long long)t * B + b;
    const float* x = xg + ((long long)d * T * B + row) * (G * H);
    const float* r = HG ? hg + ((long long)d * B + b) * (G * H) : nullptr;
    float a[G], w[G];  // input side (x W_ih^T + b_ih) and hidden side (h W_hh^T + b_hh)
#pragma unroll
    for (int g = 0; g < G; ++g) {
      a[g] = x[g * H + j];
      w[g] = HG ? r[g * H + j] : 0.f;
      if (BIAS) {
        a[g] += bias.ih[d][g * H + j];
        w[g] += bias.hh[d][g * H + j];
      }
    }
    const int si = (d * B + b) * H + j;
    const float hn = stitch_rnn_cell<MODE>(a, w, MODE == 2 ? c + si : nullptr, h[si]);
    h[si] = hn;
    const int o = d * H + j;
    if (seq != nullptr) seq[row * (D * H) + o] = hn;
    for (int k = 0; k < pick.n; ++k) {
      if (pick.t[k] == t) pick.dst[k][(long long)b * (D * H) + o] = hn;
    }
  }
}
"""

RNN_WAVE = r"""
// Layer wavefront (one direction, several layers): at diagonal step k, layer l computes time
// t = k - l for every l in [lo, hi]. Layer 0's input side comes from the projection of all steps
// (xg0, rows in the module's layout). bih/bhh hold every layer's biases side by side ([L][G*H]).
// FUSED (LSTM, RNN): one GEMM made both sides of layers above 0 ([h_(l-1,t), h_(l,t-1)] against
// [W_ih_l | W_hh_l]), so hg holds their sum and the states h live as [B][L+1][H] (slot 0 zero).
// Otherwise (GRU: its r gate needs the sides apart) xgs[l-1] = h_(l-1,t) W_ih_l^T; h is [L][B][H].
template <int MODE, bool BIAS, bool BATCH_FIRST, bool FUSED>
__global__ void __launch_bounds__(256) stitch_rnn_wave(
    int T, int B, int H, int L, int k, int lo, int hi, const float* __restrict__ xg0,
    const float* __restrict__ xgs, const float* __restrict__ hg, const float* __restrict__ bih,
    const float* __restrict__ bhh, float* __restrict__ h, float* __restrict__ c,
    float* __restrict__ seq, StitchRnnPick pick) {
  constexpr int G = MODE == 2 ? 4 : (MODE == 3 ? 3 : 1);
  const int GH = G * H;
  const int n = (hi - lo + 1) * B * H;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    const int j = e % H;
    const int b = (e / H) % B;
    const int l = lo + e / (H * B);
    const int t = k - l;
    const long long row = BATCH_FIRST ? (long long)b * T + t : (long long)t * B + b;
    const float* x = l == 0 ? xg0 + row * GH
                     : (FUSED ? nullptr : xgs + ((long long)(l - 1) * B + b) * GH);
    const float* r = hg + ((long long)l * B + b) * GH;
    float a[G], w[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      a[g] = x != nullptr ? x[g * H + j] : 0.f;
      w[g] = r[g * H + j];
      if (BIAS) {
        a[g] += bih[l * GH + g * H + j];
        w[g] += bhh[l * GH + g * H + j];
      }
    }
    const long long hk = FUSED ? ((long long)b * (L + 1) + l + 1) * H + j
                                : ((long long)l * B + b) * H + j;
    const long long ci = ((long long)l * B + b) * H + j;
    const float hn = stitch_rnn_cell<MODE>(a, w, MODE == 2 ? c + ci : nullptr, h[hk]);
    h[hk] = hn;
    if (l == L - 1) {
      if (seq != nullptr) seq[row * H + j] = hn;
      for (int q = 0; q < pick.n; ++q) {
        if (pick.t[q] == t) pick.dst[q][(long long)b * H + j] = hn;
      }
    }
  }
}
"""


def uses_wavefront(spec: RnnSpec) -> bool:
    """One direction and several layers: the layers advance together (see _wave_body)."""
    return spec.directions == 1 and spec.layers > 1


def rnn_preamble(specs: list[RnnSpec]) -> str:
    """The device code the launchers of `specs` call (and nothing they do not)."""
    parts = [RNN_COMMON]
    if any(not uses_wavefront(s) for s in specs):
        parts.append(RNN_STEP)
    if any(uses_wavefront(s) for s in specs):
        parts.append(RNN_WAVE)
    return "\n".join(parts)


@dataclass
class RnnLaunch:
    """The launcher's CUDA text and its pointer arguments, in order."""

    name: str
    source: str
    inputs: list[int]  # vids read (x, h0, c0, then the weights)
    outputs: list[int]  # vids written
    ws_bytes: int
    comment: str


def _align(n: int) -> int:
    return -(-n // 64) * 64  # floats: 256-byte aligned pieces


def _workspace_pieces(s: RnnSpec, outs: RnnOutputs) -> dict[str, int]:
    """Sizes in floats of the workspace pieces, in the order they are laid out: projections,
    packed weights and the states and sequences the graph does not read."""
    L, D, T, B, H, GH = s.layers, s.directions, s.seq_len, s.batch, s.hidden, s.gates * s.hidden
    wave = uses_wavefront(s)
    fused = wave and s.mode != "gru"
    pieces: dict[str, int] = {"xg": D * T * B * GH, "hg": D * B * GH}
    if wave:  # see _wave_body
        pieces = {"xg": T * B * GH, "hg": L * B * GH}
        if fused:
            pieces |= {"wcat": L * GH * 2 * H, "hw": B * (L + 1) * H}
        else:
            pieces |= {"xgs": (L - 1) * B * GH, "wih": (L - 1) * GH * H, "whh": L * GH * H}
        if s.bias:
            pieces |= {"bih": L * GH, "bhh": L * GH}
    if L > 1 and not wave:
        pieces["seq_a"] = T * B * D * H
    if L > 2 and not wave:
        pieces["seq_b"] = T * B * D * H
    if outs.h_n is None and not fused:
        pieces["h"] = L * D * B * H
    if s.mode == "lstm" and outs.c_n is None:
        pieces["c"] = L * D * B * H
    if D == 2:
        pieces["whh"] = 2 * GH * H
    return pieces


def _launcher_params(s: RnnSpec, outs: RnnOutputs) -> tuple[list[str], list[int]]:
    """The launcher's C parameters, and the vids of the outputs it writes, in order."""
    params = ["const float* x"]
    if s.has_h0:
        params.append("const float* h0")
    if s.has_c0:
        params.append("const float* c0")
    wnames = [n.replace("weight_", "w_").replace("bias_", "b_") for n in s.weight_names()]
    params += [f"const float* {n}" for n in wnames]
    out_vids: list[int] = []
    if outs.seq is not None:
        params.append("float* seq_out")
        out_vids.append(outs.seq)
    if outs.h_n is not None:
        params.append("float* h_n")
        out_vids.append(outs.h_n)
    if outs.c_n is not None:
        params.append("float* c_n")
        out_vids.append(outs.c_n)
    for k, (_, vid) in enumerate(outs.picks):
        params.append(f"float* pick{k}")
        out_vids.append(vid)
    for k, (_, vid) in enumerate(outs.h_at):
        params.append(f"float* h_at{k}")
        out_vids.append(vid)
    for k, (_, vid) in enumerate(outs.c_at):
        params.append(f"float* c_at{k}")
        out_vids.append(vid)
    params += ["unsigned char* ws", "cudaStream_t stream"]
    return params, out_vids


def _w(kind: str, layer: int, d: int) -> str:
    """A weight's parameter name, as `_launcher_params` spells PyTorch's."""
    return f"{kind}_l{layer}" + ("_reverse" if d else "")


def _prologue(
    s: RnnSpec, outs: RnnOutputs, ws_at: dict[str, int], name: str, params: list[str]
) -> list[str]:
    """The launcher's head: cuBLAS on the stream, and where the states and projections live.

    The states are written in place when the graph reads them (h_n, c_n), else they stay in
    the workspace; a fused wavefront keeps them as [B][L+1][H] and copies h_n out at the end.
    """
    D, B, H = s.directions, s.batch, s.hidden
    fused = uses_wavefront(s) and s.mode != "gru"
    h_ptr = "h_n" if outs.h_n is not None else f"wsf + {ws_at.get('h', 0)}"
    if fused:
        h_ptr = f"wsf + {ws_at['hw']}"  # [B][L+1][H]; h_n is copied out at the end
    c_ptr = "nullptr"
    if s.mode == "lstm":
        c_ptr = "c_n" if outs.c_n is not None else f"wsf + {ws_at.get('c', 0)}"
    lines = [
        f'extern "C" int {name}({", ".join(params)}) {{',
        "  cublasHandle_t hdl = stitch_cublas_on(stream);",
        "  if (hdl == nullptr) return STITCH_CUBLAS_ERROR;",
        "  const float one = 1.f, zero = 0.f;",
        "  float* wsf = reinterpret_cast<float*>(ws);",
        f"  float* xg = wsf + {ws_at['xg']};",
        f"  float* hg = wsf + {ws_at['hg']};",
        f"  float* hs = {h_ptr};",
        f"  float* cs = {c_ptr};",
        "  cublasStatus_t st;",
        "  cudaError_t ce;",
        f"  const int grid = stitch_grid({D * B * H}, 256, 8);",
    ]
    if outs.picks:
        ts = ", ".join(str(t) for t, _ in outs.picks)
        dsts = ", ".join(f"pick{k}" for k in range(len(outs.picks)))
        lines.append(
            f"  const StitchRnnPick last_picks = {{{len(outs.picks)}, {{{ts}}}, {{{dsts}}}}};"
        )
    lines.append(
        "  const StitchRnnPick no_picks = {0, {0, 0, 0, 0}, {nullptr, nullptr, nullptr, nullptr}};"
    )
    return lines


def _layer_states(s: RnnSpec, layer: int) -> list[str]:
    """A layer's initial h (and c) for every direction: copied from h0 / c0, or zeros."""
    state = s.directions * s.batch * s.hidden
    state_bytes = state * 4
    if s.has_h0:
        lines = [
            f"    ce = cudaMemcpyAsync(hl, h0 + {layer * state}, {state_bytes}, "
            "cudaMemcpyDeviceToDevice, stream);"
        ]
    else:
        lines = [f"    ce = cudaMemsetAsync(hl, 0, {state_bytes}, stream);"]
    lines.append("    if (ce != cudaSuccess) return (int)ce;")
    if s.mode == "lstm":
        if s.has_c0:
            lines.append(
                f"    ce = cudaMemcpyAsync(cl, c0 + {layer * state}, {state_bytes}, "
                "cudaMemcpyDeviceToDevice, stream);"
            )
        else:
            lines.append(f"    ce = cudaMemsetAsync(cl, 0, {state_bytes}, stream);")
        lines.append("    if (ce != cudaSuccess) return (int)ce;")
    return lines


def _input_projection(s: RnnSpec, ws_at: dict[str, int], layer: int) -> list[str]:
    """All T steps' input projections, one GEMM per direction; with two directions the
    W_hh are also packed side by side, for one batched GEMM per step."""
    D, T, B, H, GH = s.directions, s.seq_len, s.batch, s.hidden, s.gates * s.hidden
    prev = "seq_a" if (layer - 1) % 2 == 0 else "seq_b"
    in_ptr = "x" if layer == 0 else f"wsf + {ws_at[prev]}"
    in_w = s.input_size if layer == 0 else D * H
    lines = []
    for d in range(D):
        lines += [
            f"    st = cublasGemmEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {T * B}, {in_w}, "
            f"&one, {_w('w_ih', layer, d)}, CUDA_R_32F, {in_w}, {in_ptr}, CUDA_R_32F, {in_w}, "
            f"&zero, xg + {d * T * B * GH}, CUDA_R_32F, {GH}, CUBLAS_COMPUTE_32F, "
            "CUBLAS_GEMM_DEFAULT);",
            "    if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
        ]
    if D == 2:
        whh = f"wsf + {ws_at['whh']}"
        lines += [
            "    // both directions' W_hh side by side, for one batched GEMM per step",
            f"    ce = cudaMemcpyAsync({whh}, {_w('w_hh', layer, 0)}, {GH * H * 4}, "
            "cudaMemcpyDeviceToDevice, stream);",
            "    if (ce != cudaSuccess) return (int)ce;",
            f"    ce = cudaMemcpyAsync({whh} + {GH * H}, {_w('w_hh', layer, 1)}, {GH * H * 4}, "
            "cudaMemcpyDeviceToDevice, stream);",
            "    if (ce != cudaSuccess) return (int)ce;",
        ]
    return lines


def _layer_bias(s: RnnSpec, layer: int) -> str:
    """The biases the gate kernel adds, one pair of pointers per direction (or none)."""
    D = s.directions
    if not s.bias:
        return "    const StitchRnnBias bias = {{nullptr, nullptr}, {nullptr, nullptr}};"
    ih = ", ".join(_w("b_ih", layer, d) for d in range(D)) + (", nullptr" if D == 1 else "")
    hh = ", ".join(_w("b_hh", layer, d) for d in range(D)) + (", nullptr" if D == 1 else "")
    return f"    const StitchRnnBias bias = {{{{{ih}}}, {{{hh}}}}};"


def _time_steps(s: RnnSpec, outs: RnnOutputs, ws_at: dict[str, int], layer: int) -> list[str]:
    """A layer's T steps: the hidden-side GEMM for every direction (skipped at step 0 when
    the state starts at zero), then the fused gate and state kernel."""
    L, D, T, B, H, GH = s.layers, s.directions, s.seq_len, s.batch, s.hidden, s.gates * s.hidden
    mode_t = (
        f"{MODES[s.mode]}, {D}, {'true' if s.bias else 'false'}, "
        f"{'true' if s.batch_first else 'false'}"
    )
    picks = "last_picks" if (layer == L - 1 and outs.picks) else "no_picks"
    if D == 1:
        gemm = (
            f"cublasGemmEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {B}, {H}, &one, "
            f"{_w('w_hh', layer, 0)}, CUDA_R_32F, {H}, hl, CUDA_R_32F, {H}, &zero, hg, "
            f"CUDA_R_32F, {GH}, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)"
        )
    else:
        gemm = (
            f"cublasGemmStridedBatchedEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {B}, {H}, &one, "
            f"wsf + {ws_at['whh']}, CUDA_R_32F, {H}, {GH * H}LL, hl, CUDA_R_32F, {H}, "
            f"{B * H}LL, &zero, hg, CUDA_R_32F, {GH}, {B * GH}LL, 2, CUBLAS_COMPUTE_32F, "
            "CUBLAS_GEMM_DEFAULT)"
        )
    first_hg = "true" if s.has_h0 else "false"
    return [
        f"    // {T} steps: h_(t-1) W_hh^T on cuBLAS, then one fused gate/state kernel",
        f"    for (int s = 0; s < {T}; ++s) {{",
        f"      const bool with_h = s > 0 || {first_hg};",
        "      if (with_h) {",
        f"        st = {gemm};",
        "        if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
        f"        stitch_rnn_step<{mode_t}, true><<<grid, 256, 0, stream>>>(",
        f"            {T}, {B}, {H}, s, xg, hg, bias, hl, cl, out, {picks});",
        "      } else {",
        f"        stitch_rnn_step<{mode_t}, false><<<grid, 256, 0, stream>>>(",
        f"            {T}, {B}, {H}, s, xg, nullptr, bias, hl, cl, out, {picks});",
        "      }",
        "      ce = cudaPeekAtLastError();",
        "      if (ce != cudaSuccess) return (int)ce;",
        "    }",
    ]


def _layer(s: RnnSpec, outs: RnnOutputs, ws_at: dict[str, int], layer: int) -> list[str]:
    """One layer of the layer-by-layer path; sequences ping-pong between seq_a and seq_b,
    and the last layer writes the output sequence (when the graph reads it)."""
    L, D, T, B, H = s.layers, s.directions, s.seq_len, s.batch, s.hidden
    if layer == L - 1:
        out_ptr = "seq_out" if outs.seq is not None else "nullptr"
    else:
        out_ptr = f"wsf + {ws_at['seq_a' if layer % 2 == 0 else 'seq_b']}"
    hl = f"hs + {layer * D * B * H}"
    cl = f"cs + {layer * D * B * H}" if s.mode == "lstm" else "nullptr"
    return [
        f"  // layer {layer}: input projection of all {T} steps, one GEMM per direction",
        "  {",
        f"    float* hl = {hl};",
        f"    float* cl = {cl};",
        f"    float* out = {out_ptr};",
        *_layer_states(s, layer),
        *_input_projection(s, ws_at, layer),
        _layer_bias(s, layer),
        *_time_steps(s, outs, ws_at, layer),
        "  }",
    ]


def _copy_outputs(s: RnnSpec, outs: RnnOutputs) -> list[str]:
    """Selected state rows (h_n[i], c_n[i]), and a fused wavefront's h_n, out of the states."""
    L, B, H = s.layers, s.batch, s.hidden
    fused = uses_wavefront(s) and s.mode != "gru"
    row_bytes = B * H * 4
    lines = []
    if fused:
        dsts = [(f"h_n + {layer * B * H}", layer) for layer in range(L) if outs.h_n is not None]
        dsts += [(f"h_at{k}", row) for k, (row, _) in enumerate(outs.h_at)]
        for dst, layer in dsts:
            lines += [
                f"  ce = cudaMemcpy2DAsync({dst}, {H * 4}, hs + {(layer + 1) * H}, "
                f"{(L + 1) * H * 4}, {H * 4}, {B}, cudaMemcpyDeviceToDevice, stream);",
                "  if (ce != cudaSuccess) return (int)ce;",
            ]
    for k, (row, _) in enumerate([] if fused else outs.h_at):
        lines += [
            f"  ce = cudaMemcpyAsync(h_at{k}, hs + {row * B * H}, {row_bytes}, "
            "cudaMemcpyDeviceToDevice, stream);",
            "  if (ce != cudaSuccess) return (int)ce;",
        ]
    for k, (row, _) in enumerate(outs.c_at):
        lines += [
            f"  ce = cudaMemcpyAsync(c_at{k}, cs + {row * B * H}, {row_bytes}, "
            "cudaMemcpyDeviceToDevice, stream);",
            "  if (ce != cudaSuccess) return (int)ce;",
        ]
    return lines


def _launch_comment(rnn: Node, s: RnnSpec) -> str:
    """What the launcher runs and how, for the candidate's comments and the group summary."""
    L, D, T = s.layers, s.directions, s.seq_len
    kind = {"rnn_tanh": "RNN (tanh)", "rnn_relu": "RNN (relu)", "lstm": "LSTM", "gru": "GRU"}
    what = (
        f"{kind[s.mode]}: {L} layer(s), {'bidirectional' if D == 2 else 'one direction'}, "
        f"T={T}, B={s.batch}, input {s.input_size}, hidden {s.hidden}"
        + (", batch_first" if s.batch_first else "")
        + ("" if s.bias else ", no bias")
    )
    if uses_wavefront(s):
        steps = T + L - 1
        fused = s.mode != "gru"
        per = "1 batched GEMM (both sides)" if fused else "2 batched GEMMs"
        return (
            f"{rnn.origin}: {what}; layer wavefront: layer 0's input projection as one GEMM, "
            f"then {steps} diagonal steps of {per} + 1 fused gate kernel"
        )
    return (
        f"{rnn.origin}: {what}; input projections as {L * D} GEMM(s), "
        f"{L * T} step GEMMs + {L * T} fused gate kernels"
    )


def rnn_launcher(rnn: Node, outs: RnnOutputs, name: str) -> RnnLaunch:
    """The C launcher that runs a whole recurrent module on one stream, and its arguments."""
    s: RnnSpec = rnn.params["spec"]  # type: ignore[assignment]
    offset = 0
    ws_at: dict[str, int] = {}
    for key, n in _workspace_pieces(s, outs).items():
        ws_at[key] = offset
        offset += _align(n)
    params, out_vids = _launcher_params(s, outs)
    lines = _prologue(s, outs, ws_at, name, params)
    if uses_wavefront(s):
        lines += _wave_body(s, outs, ws_at)
    else:
        for layer in range(s.layers):
            lines += _layer(s, outs, ws_at, layer)
    lines += _copy_outputs(s, outs)
    lines += ["  return (int)cudaGetLastError();", "}"]
    comment = _launch_comment(rnn, s)
    source = f"// {comment}\n" + "\n".join(lines)
    inputs = [u.vid for u in rnn.uses]
    return RnnLaunch(name, source, inputs, out_vids, offset * 4, comment)


def _check(call: str) -> list[str]:
    """A CUDA runtime call whose error the launcher returns."""
    return [f"  ce = {call};", "  if (ce != cudaSuccess) return (int)ce;"]


def _copy(dst: str, src: str, nbytes: int) -> list[str]:
    return _check(f"cudaMemcpyAsync({dst}, {src}, {nbytes}, cudaMemcpyDeviceToDevice, stream)")


def _copy2d(dst: str, dpitch: int, src: str, spitch: int, width: int, rows: int) -> list[str]:
    """A strided copy; pitches and width in floats."""
    return _check(
        f"cudaMemcpy2DAsync({dst}, {dpitch * 4}, {src}, {spitch * 4}, {width * 4}, {rows}, "
        "cudaMemcpyDeviceToDevice, stream)"
    )


def _wave_body(s: RnnSpec, outs: RnnOutputs, ws_at: dict[str, int]) -> list[str]:
    """Several one-direction layers advance together: at diagonal step k, layer l computes time
    t = k - l. Layer l's step t needs h_(l-1,t) (made at step k-1) and h_(l,t-1) (also step k-1),
    so one step runs every active layer: T + L - 1 steps instead of L * T. Layer 0's input
    projection is still one GEMM over all time steps.

    LSTM and RNN need only the sum of both sides, so one strided-batched GEMM per step makes it
    for every active layer: the states live as [B][L+1][H] (slot 0 zero), and layer l's operand
    [h_(l-1,t), h_(l,t-1)] is 2H contiguous floats per batch row, against [W_ih_l | W_hh_l]
    (layer 0: [0 | W_hh_0]). GRU keeps two GEMMs per step (its r gate needs the sides apart)."""
    fused = s.mode != "gru"
    bias_ptrs = (
        [f"  float* bih = wsf + {ws_at['bih']};", f"  float* bhh = wsf + {ws_at['bhh']};"]
        if s.bias
        else ["  float* bih = nullptr;", "  float* bhh = nullptr;"]
    )
    lines = [f"  float* xg0 = wsf + {ws_at['xg']};", *bias_ptrs]
    if fused:
        lines += ["  float* xgs = nullptr;", f"  float* wcat = wsf + {ws_at['wcat']};"]
    else:
        lines += [
            f"  float* xgs = wsf + {ws_at['xgs']};",
            f"  float* wih = wsf + {ws_at['wih']};",
            f"  float* whh = wsf + {ws_at['whh']};",
        ]
    return lines + _wave_weights(s) + _wave_states(s) + _wave_steps(s, outs)


def _wave_weights(s: RnnSpec) -> list[str]:
    """Every layer's weights packed side by side ([0 | W_hh_0], [W_ih_l | W_hh_l] when fused),
    so that one strided-batched GEMM per side serves all active layers."""
    L, H, GH = s.layers, s.hidden, s.gates * s.hidden
    fused = s.mode != "gru"
    lines = ["  // every layer's weights side by side, so one strided-batched GEMM serves all"]
    for layer in range(L):
        if fused:
            block = f"wcat + {layer * GH * 2 * H}"
            if layer == 0:
                lines += _check(f"cudaMemsetAsync({block}, 0, {GH * 2 * H * 4}, stream)")
            else:
                lines += _copy2d(block, 2 * H, f"w_ih_l{layer}", H, H, GH)
            lines += _copy2d(f"{block} + {H}", 2 * H, f"w_hh_l{layer}", H, H, GH)
        else:
            lines += _copy(f"whh + {layer * GH * H}", f"w_hh_l{layer}", GH * H * 4)
            if layer:
                lines += _copy(f"wih + {(layer - 1) * GH * H}", f"w_ih_l{layer}", GH * H * 4)
        if s.bias:
            lines += _copy(f"bih + {layer * GH}", f"b_ih_l{layer}", GH * 4)
            lines += _copy(f"bhh + {layer * GH}", f"b_hh_l{layer}", GH * 4)
    return lines


def _wave_states(s: RnnSpec) -> list[str]:
    """Initial states from h0 / c0 or zeros; fused, h goes into slots 1..L of [B][L+1][H]."""
    L, B, H = s.layers, s.batch, s.hidden
    state, fused = B * H, s.mode != "gru"
    lines = ["  // initial states"]
    if fused:
        lines += _check(f"cudaMemsetAsync(hs, 0, {B * (L + 1) * H * 4}, stream)")
        if s.has_h0:
            for layer in range(L):
                lines += _copy2d(
                    f"hs + {(layer + 1) * H}", (L + 1) * H, f"h0 + {layer * state}", H, H, B
                )
    elif s.has_h0:
        lines += _copy("hs", "h0", L * state * 4)
    else:
        lines += _check(f"cudaMemsetAsync(hs, 0, {L * state * 4}, stream)")
    if s.mode == "lstm":
        if s.has_c0:
            lines += _copy("cs", "c0", L * state * 4)
        else:
            lines += _check(f"cudaMemsetAsync(cs, 0, {L * state * 4}, stream)")
    return lines


def _wave_steps(s: RnnSpec, outs: RnnOutputs) -> list[str]:
    """Layer 0's input projection, then the T + L - 1 diagonal steps: the batched GEMMs of
    the active layers [lo, hi], then one gate kernel for all of them."""
    L, T, B, IN, H, GH = s.layers, s.seq_len, s.batch, s.input_size, s.hidden, s.gates * s.hidden
    fused = s.mode != "gru"
    state = B * H
    picks = "last_picks" if outs.picks else "no_picks"
    seq = "seq_out" if outs.seq is not None else "nullptr"
    flags = f"{MODES[s.mode]}, {'true' if s.bias else 'false'}, "
    flags += ("true" if s.batch_first else "false") + (", true" if fused else ", false")
    lines = [
        f"  // layer 0: input projection of all {T} steps in one GEMM",
        f"  st = cublasGemmEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {T * B}, {IN}, &one, w_ih_l0, "
        f"CUDA_R_32F, {IN}, x, CUDA_R_32F, {IN}, &zero, xg0, CUDA_R_32F, {GH}, "
        "CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);",
        "  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
        f"  // {T + L - 1} diagonal steps; layer l works on time k - l",
        f"  for (int k = 0; k < {T + L - 1}; ++k) {{",
        f"    const int lo = k - {T - 1} > 0 ? k - {T - 1} : 0;",
        f"    const int hi = k < {L - 1} ? k : {L - 1};",
    ]
    if fused:
        lines += [
            "    // both sides of every active layer: [h_(l-1,t), h_(l,t-1)] [W_ih_l | W_hh_l]^T",
            f"    st = cublasGemmStridedBatchedEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {B}, "
            f"{2 * H}, &one, wcat + (long long)lo * {GH * 2 * H}, CUDA_R_32F, {2 * H}, "
            f"{GH * 2 * H}LL, hs + lo * {H}, CUDA_R_32F, {(L + 1) * H}, {H}LL, &zero, "
            f"hg + (long long)lo * {B * GH}, CUDA_R_32F, {GH}, {B * GH}LL, hi - lo + 1, "
            "CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);",
            "    if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
        ]
    else:
        lines += [
            "    // hidden side of every active layer: h_(l,t-1) W_hh_l^T",
            f"    st = cublasGemmStridedBatchedEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {B}, {H}, "
            f"&one, whh + (long long)lo * {GH * H}, CUDA_R_32F, {H}, {GH * H}LL, "
            f"hs + lo * {state}, CUDA_R_32F, {H}, {state}LL, &zero, "
            f"hg + (long long)lo * {B * GH}, CUDA_R_32F, {GH}, {B * GH}LL, hi - lo + 1, "
            "CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);",
            "    if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
            "    // input side of the active layers above layer 0: h_(l-1,t) W_ih_l^T",
            "    const int l1 = lo > 1 ? lo : 1;",
            "    if (hi >= l1) {",
            f"      st = cublasGemmStridedBatchedEx(hdl, CUBLAS_OP_T, CUBLAS_OP_N, {GH}, {B}, {H}, "
            f"&one, wih + (long long)(l1 - 1) * {GH * H}, CUDA_R_32F, {H}, {GH * H}LL, "
            f"hs + (l1 - 1) * {state}, CUDA_R_32F, {H}, {state}LL, &zero, "
            f"xgs + (long long)(l1 - 1) * {B * GH}, CUDA_R_32F, {GH}, {B * GH}LL, hi - l1 + 1, "
            "CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);",
            "      if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
            "    }",
        ]
    lines += [
        f"    stitch_rnn_wave<{flags}><<<stitch_grid((hi - lo + 1) * {state}LL, 256, 8), 256, "
        "0, stream>>>(",
        f"        {T}, {B}, {H}, {L}, k, lo, hi, xg0, xgs, hg, bih, bhh, hs, cs, {seq}, {picks});",
        "    ce = cudaPeekAtLastError();",
        "    if (ce != cudaSuccess) return (int)ce;",
        "  }",
    ]
    return lines
