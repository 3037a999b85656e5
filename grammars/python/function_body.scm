; What the checks need from the body of one function or method.
(call function: (_) @call.fn arguments: (_) @call.args) @call
(try_statement (except_clause) @except) @try
(if_statement condition: (_) @if.cond) @if
(return_statement) @return
(binary_operator operator: "@") @matmul
; Names and attributes used as values where a function can be handed over to be called later:
; `_run(ext.relu, torch.relu, x)`, `def f(x, fallback=F.gelu)`, `{"op": torch.mm}`, `[F.relu]`.
(argument_list [(identifier) (attribute)] @value)
(keyword_argument value: [(identifier) (attribute)] @value)
(default_parameter value: [(identifier) (attribute)] @value)
(typed_default_parameter value: [(identifier) (attribute)] @value)
(pair value: [(identifier) (attribute)] @value)
(list [(identifier) (attribute)] @value)
(tuple [(identifier) (attribute)] @value)
