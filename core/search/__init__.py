"""Generated spaces: what a search strategy sees and records, and the compile-option profiles."""
