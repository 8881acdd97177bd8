# syntax=docker/dockerfile:1
# One image for both kfed processes:
#   python -m manager       the manager (deploy/manager)
#   python -m worker_shim   the worker shim (deploy/worker)
# and the `kfed` CLI. Build and push: docs/install.md.
#
# Stage 1 builds wheels for kfed and every dependency, pinned by constraints.txt.
# Stage 2 installs only those wheels (no index, no compiler, no cache) into a slim
# Python and runs as a non-root user.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# Dependencies first: this layer is reused while only kfed's code changes.
COPY pyproject.toml constraints.txt README.md ./
COPY manager ./manager
COPY worker_shim ./worker_shim
COPY e2e ./e2e
RUN pip wheel --wheel-dir /wheels --constraint constraints.txt . \
 && cp constraints.txt /wheels/constraints.txt

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The wheels are mounted, not copied: they never become a layer of the final image.
# pip, setuptools and wheel go too once kfed is installed: nothing is built at run time.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels --constraint /wheels/constraints.txt kfed \
 && python -m pip uninstall --yes pip setuptools wheel \
 && python -c "import manager.main, worker_shim.main"
USER 65532:65532
EXPOSE 8080 9443
CMD ["kfed", "--help"]
