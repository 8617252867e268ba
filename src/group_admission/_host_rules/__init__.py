"""
Host rules that must be reproduced exactly, written once for the adapters and the simulator.

Each module mirrors one host's own function, with the host version it was read from. The
adapters apply them to live host objects; the simulator applies them to simulated streams.
Nothing here imports a host or an adapter.
"""

from __future__ import annotations

__all__: list[str] = []
