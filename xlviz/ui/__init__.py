"""Streamlit helpers shared by the app's pages (sidebar, cached loaders, error display, views).

Modules without Streamlit imports (``choices``, ``qa``, ``runs_view``, ``attention_view``,
``highlight``) hold the logic and are tested directly; ``common`` and ``sidebar`` draw.
"""
