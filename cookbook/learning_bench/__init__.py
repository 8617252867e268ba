"""The learning bench: held-out accuracy per generated token for every admission strategy."""
