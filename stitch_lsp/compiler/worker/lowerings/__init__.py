"""Every op's lowering, one module-level registration each (see `compiler.worker.lowering`).

Importing this package registers them all. To add an op: a `register_op` entry in
`compiler/ops.py` and a `@register_lowering` function in the module of its kind here.
"""

from stitch_lsp.compiler.worker.lowerings import data, linalg, nn, reductions, views

__all__ = ["data", "linalg", "nn", "reductions", "views"]
