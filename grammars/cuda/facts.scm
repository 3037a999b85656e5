; Shared-memory declarations (static and `extern __shared__`).
(declaration (type_qualifier "__shared__")) @shared

; Calls worth knowing about: barriers, vendor libraries, stream creation.
(call_expression
  function: (identifier) @call.name
  (#match? @call.name "^(__syncthreads|__syncwarp|cublas[A-Za-z0-9_]*|cublasLt[A-Za-z0-9_]*|cudnn[A-Za-z0-9_]*|cudaStreamCreate[A-Za-z]*)$")) @call

; A kernel named as a value (cudaLaunchKernel(k, ...), &k, function pointers) counts as used.
(argument_list (identifier) @value)
(argument_list (pointer_expression argument: (identifier) @value))
(argument_list (cast_expression value: (identifier) @value))
(init_declarator value: (identifier) @value)
(init_declarator value: (pointer_expression argument: (identifier) @value))
(assignment_expression right: (identifier) @value)
