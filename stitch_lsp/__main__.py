import sys

from stitch_lsp.cli import main

sys.exit(main())
