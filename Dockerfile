# Image of the Dragonet webhook, its Container Monitor and its reaper: ghcr.io/dragonet/dragonet:<appVersion>
#
#   docker build -t ghcr.io/dragonet/dragonet:0.1.0 .
#   docker run --rm -p 8080:8080 ghcr.io/dragonet/dragonet:0.1.0     # then GET :8080/healthz
#
# Runs `dragonet serve` (gunicorn on $DRAGONET_PORT, 8080) as UID 10001 (the chart's monitor
# DaemonSet runs `dragonet-monitor` from the same image, on 8081; its reaper and recorder
# Deployments run `dragonet-reaper` and `dragonet-recorder`); configuration comes from
# DRAGONET_* environment variables (see chart/README.md). The chart runs it with a read-only root filesystem and an in-memory /tmp.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policy/ policy/
COPY webhooks/ webhooks/
COPY cli/ cli/
COPY monitor/ monitor/
COPY reaper/ reaper/
COPY live/ live/
COPY recorder/ recorder/
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    DRAGONET_PORT=8080
COPY --from=build /install /usr/local
RUN groupadd --system --gid 10001 dragonet \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin dragonet
# Numeric, so that Kubernetes can check runAsNonRoot against the image.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["dragonet", "serve"]
