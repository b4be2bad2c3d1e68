"""One way to run the CLI per kind: subprocess (process), pty (pty, screen), CliRunner (runner)."""
