; What the host side of an extension does (see stitch_lsp/analysis/cuda_host.py).

; Returned values.
(return_statement (_) @return.value) @return

; Locals: `auto out = torch::empty_like(x);`, `auto xc = x.contiguous();`
(init_declarator declarator: (_) value: (_)) @init

; Everything handed to a call (a launch, cuBLAS, a helper) may be written by it.
(argument_list) @args
(call_expression) @call

; try { ... } catch (...) { ... }
(catch_clause) @catch

; `static` locals: handles are fine, tensors and pointer-keyed maps are result caches.
(declaration (storage_class_specifier) @static.kw (#eq? @static.kw "static")) @static

; Comparisons (a static compared with an input's pointer is a cache lookup).
(binary_expression operator: ["==" "!="]) @compare

; The CPU: torch::kCPU, cudaMemcpyDeviceToHost, Device("cpu").
((identifier) @cpu (#match? @cpu "^(kCPU|cudaMemcpyDeviceToHost)$"))
((string_literal (string_content) @cpu) (#eq? @cpu "cpu"))
