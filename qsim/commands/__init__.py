"""qsim's commands: one module per `qsim` command (argument meaning, output folders, summaries)."""
