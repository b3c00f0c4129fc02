# reminder-bridge: the proxy and its CLI in a slim, non-root image.
#   docker build -t reminder-bridge .
#   docker run --rm reminder-bridge demo
# Health checks of the admin port: python -m bridge.probe http://127.0.0.1:9464/readyz (sends the token).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# a fixed, numeric uid/gid: Kubernetes can only check `runAsNonRoot` against a numeric USER
RUN groupadd --system --gid 10001 bridge \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/bridge bridge

WORKDIR /app
# pyproject.toml names README.md as the package readme, so the build needs it.
COPY pyproject.toml README.md ./
COPY bridge ./bridge
COPY rules ./rules
# the redis extra: a fleet shares budgets and queues through `--state redis://…` (docs/deploy.md)
RUN pip install --no-cache-dir '.[redis]' && rm -rf build *.egg-info

USER 10001:10001
ENTRYPOINT ["reminder-bridge"]
CMD ["--help"]
