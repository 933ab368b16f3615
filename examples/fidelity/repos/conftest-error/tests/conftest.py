import hypothesis  # noqa: F401  (not in the image: the environment is incomplete)
