; What the host side of an extension does (see stitch_lsp/analysis/cuda_host.py).

; Returned values.
(return_statement (_) @return.value) @return

; Locals: `auto out = torch::empty_like(x);`, `auto xc = x.contiguous();`
(init_declarator declarator: (_) value: (_)) @init

; Calls: what they are handed (a launch, cuBLAS or a helper may write it), in-place methods.
(call_expression) @call

; try { ... } catch (...) { ... }
(catch_clause) @catch

; `static` locals: handles are fine, tensors and pointer-keyed maps are result caches.
(declaration (storage_class_specifier) @static.kw (#any-of? @static.kw "static" "thread_local")) @static

; Comparisons (a static compared with an input's pointer is a cache lookup).
(binary_expression operator: ["==" "!="]) @compare

; The CPU (torch::kCPU, cudaMemcpyDeviceToHost, Device("cpu")) is found by a byte search.
