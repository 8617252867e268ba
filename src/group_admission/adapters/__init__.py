"""
Thin adapters that plug the admission policy into RL frameworks.

Each framework has its own module (``group_admission.adapters.slime``, ``.roll``,
``.ragen``, ``.challenger``), selected by a class or function path in the framework's own
config. Importing this package imports no framework.
"""

from __future__ import annotations

__all__: list[str] = []
