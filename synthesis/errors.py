"""The one exception hierarchy of the testbed. Every error names the bad value and what would be valid."""

from __future__ import annotations


class ScarsError(Exception):
    """Base class of every error the testbed raises on purpose."""


class ConfigError(ScarsError, ValueError):
    """A configuration value is out of range or of the wrong kind."""


class DSLSyntaxError(ScarsError, ValueError):
    """Rule text that does not parse. Carries the 1-based line and column and what was expected there."""

    def __init__(self, message: str, *, text: str, line: int, column: int, expected: tuple[str, ...] = ()):
        self.text = text
        self.line = line
        self.column = column
        self.expected = expected
        super().__init__(f"line {line}, column {column}: {message}")


class LedgerError(ScarsError):
    """The audit ledger is unusable for the requested operation."""


class LedgerIntegrityError(LedgerError):
    """The ledger failed verification; reads of the control plane fail closed."""


class WorldError(ScarsError, ValueError):
    """Bad input to a world (unknown task type, bad seed, bad command)."""
