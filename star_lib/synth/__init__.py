"""star_lib.synth."""
