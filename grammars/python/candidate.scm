; File-wide patterns the anti-cheating checks look for in a candidate solution.

; Assigning over timers or synchronisation: torch.cuda.Event.record = ..., time.perf_counter = ...
(assignment
  left: (attribute
    attribute: (identifier) @patch.attr
    (#any-of? @patch.attr "record" "elapsed_time" "synchronize" "perf_counter" "perf_counter_ns"
      "time" "time_ns" "monotonic" "monotonic_ns" "Event" "Stream" "current_stream")) @patch.target) @patch

; setattr(torch.cuda, "synchronize", ...), monkeypatch.setattr(...), mock.patch("time.perf_counter")
(call
  function: [(identifier) (attribute)] @setattr.fn
  arguments: (argument_list) @setattr.args
  (#match? @setattr.fn "(^|\\.)(setattr|patch|object)$")) @setattr

; Side streams: torch.cuda.Stream(), torch.cuda.stream(s), cuda.Stream()
(call
  function: (attribute) @stream.fn
  (#match? @stream.fn "(^|\\.)cuda\\.(Stream|stream|ExternalStream)$")) @stream

; Threads and processes.
(call
  function: [(identifier) (attribute)] @thread.fn
  (#match? @thread.fn "(^|\\.)(Thread|ThreadPoolExecutor|ProcessPoolExecutor|Process|Pool|start_new_thread|Timer)$")) @thread

; TF32 for fp32 matmuls: passes loose tolerances while computing something else.
(assignment
  left: (attribute attribute: (identifier) @tf32.attr (#eq? @tf32.attr "allow_tf32"))
  right: (true)) @tf32
(call
  function: (attribute attribute: (identifier) @precision.fn
    (#eq? @precision.fn "set_float32_matmul_precision"))
  arguments: (argument_list) @precision.args) @precision
