"""Python frontend of par: drives the par-opt compiler from Python.

The model-building API grows on top of this; today the package finds the
par tools and turns their diagnostics into Python exceptions.
"""
from .driver import Diagnostic, ParError, find_tool, par_opt

__all__ = ["Diagnostic", "ParError", "find_tool", "par_opt"]
__version__ = "0.1.0"
