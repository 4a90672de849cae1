"""The nightly job: analyse a list of models, compare each with the last night and fail on regressions.

``run`` owns the config and the night, ``shards`` splits a night across runners and merges
their manifests, ``cache`` reuses a model's result when nothing it read has changed.
"""
