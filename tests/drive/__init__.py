"""One way to run the CLI in a test: a subprocess (process), a pty (pty, screen), the Typer runner (runner)."""
