# reminder-bridge: the proxy and its CLI in a slim, non-root image.
#   docker build -t reminder-bridge .
#   docker run --rm reminder-bridge demo
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system bridge && useradd --system --gid bridge --create-home --home-dir /home/bridge bridge

WORKDIR /app
# pyproject.toml names README.md as the package readme, so the build needs it.
COPY pyproject.toml README.md ./
COPY bridge ./bridge
COPY rules ./rules
# the redis extra: a fleet shares budgets and queues through `--state redis://…` (docs/deploy.md)
RUN pip install --no-cache-dir '.[redis]' && rm -rf build *.egg-info

USER bridge
ENTRYPOINT ["reminder-bridge"]
CMD ["--help"]
