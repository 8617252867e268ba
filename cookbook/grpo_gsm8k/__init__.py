"""GRPO on GSM8K with group admission and bounded resampling: the cookbook's main recipe."""
