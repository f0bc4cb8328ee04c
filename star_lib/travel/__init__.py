"""star_lib.travel."""
