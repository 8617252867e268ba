"""The TRL versions the asynchronous adapter is tested against, as data, and its import of TRL."""

from __future__ import annotations

import warnings

from .._kit import host_versions, import_host, install_line

__all__ = ["ADAPTER", "INSTALL_HINT", "SUPPORTED_VERSIONS", "import_async_grpo"]

#: The adapter's name in messages and in the once-per-adapter version check.
ADAPTER = "group_admission.adapters.trl_async"
#: The supported range of TRL: the adapter subclasses ``trl.experimental.async_grpo``'s
#: rollout loop and trainer, an experimental API that changes between minor releases; the
#: tests run against the installed ``trl==1.16.0``.
SUPPORTED_VERSIONS = host_versions({"trl": ">=1.16,<1.17"})
#: The pip line that installs TRL and the HTTP client its rollout worker needs (torch pinned beside it).
INSTALL_HINT = install_line("trl-async")


def import_async_grpo() -> None:
    """
    Import TRL's asynchronous GRPO modules, then check the installed version (a warning outside the range).

    Raises:
        ImportError: TRL (or aiohttp, accelerate, datasets) is missing; the message has the pip line.
    """
    # TRL warns on every import of trl.experimental; choosing this adapter (pinned to the
    # tested range above) is the opt-in that warning asks for.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
        _import_each()


def _import_each() -> None:
    for module, needs in (
        ("trl.experimental.async_grpo.async_rollout_worker", "TRL's asynchronous GRPO trainer"),
        ("trl.experimental.async_grpo.async_grpo_trainer", "TRL's asynchronous GRPO trainer"),
        ("aiohttp", "aiohttp (TRL's rollout worker talks HTTP to vLLM with it)"),
    ):
        import_host(module, adapter=ADAPTER, needs=needs, install=INSTALL_HINT, versions=SUPPORTED_VERSIONS)
