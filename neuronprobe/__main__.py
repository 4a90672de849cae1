"""``python -m neuronprobe``: the command line (what the notebook magic runs in a child process)."""

from neuronprobe.cli import main

main()
