"""star_lib.agent."""
