"""One analysis request for every door: the command line, the Python API, the notebook and the nightly.

``model`` is the request (a frozen dataclass, one field per option), ``check`` its one validation,
``run`` what runs it: the analysis and every section and gate the request asks for.
"""

from __future__ import annotations

from neuronprobe.request.check import build_request, check_request
from neuronprobe.request.model import AnalyzeRequest
from neuronprobe.request.run import Outcome, execute, plan_request, run_request

__all__ = ["AnalyzeRequest", "Outcome", "build_request", "check_request", "execute", "plan_request", "run_request"]
