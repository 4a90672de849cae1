"""Numerical parity before the hardware run (issue 25)."""
