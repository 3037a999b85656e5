"""KernelBench's evaluation code, vendored (see ../VENDORED.md). The original __init__ imports
utils, which pulls in inference clients the evaluation does not need."""
