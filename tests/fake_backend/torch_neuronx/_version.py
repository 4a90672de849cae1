__version__ = "2.9.0.2.15.0+fake"
