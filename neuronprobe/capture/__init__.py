"""From a loaded model to the graph of op calls it runs.

``graph`` captures one model (the export walk, the dispatch recorder, the regions
export hides) into an :class:`~neuronprobe.capture.graph.OpGraph`; ``strategies``
searches for a way to load and capture a model that the first way could not.
"""
