"""Choosing the xla-cpu backend: ``--backend xla-cpu``, ``--require-backend xla-cpu`` and ``auto``.

``--backend xla-cpu`` and ``--require-backend xla-cpu`` never fall back: without a
usable environment they stop before any work (BackendUnavailable, exit 2) with
the reason and what to run. ``auto`` takes the real Neuron SDK first, then a
ready xla-cpu environment, then the static table, and says which in the backend's
detail line.
"""

from __future__ import annotations

from neuronprobe.backends import ResolvedBackend
from neuronprobe.backends.xla_env import find_env
from neuronprobe.errors import BackendUnavailable, InputError


def resolve_xla_cpu(name: str, require: str | None) -> ResolvedBackend:
    if require == "xla-cpu" and name not in ("auto", "xla-cpu"):
        raise InputError(f"--backend {name} with --require-backend xla-cpu: use --backend xla-cpu (or auto)")
    if require == "neuron":
        raise InputError("--backend xla-cpu with --require-backend neuron: the xla-cpu backend is not the Neuron SDK")
    env = find_env()
    if not env.usable:
        flag = "--require-backend xla-cpu" if require == "xla-cpu" else "--backend xla-cpu"
        raise BackendUnavailable(f"{flag}: {env.problem}")
    from neuronprobe.backends.xla_cpu import XlaCpuBackend

    backend = XlaCpuBackend(env)
    return ResolvedBackend(info=backend.info(), live=backend)


def auto_xla_cpu(fallback: ResolvedBackend) -> ResolvedBackend:
    """``auto`` without a live Neuron SDK: the xla-cpu environment when it is ready, else ``fallback`` (static)."""
    env = find_env()
    if env.usable:
        from neuronprobe.backends.xla_cpu import XlaCpuBackend

        backend = XlaCpuBackend(env, chosen_by_auto=True)
        return ResolvedBackend(info=backend.info(), live=backend)
    fallback.info.detail += f"; xla-cpu not used: {env.problem}"
    return fallback
