"""
Every decoded token, by what became of it: the tally a session keeps per step and for its life.

A judged group's tokens reach the session with the group (``generated_tokens``). Tokens
decoded for groups that are never judged in the step that decoded them reach it through
:meth:`AdmissionSession.charge`: groups aborted when the target was met (``"aborted"``),
groups still running that a host with partial rollout carries into the next step
(``"carried"``: their later tokens are charged where they are decoded, so nothing is
counted twice), and pilot members decoded to screen a prompt whose group was then not
completed (``"pilot"``). ``decoded`` is their sum: what the engine decoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from ._exceptions import CheckpointError
from ._validation import check_choice, check_count, describe

__all__ = ["CHARGE_KINDS", "TOKEN_KINDS", "ChargeKind", "TokenTally"]

#: Tokens decoded outside a judged group, charged with :meth:`AdmissionSession.charge`.
ChargeKind = Literal["aborted", "carried", "pilot"]
CHARGE_KINDS: tuple[ChargeKind, ...] = get_args(ChargeKind)
#: Every kind of decoded token: judged groups' (``generated``) and the charged kinds.
TOKEN_KINDS = ("generated", *CHARGE_KINDS)


@attrs.frozen(kw_only=True)
class TokenTally:
    """
    Decoded tokens by kind; ``decoded`` is their sum.

    Attributes:
        generated: Tokens of judged groups (admitted or rejected), counted where decoded.
        aborted: Tokens of groups aborted before they were judged.
        carried: Tokens of unfinished groups carried into a later step.
        pilot: Tokens of pilot members whose group was not completed.

    .. versionadded:: 0.2.0
    """

    generated: int = 0
    aborted: int = 0
    carried: int = 0
    pilot: int = 0

    @property
    def decoded(self) -> int:
        """Every token decoded: the sum of the kinds."""
        return self.generated + self.aborted + self.carried + self.pilot

    def add(self, kind: str, tokens: int) -> TokenTally:
        """This tally with ``tokens`` more of ``kind`` (one of :data:`TOKEN_KINDS`)."""
        kind = check_choice(kind, "kind", TOKEN_KINDS)
        tokens = check_count(tokens, "tokens")
        return attrs.evolve(self, **{kind: getattr(self, kind) + tokens})

    def merge(self, other: TokenTally) -> TokenTally:
        """The sum of two tallies (ranks, or a step into a run)."""
        if not isinstance(other, TokenTally):
            msg = f"'other' must be a TokenTally (got {describe(other)})"
            raise TypeError(msg)
        return TokenTally(**{kind: getattr(self, kind) + getattr(other, kind) for kind in TOKEN_KINDS})

    def to_dict(self) -> dict[str, int]:
        """The tally as plain ints, by kind."""
        return {kind: getattr(self, kind) for kind in TOKEN_KINDS}

    def metrics(self, prefix: str = "") -> dict[str, int]:
        """``decoded_tokens`` and one ``<kind>_tokens`` per charged kind, under ``prefix``."""
        values = {"decoded_tokens": self.decoded} | {
            f"{kind}_tokens": getattr(self, kind) for kind in CHARGE_KINDS
        }
        return {f"{prefix}{name}": value for name, value in values.items()}

    @classmethod
    def from_dict(cls, data: object, name: str = "tokens") -> TokenTally:
        """
        Rebuild from :meth:`to_dict` output.

        Raises:
            CheckpointError: not a mapping of exactly the kinds to non-negative integers.
        """
        if not isinstance(data, Mapping) or set(data) != set(TOKEN_KINDS):
            msg = f"'{name}' must map exactly {list(TOKEN_KINDS)!r} to token counts (got {describe(data)})"
            raise CheckpointError(msg)
        values: dict[str, Any] = dict(data)
        for kind, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"'{name}.{kind}' must be a non-negative integer (got {describe(value)})"
                raise CheckpointError(msg)
        return cls(**values)
