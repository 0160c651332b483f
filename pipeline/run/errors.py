"""The ways a run (or `dedup`, or `validate`) stops, as exceptions the CLI
turns into one line and an exit code (pipeline/cli.py). Keep the messages
one line: they are what a user sees."""

from __future__ import annotations


class RunError(Exception):
    """A run that cannot start; the message is one line for a person."""


class UsageError(RunError):
    """A command line tasksieve cannot use (an unknown option): exit 2."""


class RunStopped(Exception):
    """The run stopped mid-way (the model backend went away); what it
    finished is saved and the same command resumes it."""


class RunInterrupted(Exception):
    """Ctrl-C: the message says what was saved and how to resume (exit 130)."""
