; Calls that build CUDA at run time, anywhere in the file:
;   load_inline / cpp_extension.load_inline / torch.utils.cpp_extension.load_inline
;   load / cpp_extension.load (files), and stitch-lsp's own load_cuda(SRC, ...) and
;   build_cuda(SRC, ...) from stitch_lsp.runtime.
; The Python side rejects `load` that is not torch's (json.load, torch.load, ...).
(call
  function: [
    (identifier) @fn.name
    (attribute attribute: (identifier) @fn.name)
  ] @fn
  arguments: (argument_list) @args
  (#any-of? @fn.name "load_inline" "load" "load_cuda" "build_cuda")) @call
