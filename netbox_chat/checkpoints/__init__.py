"""LangGraph's savers for both stores: the sync bridge, strict decoding, copying a session."""
