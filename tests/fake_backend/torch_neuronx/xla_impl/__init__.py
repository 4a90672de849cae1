"""FAKE torch_neuronx.xla_impl (see the package docstring)."""
