"""What a person or a pipe reads: the console, the turn view, Markdown stream, stream-json."""
