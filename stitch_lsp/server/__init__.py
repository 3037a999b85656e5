"""The language server (pygls). It never imports torch: GPU work runs in worker subprocesses.

Adding a feature
----------------
Write `stitch_lsp/server/features/<name>.py` with `def register(server: StitchServer) -> None`
and add `"stitch_lsp.server.features.<name>"` to `FEATURE_MODULES` in `app.py`. In `register`:

- `server.register_diagnostic_source(name, fn)`: `fn(doc) -> list[Finding | Diagnostic]`,
  recomputed on every publish; sources are merged, so `ncu` findings sit beside the `stitch`
  static ones. For results that arrive later (a profile), push them instead:
  `server.set_diagnostics(uri, "ncu", items, version=doc.version)` (dropped once the text
  changes past that version) and `server.clear_diagnostics(uri, "ncu")`.
- `server.register_hover_provider(name, fn)`: `fn(doc, position) -> Markdown | None`;
  sections are joined in FEATURE_MODULES order (static first).
- `server.register_code_lens_provider(name, fn)`: `fn(doc) -> list[CodeLens]`.
- `server.register_code_action_provider(name, fn)`: `fn(doc, params) -> list[CodeAction]`.
  `textDocument/codeLens` and `codeAction` are advertised only when some provider exists.
- `server.register_command("stitch.verify", handler, executes_code=True)`:
  `async handler(server, *args)`. Only registered commands are advertised in
  `executeCommandProvider.commands`; those that run code are left out when the workspace is
  untrusted (`initializationOptions.trusted` is anything but `true`, or absent without
  `serve --trust`), and lenses/actions pointing at them are filtered out.
- `server.save_listeners`, `server.file_change_listeners`, `server.settings_listeners`:
  callbacks for didSave, watched files that are not open, and settings changes.
- `server.jobs` (`jobs.JobScheduler`): background GPU work, one job per GPU, supersede and
  cancel-on-change, `$/progress`, content-hash cache; `server.send_status(...)` drives the
  client's status bar (`stitch/status`). Untrusted: GPU jobs and CPU jobs marked
  `executes_code=True` are refused (state `untrusted`), so on-save triggers are safe too.

Providers receive an `OpenDocument` (`documents.py`): `.uri`, `.version`, `.text`, `.path`,
`.analysis` (the `stitch_lsp.analysis.Analysis` of the current text, or None when the file is
too large), `.reference_path()`. Convert positions only with `convert.py`.
"""
