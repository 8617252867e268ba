"""The cookbook: recipes run by name from the repository root (``python -m cookbook.<recipe>``)."""
