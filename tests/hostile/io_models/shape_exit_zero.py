"""os._exit(0) in get_model(): the command must not end with exit 0 (the file runs in a worker)."""
import os


def get_model():
    os._exit(0)  # RAISES


def get_example_inputs():
    return ()
