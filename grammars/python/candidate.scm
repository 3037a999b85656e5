; File-wide patterns the anti-cheating checks look for in a candidate solution. Calls (streams,
; threads, torch.compile, ...) are resolved in Python; these are the shapes a call cannot show.

; Assigning over timers or synchronisation: torch.cuda.Event.record = ..., time.perf_counter = ...
(assignment
  left: (attribute
    attribute: (identifier) @patch.attr
    (#any-of? @patch.attr "record" "elapsed_time" "synchronize" "perf_counter" "perf_counter_ns"
      "time" "time_ns" "monotonic" "monotonic_ns" "Event" "Stream" "current_stream")) @patch.target) @patch

; ... or through a namespace: vars(torch.cuda)["synchronize"] = ..., sys.modules["time"] = ...
(assignment
  left: (subscript) @dictpatch
  (#match? @dictpatch "__dict__|vars\\(|sys\\.modules"))

; Assigning over any attribute: what the object resolves to tells a harness function
; (torch.allclose = ..., T.isclose = ..., torch.Tensor.__eq__ = ...) from a module's own state.
(assignment
  left: (attribute
    object: (_) @gpatch.object
    attribute: (identifier) @gpatch.attr) @gpatch.target)

; setattr(torch.cuda, "synchronize", ...), monkeypatch.setattr(...), mock.patch("time.perf_counter")
(call
  function: [(identifier) (attribute)] @setattr.fn
  arguments: (argument_list) @setattr.args
  (#match? @setattr.fn "(^|\\.)(setattr|__setattr__|patch|object)$")) @setattr

; TF32 for fp32 matmuls: passes loose tolerances while computing something else.
(assignment
  left: (attribute attribute: (identifier) @tf32.attr
    (#any-of? @tf32.attr "allow_tf32" "fp32_precision"))
  right: (_) @tf32.value) @tf32

; Decorators (@torch.compile, @torch.jit.script, aliases of them).
(decorator) @decorator

; Classes with bases (tensor subclasses, dispatch modes) and operator interception hooks.
(class_definition superclasses: (argument_list) @class.bases) @class
(function_definition
  name: (identifier) @hook.name
  (#any-of? @hook.name "__torch_function__" "__torch_dispatch__")) @torch_hook
