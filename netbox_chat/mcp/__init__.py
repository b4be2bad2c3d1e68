"""`netbox-chat mcp`: the agent's NetBox tools and the answer check, served to any MCP client."""
