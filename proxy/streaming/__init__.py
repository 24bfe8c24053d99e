"""Streaming: the SSE codec and the relay that passes, gates and extends streamed answers."""
