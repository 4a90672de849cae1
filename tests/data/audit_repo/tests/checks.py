"""Tests that skip when CUDA is absent (a file named so that pytest never collects it)."""

import unittest

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")  # EXPECT cuda-test-skip
requires_accel = pytest.mark.skipif(not torch.accelerator.is_available(), reason="no accelerator")  # NEAR-MISS


class T(unittest.TestCase):
    @unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")  # EXPECT cuda-test-skip
    def test_a(self):
        pass

    def test_b(self):
        if not torch.cuda.is_available():  # EXPECT cuda-test-skip
            self.skipTest("no GPU")
