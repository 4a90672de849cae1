"""A package outside the model's folder, found through --path or PYTHONPATH (issue 33.2)."""
