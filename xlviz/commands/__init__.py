"""One module per ``xlviz`` sub-command; each defines ``register(subparsers)``."""
