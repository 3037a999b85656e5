; What the checks need from the body of one function or method.
(call function: (_) @call.fn arguments: (_) @call.args) @call
(try_statement (except_clause) @except) @try
(return_statement) @return
(binary_operator operator: "@") @matmul
