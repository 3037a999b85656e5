; Every call in a subtree: the checks look at what forward (and what it calls) does.
(call function: (_) @fn arguments: (_) @args) @call
