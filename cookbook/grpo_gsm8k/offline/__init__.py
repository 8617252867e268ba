"""
The offline demo's scaffolding.

Synthetic GSM8K-format problems, a tiny warm-started Qwen2 built locally, the demo's config,
and a converter for SmolLM2 from a PyPI wheel.

Nothing here is part of the recipe: point the training script at real data and a real
model and none of it runs.
"""
