"""neuronprobe's version, at the bottom of the layers so that every module can name it
(importing it from the package itself would run through ``neuronprobe/__init__.py``, the top)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
