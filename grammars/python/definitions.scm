; Module-level classes, functions, assignments and imports.
(module (class_definition
  name: (identifier) @class.name
  superclasses: (argument_list)? @class.bases) @class)
(module (decorated_definition definition: (class_definition
  name: (identifier) @class.name
  superclasses: (argument_list)? @class.bases) @class))
(module (function_definition name: (identifier) @function.name) @function)
(module (decorated_definition definition: (function_definition name: (identifier) @function.name) @function))
(module (expression_statement (assignment left: (identifier) @assign.name right: (_) @assign.value)))
(module [(import_statement) (import_from_statement)] @import)
