"""
Thin adapters that plug the admission policy into RL frameworks.

Each framework has its own module, selected by a class or function path in the framework's
own config or a few lines of the user's code: ``group_admission.adapters.slime``, ``.roll``,
``.ragen``, ``.challenger``, ``.twinkle``, ``.trl``, ``.verl``, ``.openrlhf``, and, where RL
runs asynchronously, ``.trl_async`` (TRL's ``AsyncGRPOTrainer``) and ``.areal`` (AReaL's
``should_accept_fn``). SkyRL has no module: docs/adapters/skyrl.md compares its settings.
Importing this package imports no framework.
"""

from __future__ import annotations

__all__: list[str] = []
