; Shared-memory declarations (static and `extern __shared__`).
(declaration (type_qualifier "__shared__")) @shared

; Calls worth knowing about: barriers, vendor libraries, stream creation.
(call_expression
  function: (identifier) @call.name
  (#match? @call.name "^(__syncthreads|__syncwarp|cublas[A-Za-z0-9_]*|cublasLt[A-Za-z0-9_]*|cudnn[A-Za-z0-9_]*|cudaStreamCreate[A-Za-z]*)$")) @call
