"""xlviz from a notebook: the app's figures as plotly figures and HTML, without Streamlit.

Each function draws what a page draws, with the page's own figure functions, so a notebook and
the app never disagree. One module per view holds them beside the Streamlit-free code the
pages call (:mod:`~xlviz.views.attention`, :mod:`~xlviz.views.alignment`,
:mod:`~xlviz.views.embeddings` (the projector), :mod:`~xlviz.views.xquad`,
:mod:`~xlviz.views.salience`, :mod:`~xlviz.views.slices`, :mod:`~xlviz.views.patching`,
:mod:`~xlviz.views.renderings`); this package re-exports them::

    import xlviz.views as xv
    xv.head_view("checkpoints/demo/encoders/monotrans-en", "the cat sees the dog")  # HTML
    xv.model_view("checkpoints/demo/encoders/monotrans-en", "the cat sees the dog")  # plotly
    xv.retrieval("checkpoints/demo", "sov")                                           # plotly
    xv.xquad_comparison("checkpoints/demo", "sov")                                    # tables + cards
    xv.projector("checkpoints/demo", "sov", query="cat")                              # systems in one space

A *model* is a model folder or hub id (its tokenizer beside it, else ``tokenizer=``), or a
``(model, tokenizer)`` pair already loaded. A *run* is a run folder. Nothing under
``xlviz.views`` imports Streamlit or :mod:`xlviz.ui` (``tests/test_house.py``); models are
loaded once per process (:mod:`xlviz.views.cache`: an LRU cache keyed by the folder's files).
"""

from __future__ import annotations

from xlviz.views.alignment import cka, projection, retrieval
from xlviz.views.attention import cross_language_attention, head_view, model_view, neuron_view
from xlviz.views.embeddings import ProjectorView, projector
from xlviz.views.patching import PatchingView, patching
from xlviz.views.renderings import QuestionRenderingsView, RenderingsView, renderings, renderings_of_question
from xlviz.views.salience import salience
from xlviz.views.slices import SliceView, slices
from xlviz.views.text import HTML
from xlviz.views.xquad import XQuADComparison, xquad_comparison

__all__ = ["HTML", "head_view", "model_view", "cross_language_attention", "retrieval", "cka", "projection",
           "xquad_comparison", "XQuADComparison", "neuron_view", "projector", "ProjectorView", "salience",
           "SliceView", "slices", "PatchingView", "patching", "RenderingsView", "renderings", "QuestionRenderingsView",
           "renderings_of_question"]
