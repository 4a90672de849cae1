"""``python -m neuronprobe.cli``: the command line (tests and benchmarks run it this way)."""

from neuronprobe.cli import main

main()
