"""Loaders for models given by name: ``hf:`` (transformers), ``tv:`` (torchvision), ``timm:``.

Each builds the model and its example inputs offline, from a config or a
constructor alone: no weights are downloaded.
"""
