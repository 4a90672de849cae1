"""The report's JSON schema, one module per section of the report (see ``report.py`` for the root).

Plain dataclasses with concrete type hints (``int``, ``float``, ``str``, ``bool``, ``list[X]``,
``dict[str, X]``, ``X | None`` and nested dataclasses), JSON-native values only (no numpy scalars,
no tensors), and defaults on every field added after schema 1 so that older reports still load.
``typed.py`` reads them back strictly. These modules import nothing of the renderers: the renderers
import the sections they draw from here, and ``report/model.py`` (the notebook display) sits above both.
"""
