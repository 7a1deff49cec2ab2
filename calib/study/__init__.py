"""Studies: the spec (TOML -> validated model), the stage runner, the run directory (DESIGN.md "Study kind")."""
