"""Client keys: who may use the proxy, as which tenant, on which models, at what rate and budget.

`auth.mode` (config): `keys` (the proxy sends its own provider key and requires one of its client
keys), `passthrough` (the client's own provider key goes upstream), `open` (the proxy's key, no
client key: explicit and loud). Left unset, the proxy chooses the safe one it can (gate.resolve_mode).
"""
