"""netbox-chat: ask NetBox questions from the terminal, through a local Ollama model."""
