"""The builtin compiler's worker side: capture with torch (on the meta device) and the
`generate` worker that drives capture, scheduling, codegen and the program wrapper."""
