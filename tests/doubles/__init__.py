"""Faithful test doubles of framework types (each module names the commit it mirrors)."""
