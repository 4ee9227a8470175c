"""xlviz.models: Hugging Face model construction, loading and MONOTRANS surgery.

xlviz defines two model types, ``xlviz_bert`` (BERT + adapters) and ``xlviz_veco`` (BERT + VECO
cross-attention); each registers itself with the ``AutoModel*`` classes when its module is
imported, and :func:`register_model_types` imports both, so exported adapter and VECO models
load with ``from_pretrained`` (:mod:`xlviz.models.loading` calls it before an Auto class reads
a folder). Why not on importing this package: the pages import the model reference
(:mod:`xlviz.models.reference`) to name models, and must not import torch for that.
"""


def register_model_types() -> None:
    """Register ``xlviz_bert`` and ``xlviz_veco`` with the ``AutoModel*`` classes (idempotent)."""
    from xlviz.models import adapters, veco  # noqa: F401  (each registers its model type on import)
