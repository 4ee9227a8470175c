"""What the app's pages need Streamlit for: the sidebar, cached loaders and error display
(``common``), URL state, table formats, the pages' Streamlit sections, and the launcher
(``serve``). Every Streamlit-free function the pages share with notebooks and tests lives in
:mod:`xlviz.views` (one module per view); nothing there imports this package
(``tests/test_house.py``).
"""
