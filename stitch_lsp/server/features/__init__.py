"""Server features. Each module defines `register(server) -> None` and is listed in
`stitch_lsp.server.app.FEATURE_MODULES`."""
