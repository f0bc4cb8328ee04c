"""star_lib.qa."""
