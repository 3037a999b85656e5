"""The profiler's worker side: run a file under Nsight Compute (`measure`), the program it
profiles (`target`), and the report reader (`report`, the only user of ncu_report)."""
