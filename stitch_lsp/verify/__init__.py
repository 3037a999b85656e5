"""The Verifier: build, check, time and police a candidate against its reference.

`verify()` is torch-free and safe to call from the language server: all GPU work happens in a
worker subprocess (`python -m stitch_lsp.verify.worker.main`) that talks back in pydantic JSON.
"""

from stitch_lsp.gpus import visible_gpus
from stitch_lsp.verify.client import verify
from stitch_lsp.verify.devices import DevicePool

__all__ = ["DevicePool", "verify", "visible_gpus"]
