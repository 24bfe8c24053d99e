"""ctxwarden's server: HTTP in, policies, upstream out."""
