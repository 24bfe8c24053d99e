"""Chroma, embedded (a directory) or shared (`storage.chroma_url`). Collections are created on
first use with cosine distance and no embedding function: callers always pass embeddings
(Chroma's default function downloads a model, which fails offline)."""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import urlparse

from .config import StorageConfig


def collection_name(name: str, tenant: str | None) -> str:
    """Chroma names: 3-512 of [a-zA-Z0-9._-], alphanumeric at both ends; one namespace per tenant."""
    full = f"ctxw_{name}" + (f"__t_{tenant}" if tenant else "")
    full = re.sub(r"[^a-zA-Z0-9._-]", "-", full)[:500]
    return full.rstrip("._-") or "ctxw_default"


class ChromaStore:
    def __init__(self, config: StorageConfig) -> None:
        self.config = config
        self._client: Any = None
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import chromadb
                    from chromadb.config import Settings as ChromaSettings

                    chroma_settings = ChromaSettings(anonymized_telemetry=False)
                    if self.config.chroma_url:
                        url = urlparse(self.config.chroma_url)
                        self._client = chromadb.HttpClient(
                            host=url.hostname or "127.0.0.1",
                            port=url.port or (443 if url.scheme == "https" else 8000),
                            ssl=url.scheme == "https",
                            settings=chroma_settings,
                        )
                    else:
                        self._client = chromadb.PersistentClient(path=self.config.path, settings=chroma_settings)
        return self._client

    def collection(self, name: str, tenant: str | None = None) -> Any:
        full = collection_name(name, tenant)
        col = self._collections.get(full)
        if col is None:
            col = self.client.get_or_create_collection(full, embedding_function=None, metadata={"hnsw:space": "cosine"})
            self._collections[full] = col
        return col

    def heartbeat(self) -> bool:
        try:
            self.client.heartbeat()
            return True
        except Exception:
            return False
