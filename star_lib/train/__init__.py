"""star_lib.train."""
