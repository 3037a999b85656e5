"""Name resolution: what a callee stands for, the way Python would bind it."""

from __future__ import annotations

import textwrap

import pytest

from stitch_lsp.analysis import grammars, python_facts
from stitch_lsp.analysis.names import Ref, Resolver
from stitch_lsp.analysis.syntax import text


def resolve_last_call(source: str, with_facts: bool = True) -> Ref | None:
    """What the callee of the last call in `source` resolves to."""
    data = textwrap.dedent(source).encode()
    root = grammars.parser("python").parse(data).root_node
    facts = python_facts.extract([root], data) if with_facts else None
    last = root.named_children[-1]
    call = last.named_children[0] if last.type == "expression_statement" else last
    if call.type == "assignment":
        call = call.child_by_field_name("right")
    assert call is not None and call.type == "call", text(last)
    return Resolver([root], facts).resolve(call.child_by_field_name("function"))


def resolve_inner_call(source: str) -> Ref | None:
    """What the callee of the last call inside the file's last function or class resolves to."""
    data = textwrap.dedent(source).encode()
    root = grammars.parser("python").parse(data).root_node
    calls = grammars.captures("python", "function_body", root.named_children[-1])["call"]
    outer = max(calls, key=lambda c: (c.start_byte, c.end_byte))
    facts = python_facts.extract([root], data)
    return Resolver([root], facts).resolve(outer.child_by_field_name("function"))


@pytest.mark.parametrize(
    ("source", "dotted"),
    [
        ("import torch.nn.functional as G\nG.gelu(x)", "torch.nn.functional.gelu"),
        ("from torch import matmul as mm\nmm(a, b)", "torch.matmul"),
        ("import torch as t\nt.relu(x)", "torch.relu"),
        ("from torch import nn\nnn.functional.softmax(x)", "torch.nn.functional.softmax"),
        ('import torch\ngetattr(torch, "matmul")(a, b)', "torch.matmul"),
        (
            'import torch.nn.functional as F\nNAME = "gelu"\ngetattr(F, NAME)(x)',
            "torch.nn.functional.gelu",
        ),
        ('import torch\nname = "sig" + "moid"\ngetattr(torch, name)(x)', "torch.sigmoid"),
        ("import torch\nop = torch.matmul\nop(a, b)", "torch.matmul"),
        ("import torch\nop = alias = torch.relu\nalias(x)", "torch.relu"),
        (
            "import functools, torch\nsm = functools.partial(torch.softmax, dim=1)\nsm(x)",
            "torch.softmax",
        ),
        ("from torch.nn.functional import *\ngelu(x)", "torch.nn.functional.gelu"),
        (
            'import importlib\nm = importlib.import_module("torch.nn.functional")\nm.relu(x)',
            "torch.nn.functional.relu",
        ),
        ('import torch\nOPS = {"a": torch.relu}\nOPS["a"](x)', "torch.relu"),
        ('import torch\nvars(torch)["tanh"](x)', "torch.tanh"),
        ('import sys\nsys.modules["torch"].exp(x)', "torch.exp"),
        (
            "try:\n    import torch.nn.functional as G\nexcept ImportError:\n    G = None\n"
            "G.silu(x)",
            "torch.nn.functional.silu",
        ),
    ],
)
def test_module_level_disguises(source: str, dotted: str) -> None:
    for with_facts in (True, False):
        ref = resolve_last_call(source, with_facts)
        assert ref is not None and ref.dotted == dotted, (with_facts, ref)


def test_locals_parameters_and_self_attributes() -> None:
    ref = resolve_inner_call(
        """
        import torch
        import torch.nn as nn

        def helper(x, fallback=torch.relu):
            return fallback(x)
        """
    )
    assert ref is not None and ref.dotted == "torch.relu"  # the parameter's default

    ref = resolve_inner_call(
        """
        import torch.nn.functional as F

        class M:
            def __init__(self):
                self.act = F.gelu

            def forward(self, x):
                act = self.act
                return act(x)
        """
    )
    assert ref is not None and ref.dotted == "torch.nn.functional.gelu"


def test_call_arguments_bind_parameters() -> None:
    data = textwrap.dedent(
        """
        import torch

        def run(kernel, fallback, x):
            try:
                return kernel(x)
            except Exception:
                return fallback(x)

        def forward(x):
            return run(None, torch.sigmoid, x)
        """
    ).encode()
    root = grammars.parser("python").parse(data).root_node
    resolver = Resolver([root])
    calls = grammars.captures("python", "function_body", root)["call"]
    by_text = {text(c): c for c in calls}
    run_fn = resolver.resolve(
        by_text["run(None, torch.sigmoid, x)"].child_by_field_name("function")
    )
    assert run_fn is not None and run_fn.node is not None
    resolver.note_call_arguments(run_fn.node, by_text["run(None, torch.sigmoid, x)"], None)
    fallback = resolver.resolve(by_text["fallback(x)"].child_by_field_name("function"))
    assert fallback is not None and fallback.dotted == "torch.sigmoid"


@pytest.mark.parametrize(
    "body",
    [
        "y = x.relu()\n    return y.softmax(1)",  # a method of a tensor: only its name tells
        "name = make()\n    return getattr(torch, name)(x)",  # a name built at run time
        'return getattr(torch, "".join(["mat", "mul"]))(x, x)',
    ],
)
def test_what_the_source_does_not_say_stays_unknown(body: str) -> None:
    ref = resolve_inner_call(f"import torch\ndef forward(x):\n    {body}\n")
    assert ref is None or ref.dotted is None


def test_results_of_calls_and_own_functions() -> None:
    ref = resolve_last_call("import torch\nout = torch.empty(3)\nout.relu_()")
    assert ref is not None and ref.dotted == "torch.empty().relu_"
    ref = resolve_last_call("def helper(x):\n    return x\nhelper(1)")
    assert ref is not None and ref.node is not None and ref.node.type == "function_definition"
    ref = resolve_last_call("f = lambda t: t\nf(1)")
    assert ref is not None and ref.node is not None and ref.node.type == "lambda"
    ref = resolve_inner_call('def forward(x):\n    return getattr(x, "data_ptr")()\n')
    assert ref is not None and ref.spelled == "x.data_ptr"
