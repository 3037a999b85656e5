"""Recurrent problems in KernelBench format, with odd sizes, for every variant we claim."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RnnCase:
    cls: str  # RNN | LSTM | GRU
    layers: int = 2
    bidirectional: bool = False
    batch_first: bool = False
    bias: bool = True
    nonlinearity: str = "tanh"
    with_state: bool = True  # pass h0 (and c0) as inputs; else the module starts from zeros
    returns: str = "all"  # all | last_step | last_layer | seq
    seq: int = 7
    batch: int = 3
    inputs: int = 13
    hidden: int = 21

    @property
    def name(self) -> str:
        parts = [self.cls.lower(), f"l{self.layers}"]
        parts += ["bi"] if self.bidirectional else []
        parts += ["bf"] if self.batch_first else []
        parts += [] if self.bias else ["nobias"]
        parts += ["relu"] if self.nonlinearity == "relu" else []
        parts += [] if self.with_state else ["zero"]
        parts.append(self.returns)
        return "_".join(parts)

    def source(self) -> str:
        d = 2 if self.bidirectional else 1
        extra = f", nonlinearity={self.nonlinearity!r}" if self.cls == "RNN" else ""
        lstm = self.cls == "LSTM"
        args = "x, h0, c0" if (lstm and self.with_state) else ("x, h0" if self.with_state else "x")
        state = "(h0, c0)" if lstm else "h0"
        call = f"self.rnn(x, {state})" if self.with_state else "self.rnn(x)"
        hn = "(h, c)" if lstm else "h"
        last = "out[:, -1, :]" if self.batch_first else "out[-1]"
        ret = {
            "all": "out, h, c" if lstm else "out, h",
            "last_step": f"self.fc({last})",
            "last_layer": "h[-1]",
            "seq": "out",
        }[self.returns]
        shape = (
            f"{self.batch}, {self.seq}, {self.inputs}"
            if self.batch_first
            else f"{self.seq}, {self.batch}, {self.inputs}"
        )
        state_shape = f"{self.layers * d}, {self.batch}, {self.hidden}"
        inputs = [f"torch.randn({shape})"]
        if self.with_state:
            inputs.append(f"torch.randn({state_shape})")
            if lstm:
                inputs.append(f"torch.randn({state_shape})")
        return (
            "import torch\nimport torch.nn as nn\n\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            f"        self.rnn = nn.{self.cls}({self.inputs}, {self.hidden}, {self.layers}, "
            f"bias={self.bias}, batch_first={self.batch_first}, "
            f"bidirectional={self.bidirectional}{extra})\n"
            f"        self.fc = nn.Linear({self.hidden * d}, 5)\n\n"
            f"    def forward(self, {args}):\n"
            f"        out, {hn} = {call}\n"
            f"        return {ret}\n\n\n"
            "def get_inputs():\n"
            f"    return [{', '.join(inputs)}]\n\n\n"
            "def get_init_inputs():\n"
            "    return []\n"
        )


CASES = [
    RnnCase("LSTM"),
    RnnCase("LSTM", layers=3, bidirectional=True, batch_first=True),
    RnnCase("LSTM", layers=1, batch_first=True, with_state=False, returns="last_step"),
    RnnCase("LSTM", bidirectional=True, bias=False, returns="last_layer"),
    RnnCase("GRU"),
    RnnCase("GRU", layers=3, bidirectional=True, batch_first=True, returns="seq"),
    RnnCase("GRU", batch_first=True, with_state=False, returns="last_step"),
    RnnCase("RNN"),
    RnnCase("RNN", nonlinearity="relu", bidirectional=True, batch_first=True),
    RnnCase("RNN", layers=1, bias=False, with_state=False, returns="last_layer"),
    # Stacks of one direction run as a wavefront: h_n rows and c_n come out of its own layout.
    RnnCase("LSTM", layers=3, batch_first=True, returns="last_layer"),
    RnnCase("GRU", layers=3, with_state=False, returns="last_layer"),
    RnnCase("RNN", layers=3, nonlinearity="relu", bias=False, batch_first=True),
]
