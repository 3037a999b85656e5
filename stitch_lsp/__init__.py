"""stitch-lsp: plan, write, verify and profile fused CUDA for PyTorch modules, in the editor."""

__version__ = "0.1.0"
