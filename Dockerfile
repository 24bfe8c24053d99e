FROM python:3.11-slim

# MALLOC_ARENA_MAX: glibc gives every worker thread its own arena; two keep RSS close to the live heap.
# OPENBLAS_NUM_THREADS: the matrix products are small; spinning BLAS threads slowed them 4x under load.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 MALLOC_ARENA_MAX=2 OPENBLAS_NUM_THREADS=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY policies ./policies
COPY config ./config
RUN pip install . && useradd --create-home ctxwarden && mkdir /data && chown ctxwarden /data
USER ctxwarden
WORKDIR /data
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8787/healthz'); sys.exit(0)"
# Mount your config at /config/ctxwarden.yaml and add `--config /config/ctxwarden.yaml`.
ENTRYPOINT ["ctxwarden"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8787"]
