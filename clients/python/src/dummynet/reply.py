"""The daemon's answer to one request: what the command printed, its exit
status, and, on a refusal, its kind and where it went wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Optional

from . import errors


@dataclass(frozen=True)
class ErrorAt:
    """Where a refused request went wrong, as daemons that say give it:
    ``index`` is the command's place in a batch (from 0), ``column`` and
    ``found`` point at the culprit in ``command`` for a syntax error."""

    command: str
    index: Optional[int] = None
    column: Optional[int] = None
    found: Optional[str] = None


@dataclass(frozen=True)
class Reply:
    """The daemon's answer: what the command printed and its exit status;
    on a refusal, ``kind`` names the error class and ``error`` where it
    went wrong, where the daemon says."""

    status: int
    stdout: str
    stderr: str
    kind: Optional[str] = None
    error: Optional[ErrorAt] = None

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def warnings(self) -> List[str]:
        """The warnings an applied command came with (``ipfw: warning:``
        lines), without the prefix."""
        prefix = "ipfw: warning: "
        return [line[len(prefix):] for line in self.stderr.splitlines() if line.startswith(prefix)]

    def json(self) -> Any:
        """``stdout`` read as JSON (a ``"json": true`` request's answer)."""
        try:
            return json.loads(self.stdout)
        except ValueError as e:
            raise errors.ProtocolError(f"the daemon's answer is not JSON ({e}): {self.stdout[:200]!r}") from None
