"""The only code that drives LangGraph: the graph, one turn, history, context, the runtime."""
