"""The `stitch-lsp` command line: `main` dispatches subcommands, `contract` is what they share."""
