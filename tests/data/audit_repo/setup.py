from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ext_modules = [CppExtension("fused_cpu", ["csrc/fused.cpp"])]  # NEAR-MISS: a CPU extension
if CUDA_HOME is not None:  # EXPECT cuda-extension-guard
    ext_modules.append(CUDAExtension("fused_cuda", ["csrc/fused.cu"]))  # EXPECT cuda-extension

setup(name="fixture", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
