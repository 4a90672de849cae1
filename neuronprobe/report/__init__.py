"""The report model and its renderers (console, JSON, HTML, notebook frames)."""
