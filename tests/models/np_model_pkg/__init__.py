"""A small "model package" that model files import, as real projects split a model across files
(a prompt encoder, a selective scan): ops inside it must be reported at its own lines (issue 33)."""

from np_model_pkg.prompt import PromptEncoder
from np_model_pkg.scan import SelectiveScan

__all__ = ["PromptEncoder", "SelectiveScan"]
