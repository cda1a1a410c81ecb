# The tracker's image. Two targets:
#   npu  (default): CANN base image + the suite's environment (torch, torch_npu, triton-ascend as
#                   Liger-Kernel's setup.py pins them for NPU) + the tracker; runs on an Ascend host
#   cpu:            a small image with the bundled example suite, for a demo anywhere
# CANN 9.1.0 as Liger-Kernel pins it for NPU (with torch 2.9.0, torch_npu 2.9.0, triton-ascend
# 3.2.2); a build argument, so a runner with another CANN release builds its own
ARG CANN_IMAGE=ascendai/cann:9.1.0-910b-ubuntu22.04-py3.11

FROM python:3.11-slim AS cpu
WORKDIR /opt/tracker
COPY pyproject.toml README.md alembic.ini ./
COPY tracker ./tracker
COPY migrations ./migrations
COPY templates ./templates
RUN pip install --no-cache-dir '.[postgres]' && useradd --create-home tracker \
    && mkdir -p /var/lib/tracker && chown tracker /var/lib/tracker
ENV TRACKER_DATABASE_URL=sqlite:////var/lib/tracker/tracker.db \
    TRACKER_DATA_DIR=/var/lib/tracker/data
USER tracker
WORKDIR /var/lib/tracker
EXPOSE 8000
CMD ["sh", "-c", "tracker run example; exec tracker serve --host 0.0.0.0 --port 8000"]

FROM ${CANN_IMAGE} AS npu
ARG TORCH_VERSION=2.9.0
ARG TORCH_NPU_VERSION=2.9.0
ARG TRITON_ASCEND_VERSION=3.2.2
# the suite's own interpreter: what `python = "python3"` in tracker.toml finds
RUN pip install --no-cache-dir "torch==${TORCH_VERSION}" "torch-npu==${TORCH_NPU_VERSION}" \
      "triton-ascend==${TRITON_ASCEND_VERSION}" transformers pytest pytest-reportlog pytest-timeout
WORKDIR /opt/tracker
COPY pyproject.toml README.md alembic.ini ./
COPY tracker ./tracker
COPY migrations ./migrations
COPY templates ./templates
RUN pip install --no-cache-dir '.[postgres]'
ENV TRACKER_DATABASE_URL=sqlite:////var/lib/tracker/tracker.db \
    TRACKER_DATA_DIR=/var/lib/tracker/data
WORKDIR /var/lib/tracker
EXPOSE 8000
CMD ["tracker", "--config", "/etc/tracker/tracker.toml", "serve", "--host", "0.0.0.0", "--port", "8000"]
