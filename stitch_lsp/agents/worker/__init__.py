"""The Planner's worker side: analyse the reference with torch (op inventory, shapes, fusion
groups) and build the forward scaffold for step-by-step runs."""
