"""Sessions in either store (SQLite files or PostgreSQL): ids, ledger, locks; never LangChain."""
