"""Running worker jobs on a Ray cluster instead of this machine.

Server side and torch-free. Nothing here imports `ray` at module import: the package is loaded
only when a cluster is asked for (`--ray`, the `cluster` setting), and `ray` only inside the
functions that need it, so the local path never pays for it (tests/cluster/test_no_ray.py).

- `blobs`: content-addressed files: a file travels once per content, keyed by its sha256, and
  is kept in a cache on each node that received it;
- `transfer`: which fields of a worker request name files, and how request and result paths are
  rewritten between this machine and the node;
- `session`: connecting to a cluster (or starting a local one for a run) and what it has free;
- `node`: the actor that runs one worker job on a node and owns its process group;
- `executor`: `RayLauncher`, the remote executor of worker calls.
"""

from __future__ import annotations

RAY_MISSING = (
    "running on a cluster needs Ray, which is not installed here: "
    "pip install 'stitch-lsp[cluster]' (or pip install 'ray[default]')"
)
