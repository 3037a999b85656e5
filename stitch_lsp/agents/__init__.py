"""agents."""
