"""`python -m netbox_chat` is the installed `netbox-chat` (the tests spawn it this way)."""

from netbox_chat.cli.main import main

main()
