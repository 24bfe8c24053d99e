"""Wire adapters: each API's request and answer shapes to and from the chat-completions form the policies read."""
