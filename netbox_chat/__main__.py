"""`python -m netbox_chat` runs the CLI (the tests spawn it this way)."""

from netbox_chat.cli import main

main()
