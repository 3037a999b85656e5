; Every function definition. __global__ / __device__ / __host__ are anonymous children of
; function_definition in tree-sitter-cuda; the Python side reads them off the node.
(function_definition
  declarator: (_) @declarator
  body: (compound_statement) @body) @function
