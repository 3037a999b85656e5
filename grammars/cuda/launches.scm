; kernel<<<grid, block, smem, stream>>>(args): a call_expression with a kernel_call_syntax child.
(call_expression
  function: (_) @kernel
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch
