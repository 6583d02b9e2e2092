"""Axis provenance: where the elements of every axis come from (see analysis.py)."""
from .analysis import Provenance
from .atoms import TP, Atom, label_of

__all__ = ["TP", "Atom", "Provenance", "label_of"]
