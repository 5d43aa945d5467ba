"""The gym / gymnasium backend: backend selection, space conversion, wrappers."""
