"""Capture of recurrent modules and the tensors a forward makes for their initial state.

An nn.RNN / nn.LSTM / nn.GRU call becomes one `rnn` IR node plus `rnn_out` nodes for h_n and
c_n, through the leaf-module hook (catalog.LEAF_MODULES, capture_leaves.py), so the fx and the
ATen paths both keep it whole; it returns what the module returns, so `out, (h, c) =
self.lstm(x, (h0, c0))` unpacks as usual. `torch.randn/rand(...)` in forward (the usual way a
reference makes h0) become `factory` leaves that the candidate makes the same way, so it draws
the same random numbers as the reference would from the same generator state.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from stitch_lsp.compiler.builder import Builder
from stitch_lsp.compiler.ir import Unsupported, Use
from stitch_lsp.compiler.recurrent import RnnSpec, rnn_out
from stitch_lsp.compiler.worker.capture_leaves import LeafCall

_MODES = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}


def capture_rnn(call: LeafCall) -> Any:
    """An nn.RNN / nn.LSTM / nn.GRU call as IR (catalog.LEAF_MODULES names this function)."""
    mod = call.module
    assert isinstance(mod, nn.RNNBase)
    where = call.origin
    mode = _MODES.get(str(mod.mode))
    if mode is None:
        raise Unsupported(f"{where}: recurrent mode {mod.mode!r} is not supported")
    if getattr(mod, "proj_size", 0):
        raise Unsupported(f"{where}: LSTM with proj_size is not supported")
    if mod.dropout > 0 and mod.training and mod.num_layers > 1:
        raise Unsupported(
            f"{where}: dropout={mod.dropout} between layers in training mode is random; "
            "generate again after .eval() or with dropout=0"
        )
    b_ = call.builder
    x = call.args[0] if call.args else call.kwargs.get("input")
    hx = call.args[1] if len(call.args) > 1 else call.kwargs.get("hx")
    if not isinstance(x, Use):
        raise Unsupported(f"{where}: the input is not a tensor")
    if len(x.shape) != 3:
        raise Unsupported(f"{where}: unbatched (2-D) recurrent input is not supported")
    x = b_.contiguous(x)
    batch_first = bool(mod.batch_first)
    b, t, i = x.shape if batch_first else (x.shape[1], x.shape[0], x.shape[2])
    h0 = c0 = None
    if mode == "lstm" and hx is not None:
        if not isinstance(hx, tuple) or len(hx) != 2:
            raise Unsupported(f"{where}: LSTM state must be a tuple (h0, c0)")
        h0, c0 = hx
    elif hx is not None:
        h0 = hx
    spec = RnnSpec(
        mode=mode,
        layers=int(mod.num_layers),
        directions=2 if mod.bidirectional else 1,
        seq_len=int(t),
        batch=int(b),
        input_size=int(i),
        hidden=int(mod.hidden_size),
        bias=bool(mod.bias),
        batch_first=batch_first,
        has_h0=h0 is not None,
        has_c0=c0 is not None,
    )
    if i != mod.input_size:
        raise Unsupported(f"{where}: input has {i} features, the module expects {mod.input_size}")
    args: list[Use] = [x]
    for name, state in (("h0", h0), ("c0", c0)):
        if state is None:
            continue
        if not isinstance(state, Use):
            raise Unsupported(f"{where}: {name} is not a tensor")
        if tuple(state.shape) != spec.state_shape:
            raise Unsupported(
                f"{where}: {name} has shape {state.shape}, expected {spec.state_shape}"
            )
        args.append(b_.contiguous(b_.plain(state, broadcast=False)))
    for wname in spec.weight_names():
        args.append(call.param(wname))
    seq = call.add("rnn", mode, list(args), spec.seq_shape, spec=spec)
    node = b_.g.node(seq.vid)
    assert node is not None
    h_n = rnn_out(b_.g, node, "h_n", spec.state_shape)
    if mode == "lstm":
        c_n = rnn_out(b_.g, node, "c_n", spec.state_shape)
        return (seq, (h_n, c_n))
    return (seq, h_n)


def rnn_outputs(mod: nn.Module, x: torch.Tensor, hx: Any = None) -> Any:
    """The module's outputs as empty tensors of the right shapes (running forward on meta
    tensors would run every time step)."""
    assert isinstance(mod, nn.RNNBase)
    d = 2 if mod.bidirectional else 1
    h = int(mod.hidden_size)
    state: tuple[int, ...] = (int(mod.num_layers) * d, h)
    if x.dim() == 2:
        seq_shape: tuple[int, ...] = (x.shape[0], d * h)
    else:
        b, t = (x.shape[0], x.shape[1]) if mod.batch_first else (x.shape[1], x.shape[0])
        seq_shape = (b, t, d * h) if mod.batch_first else (t, b, d * h)
        state = (state[0], int(b), h)
    seq = torch.empty(seq_shape, device=x.device, dtype=x.dtype)
    h_n = torch.empty(state, device=x.device, dtype=x.dtype)
    if isinstance(mod, nn.LSTM):
        return seq, (h_n, torch.empty(state, device=x.device, dtype=x.dtype))
    return seq, h_n


def factory_leaf(b: Builder, kind: str, size: Any, kwargs: dict[str, Any]) -> Use:
    """`torch.randn(L, B, H, device=x.device)` (or rand): a tensor the candidate draws the same
    way, from the same generator state, as the reference does."""
    where = b.here()
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = list(size[0])
    if not size or not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
        raise Unsupported(f"{where}: sizes must be known numbers")
    dtype = kwargs.get("dtype")
    if dtype not in (None, torch.float32):
        raise Unsupported(f"{where}: {dtype} tensors are not supported")
    for key in kwargs:
        if key not in ("device", "dtype", "requires_grad"):
            raise Unsupported(f"{where}: argument {key}= is not supported")
    shape = tuple(int(s) for s in size)
    leaf = b.g.add_leaf("factory", f"torch.{kind}", shape)
    return Use(leaf.vid, shape)
