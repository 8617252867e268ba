"""
Installing an adapter into a host module when (and only if) the process imports it.

Hosts with no plug-in setting (RAGEN's trainer, OpenRLHF's generator) are patched from a
Ray ``worker_process_setup_hook``, which runs before the worker imports the host: the
patch waits in a finder on ``sys.meta_path`` until the module has been executed.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["InstallOnImport", "install_on_import"]


class _InstallingLoader(importlib.abc.Loader):
    """Runs the real loader, then the install on the module it loaded."""

    def __init__(self, loader: Any, install: Callable[[ModuleType], object]) -> None:
        self._loader = loader
        self._install = install

    def create_module(self, spec: Any) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._install(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, is_package, resource readers...: whatever the real loader offers.
        return getattr(self._loader, name)


class InstallOnImport(importlib.abc.MetaPathFinder):
    """
    Finds ``module`` through the other finders and wraps its loader to run ``install`` after it.

    Attributes:
        module: The full name of the host module it waits for.
    """

    def __init__(self, module: str, install: Callable[[ModuleType], object]) -> None:
        self.module = module
        self._install = install

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        """The other finders' spec for :attr:`module`, its loader wrapped; ``None`` for any other."""
        if fullname != self.module:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _InstallingLoader(spec.loader, self._install)
                return spec
        return None


def install_on_import(module: str, install: Callable[[ModuleType], object]) -> bool:
    """
    Run ``install(host_module)`` now if ``module`` is imported, else once the process imports it.

    Idempotent: one finder per module name, however often it is called (a Ray setup hook
    runs once per worker, a test many times). Returns whether it installed now.
    """
    loaded = sys.modules.get(module)
    if loaded is not None:
        install(loaded)
        return True
    if not any(isinstance(finder, InstallOnImport) and finder.module == module for finder in sys.meta_path):
        sys.meta_path.insert(0, InstallOnImport(module, install))
    return False
