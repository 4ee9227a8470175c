"""xlviz.models: Hugging Face model construction, loading and MONOTRANS surgery.

Importing this package registers the ``xlviz_bert`` (BERT + adapters) and ``xlviz_veco`` (BERT +
VECO cross-attention) model types with the
``AutoModel*`` classes, so exported adapter models load with ``from_pretrained``.
"""

from xlviz.models import adapters as _adapters  # noqa: F401  (registers xlviz_bert)
from xlviz.models import veco as _veco  # noqa: F401  (registers xlviz_veco)
