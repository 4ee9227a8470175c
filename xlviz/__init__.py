"""xlviz: a lab bench for cross-lingual transfer of transformer language models.

The package is layered so data flows one way:
``xlviz.data -> xlviz.models -> xlviz.training -> xlviz.evaluation / xlviz.analysis``,
with ``xlviz.transfer`` orchestrating whole runs and ``xlviz.cli`` exposing every job.
"""

__version__ = "0.1.0"
