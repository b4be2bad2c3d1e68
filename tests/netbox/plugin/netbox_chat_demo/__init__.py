"""A minimal NetBox plugin for netbox-chat's live tier: one object type of its own.

Real NetBox instances run plugins, whose object types are not in the tools' shipped
filter table; the tools must learn them from the server's own /api/schema/. This
plugin gives the live NetBox one such type, ``netbox_chat_demo.widget``, served at
/api/plugins/chat-demo/widgets/ (scripts/netbox_up.sh installs it, the seed adds
widgets). Test-only: it has an API and nothing else.
"""

from netbox.plugins import PluginConfig


class ChatDemoConfig(PluginConfig):
    name = "netbox_chat_demo"
    verbose_name = "netbox-chat demo"
    description = "One plugin object type for netbox-chat's live tests"
    version = "0.1"
    base_url = "chat-demo"
    min_version = "4.7.0"


config = ChatDemoConfig
