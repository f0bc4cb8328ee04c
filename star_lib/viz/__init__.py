"""star_lib.viz."""
