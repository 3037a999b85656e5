-- Drives stitch-lsp from headless Neovim (0.7 or newer), a client written by other people than ours:
-- start the server with vim.lsp.start_client, open a file, wait for its diagnostics, ask for the
-- code actions at a stitch diagnostic, and write everything that arrived as JSON.
--
-- Environment: STITCH_PYTHON (interpreter with stitch_lsp), STITCH_NVIM_FILE (file to open),
-- STITCH_NVIM_ROOT (workspace folder), STITCH_NVIM_OUT (JSON result path).

local python = assert(os.getenv("STITCH_PYTHON"), "STITCH_PYTHON is not set")
local file = assert(os.getenv("STITCH_NVIM_FILE"), "STITCH_NVIM_FILE is not set")
local root = assert(os.getenv("STITCH_NVIM_ROOT"), "STITCH_NVIM_ROOT is not set")
local out = assert(os.getenv("STITCH_NVIM_OUT"), "STITCH_NVIM_OUT is not set")

local result = {
  nvim = tostring(vim.version().major) .. "." .. tostring(vim.version().minor),
  statuses = {},
  diagnostics = {},
  code_actions = vim.NIL,
  errors = {},
}

local function write_and_quit()
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd("qa!")
end

local ok, err = pcall(function()
  vim.cmd("filetype on")
  local client_id = vim.lsp.start_client({
    name = "stitch-lsp",
    cmd = { python, "-m", "stitch_lsp", "serve" },
    cmd_cwd = root,
    root_dir = root,
    init_options = { settings = {}, trusted = true },
    -- Answers the server's workspace/configuration request for the `stitch` section.
    settings = { stitch = { debounceMs = 50 } },
    handlers = {
      ["stitch/status"] = function(_, params)
        table.insert(result.statuses, params)
      end,
    },
    on_exit = function(code, signal)
      result.exit_code = code
      result.exit_signal = signal
    end,
  })
  assert(client_id, "vim.lsp.start_client returned nil")

  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[bufnr].filetype
  vim.lsp.buf_attach_client(bufnr, client_id)

  local got = vim.wait(30000, function()
    return #vim.diagnostic.get(bufnr) > 0
  end, 50)
  if not got then
    table.insert(result.errors, "no diagnostics within 30 s")
  end
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(result.diagnostics, {
      line = d.lnum,
      col = d.col,
      severity = d.severity,
      code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) or vim.NIL,
      message = d.message,
      source = d.source,
    })
  end

  local client = vim.lsp.get_client_by_id(client_id)
  local caps = client.server_capabilities or client.resolved_capabilities
  result.commands = (caps.executeCommandProvider and caps.executeCommandProvider.commands) or {}
  result.code_action_provider = caps.codeActionProvider ~= nil and caps.codeActionProvider ~= false

  -- Code actions at the torch-fallback diagnostic (else the first), with the line's diagnostics
  -- as context, the way Neovim's own vim.lsp.buf.code_action asks.
  local first = vim.diagnostic.get(bufnr)[1]
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.code == "stitch.torch-fallback" then
      first = d
    end
  end
  if first and result.code_action_provider then
    -- LSP-shaped diagnostics of that line, built from vim.diagnostic items (works on 0.7 to 0.11).
    local line_diags = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr, { lnum = first.lnum })) do
      table.insert(line_diags, {
        range = {
          start = { line = d.lnum, character = d.col },
          ["end"] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
        },
        severity = d.severity,
        message = d.message,
        code = d.code,
        source = d.source,
      })
    end
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      range = {
        start = { line = first.lnum, character = first.col },
        ["end"] = { line = first.lnum, character = first.col },
      },
      context = { diagnostics = line_diags },
    }
    local responses, req_err = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, 15000)
    if not responses then
      table.insert(result.errors, "codeAction: " .. tostring(req_err))
    else
      local actions = {}
      for _, response in pairs(responses) do
        if response.error then
          table.insert(result.errors, "codeAction error: " .. vim.inspect(response.error))
        end
        for _, action in ipairs(response.result or {}) do
          local cmd = action.command
          if type(cmd) == "table" then
            cmd = cmd.command
          end
          table.insert(actions, { title = action.title, kind = action.kind or vim.NIL, command = cmd or vim.NIL })
        end
      end
      result.code_actions = actions
    end
  end

  -- The status follows device discovery, which may finish after the first diagnostics.
  vim.wait(15000, function()
    return #result.statuses > 0
  end, 50)

  vim.lsp.stop_client(client_id)
  vim.wait(10000, function()
    return result.exit_code ~= nil
  end, 50)
end)

if not ok then
  table.insert(result.errors, tostring(err))
end
write_and_quit()
