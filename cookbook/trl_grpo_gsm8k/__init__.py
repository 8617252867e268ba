"""GRPO on GSM8K the TRL way: ``python -m cookbook.trl_grpo_gsm8k.train``; its benchmark ``.bench``."""
