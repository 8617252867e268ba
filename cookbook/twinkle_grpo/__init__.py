"""GRPO the twinkle-kit way: ``python -m cookbook.twinkle_grpo.short_math_admission``."""
