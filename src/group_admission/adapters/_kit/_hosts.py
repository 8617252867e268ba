"""
How an adapter meets its host: the supported versions as data, one check, one lazy import.

Every adapter package exports ``SUPPORTED_VERSIONS`` (built by :func:`host_versions`): a
read-only mapping from each host distribution to a PEP 440 specifier
(``{"trl": ">=1.16,<1.17"}``) or, for a host with no release that carries what the
adapter uses, to the commit it was checked against (``{"ragen":
"mll-lab-nu/RAGEN@20daedc..."}``). :func:`check_versions` compares them with what is
installed, from package metadata only. :func:`import_host` and :func:`find_host` are the
one way an adapter imports its host; :func:`publish` gives an adapter package's names
their public module.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from importlib import metadata
from types import MappingProxyType, ModuleType
from typing import Any

from ..._validation import deprecated, describe

__all__ = ["check_versions", "find_host", "host_versions", "import_host", "moved_names", "publish"]

#: A commit pin: ``owner/repository@<7 to 40 hex digits>``.
_COMMIT = re.compile(r"(?P<repository>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{7,40})")
#: One or more PEP 440 version clauses, comma-separated (the syntax only; ``packaging`` checks).
_SPECIFIER = re.compile(
    r"\s*(~=|===?|!=|<=|>=|<|>)\s*[\w.*+!-]+\s*(,\s*(~=|===?|!=|<=|>=|<|>)\s*[\w.*+!-]+\s*)*"
)

_checked: set[str] = set()
_lock = threading.Lock()


def host_versions(versions: Mapping[str, str]) -> Mapping[str, str]:
    """
    ``SUPPORTED_VERSIONS`` of an adapter: distribution -> specifier or commit, read-only.

    Raises:
        ValueError: a value is neither a PEP 440 specifier nor ``owner/repository@commit``.
    """
    for distribution, wanted in versions.items():
        if not (isinstance(wanted, str) and (_COMMIT.fullmatch(wanted) or _SPECIFIER.fullmatch(wanted))):
            msg = (
                f"the supported versions of {distribution!r} must be a PEP 440 specifier or "
                f"'owner/repository@commit' (got {describe(wanted)})"
            )
            raise ValueError(msg)
    return MappingProxyType(dict(versions))


def _installed_commit(dist: metadata.Distribution) -> str | None:
    """The commit a distribution was installed from (PEP 610 ``direct_url.json``), if pip recorded one."""
    with contextlib.suppress(ValueError, TypeError, KeyError):  # no record, or not from a VCS
        commit = json.loads(dist.read_text("direct_url.json") or "null")["vcs_info"]["commit_id"]
        return commit if isinstance(commit, str) else None
    return None


def _problem(distribution: str, wanted: str) -> str | None:
    """What is wrong with the installed ``distribution`` against ``wanted``, or ``None`` (also: unknown)."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None  # not installed: the import says so, with the install line
    pin = _COMMIT.fullmatch(wanted)
    if pin is not None:
        got = _installed_commit(dist)
        if got is None or got.startswith(pin["commit"]) or pin["commit"].startswith(got):
            return None  # an editable or archive install records no commit: nothing to compare
        return f"{distribution} from commit {got[:12]}"
    try:
        from packaging.specifiers import SpecifierSet  # noqa: PLC0415  (every supported host depends on it)
    except ImportError:
        return None
    version = dist.version
    return None if SpecifierSet(wanted).contains(version, prereleases=True) else f"{distribution}=={version}"


def check_versions(adapter: str, versions: Mapping[str, str]) -> None:
    """
    Warn once per adapter when an installed host distribution is outside ``versions``.

    Reads package metadata only and never imports the host. A distribution that is not
    installed, installed without a recorded commit, or checked where ``packaging`` is
    missing passes: only a known mismatch warns (a ``RuntimeWarning``, because adapters
    override host internals that change between releases).
    """
    with _lock:
        if adapter in _checked:
            return
        _checked.add(adapter)
    found = [problem for name, wanted in versions.items() if (problem := _problem(name, wanted))]
    if found:
        wanted = ", ".join(f"{name} {value}" for name, value in versions.items())
        warnings.warn(
            f"{adapter} supports {wanted} (got {', '.join(found)}): it relies on host internals "
            "that change between versions, so run its tests against this one before relying on it",
            RuntimeWarning,
            stacklevel=3,
        )


def import_host(
    module: str, *, adapter: str, needs: str, install: str, versions: Mapping[str, str]
) -> ModuleType:
    """
    Import ``module`` of the host an adapter needs, then :func:`check_versions`.

    ``needs`` names the host for the message (``"TRL"``), ``install`` is the exact
    command that installs it (``install_line("trl")`` for an extra).

    Raises:
        ImportError: the host is not importable; the message names the adapter, the host,
            the import error and the install command, and ``name`` is the missing module.
    """
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        msg = f"{adapter} requires {needs} ({exc}); install it with: {install}"
        raise ImportError(msg, name=exc.name) from None
    check_versions(adapter, versions)
    return imported


def find_host(module: str, *, adapter: str, versions: Mapping[str, str]) -> ModuleType | None:
    """
    :func:`import_host` for an adapter that also runs without its host: ``None`` when absent.

    slime's filter returns a stand-in output, and ROLL's loop a stand-in base class, so
    that settings and tests work where the host is not installed.
    """
    try:
        imported = importlib.import_module(module)
    except ImportError:
        return None
    check_versions(adapter, versions)
    return imported


def publish(package: str) -> None:
    """
    Give the names in ``package.__all__`` their public module, as the root package does.

    Reprs, tracebacks and docs then say ``group_admission.adapters.slime.admission_filter``,
    not the private module; names already public (``group_admission.X``) keep theirs.
    """
    module = sys.modules[package]
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith("group_admission.") and "._" in home:
            # Constants (str, mappings) have no writable __module__; skip them.
            with contextlib.suppress(AttributeError, TypeError):
                value.__module__ = package


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """
    A module ``__getattr__`` for names an adapter package no longer exports: they warn, then resolve.

    ``moved`` maps each old name to where it lives (``"group_admission.ConsecutiveFailedGroupsError"``);
    using the old name warns (``DeprecationWarning``, removed in the deprecation release).
    """

    def __getattr__(name: str) -> Any:  # noqa: N807  (a module's __getattr__)
        if name not in moved:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        module, _, attribute = moved[name].rpartition(".")
        deprecated(f"{package}.{name}", f"import {attribute} from {module}")
        return getattr(importlib.import_module(module), attribute)

    return __getattr__
