"""Pulsar's leader loop: shedding cycles, destination selection, lookups with preallocation (spec §4)."""

from __future__ import annotations

from shedlab.manager.loop import Assignment, LoadManager, ManagerDecision, PreallocatedBundle

__all__ = ["Assignment", "LoadManager", "ManagerDecision", "PreallocatedBundle"]
