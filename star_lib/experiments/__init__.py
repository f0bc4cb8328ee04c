"""star_lib.experiments."""
