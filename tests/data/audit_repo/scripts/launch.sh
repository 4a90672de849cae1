#!/bin/bash
# CUDA_VISIBLE_DEVICES=0 python train.py   NEAR-MISS: a comment
CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 train.py  # EXPECT cuda-script-setting
NEURON_RT_VISIBLE_CORES=0-1 torchrun --nproc_per_node 2 train.py  # NEAR-MISS: the Neuron setting
docker build --build-arg BASE_IMAGE=nvidia/cuda:12.1.0-devel-ubuntu22.04 -t train .  # EXPECT cuda-base-image
docker build --build-arg CUDA_VERSION=12.1 -t train .  # EXPECT cuda-script-setting
docker run --gpus all train  # EXPECT cuda-script-setting
docker run --device=/dev/neuron0 train  # NEAR-MISS: the Neuron device
pip install torch --index-url https://download.pytorch.org/whl/cu121  # EXPECT cuda-wheel-index
python train.py --device cuda:0  # EXPECT cuda-script-setting
