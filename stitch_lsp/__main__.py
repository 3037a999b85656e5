"""`python -m stitch_lsp`: the command line (`serve`, `check`, `verify`, ...)."""

import os
import sys

# `-m` puts the working folder first on sys.path. When that folder is a project (an editor
# starts the server inside the workspace), a file there named like a library the server imports
# (`pydantic.py`) would load instead of it. stitch_lsp itself is already imported by now.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from stitch_lsp.cli.main import main

sys.exit(main())
