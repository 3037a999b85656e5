; What the checks need from the body of one function or method.
(call function: (_) @call.fn arguments: (_) @call.args) @call
(try_statement (except_clause) @except) @try
(if_statement condition: (_) @if.cond) @if
(return_statement) @return
(binary_operator operator: "@") @matmul
