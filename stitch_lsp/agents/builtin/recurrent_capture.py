"""Capture of recurrent modules and the tensors a forward makes for their initial state.

An nn.RNN / nn.LSTM / nn.GRU call becomes one `rnn` IR node (a leaf module, not decomposed)
plus `rnn_out` nodes for h_n and c_n; it returns what the module returns, so `out, (h, c) =
self.lstm(x, (h0, c0))` unpacks as usual. `torch.randn/rand/zeros/ones(...)` in forward (the
usual way a reference makes h0) become `factory` leaves that the candidate makes the same way,
so it draws the same random numbers as the reference would from the same generator state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn

from stitch_lsp.agents.builtin.ir import Unsupported, Use
from stitch_lsp.agents.builtin.recurrent import RnnSpec, rnn_out

if TYPE_CHECKING:
    from stitch_lsp.agents.builtin.capture import _Converter

_MODES = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}
_FACTORIES = {torch.randn: "randn", torch.rand: "rand", torch.zeros: "zeros", torch.ones: "ones"}


def capture_recurrent(conv: _Converter, n: torch.fx.Node, mod: nn.Module, path: str) -> Any:
    """The module call as IR, or None when `mod` is not a recurrent module."""
    from stitch_lsp.agents.builtin.capture import _desc, _line

    if not isinstance(mod, nn.RNNBase):
        return None
    where = _desc(n)
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
    x = conv._use(n.args[0])
    hx = conv._val(n.args[1]) if len(n.args) > 1 else conv._val(n.kwargs.get("hx"))
    if len(x.shape) != 3:
        raise Unsupported(f"{where}: unbatched (2-D) recurrent input is not supported")
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
        args.append(conv._plain(state))
    for wname in spec.weight_names():
        p = conv._param(path, wname)
        if p is None:
            raise Unsupported(f"{where}: the module has no parameter {wname}")
        args.append(p)
    node = conv.g.add("rnn", mode, args, spec.seq_shape, where, _line(n), spec=spec)
    h_n = rnn_out(conv.g, node, "h_n", spec.state_shape)
    seq = Use(node.vid, spec.seq_shape)
    if mode == "lstm":
        c_n = rnn_out(conv.g, node, "c_n", spec.state_shape)
        return (seq, (h_n, c_n))
    return (seq, h_n)


def capture_factory(conv: _Converter, n: torch.fx.Node) -> Use | None:
    """`torch.randn(L, B, H, device=x.device)` and friends, or None for another function."""
    from stitch_lsp.agents.builtin.capture import _desc

    kind = _FACTORIES.get(n.target)  # type: ignore[call-overload]
    if kind is None:
        return None
    size = [conv._val(a) for a in n.args]
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = list(size[0])
    if not size or not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
        raise Unsupported(f"{_desc(n)}: sizes must be known numbers")
    dtype = n.kwargs.get("dtype")
    if dtype not in (None, torch.float32):
        raise Unsupported(f"{_desc(n)}: {dtype} tensors are not supported")
    for key in n.kwargs:
        if key not in ("device", "dtype", "requires_grad"):
            raise Unsupported(f"{_desc(n)}: argument {key}= is not supported")
    shape = tuple(int(s) for s in size)
    leaf = conv.g.add_leaf("factory", f"torch.{kind}", shape)  # type: ignore[arg-type]
    return Use(leaf.vid, shape)
