# One image for both kfed processes:
#   python -m manager       the manager (deploy/manager)
#   python -m worker_shim   the worker shim (deploy/worker)
# and the `kfed` CLI. Build: `make image` (deploy/image/build.sh) or `docker build`;
# docs/install.md, "1. The image".
#
# Stage 1 builds wheels for kfed and every dependency, pinned by constraints.txt.
# Stage 2 installs only those wheels (no index, no compiler, no cache) into a slim
# Python and runs as a non-root user.
#
# Needs BuildKit (stage 2 bind-mounts stage 1's wheels) but no registry beyond the base:
# there is no `# syntax=` line, so the Dockerfile frontend built into the engine parses this
# file and no frontend image is pulled.

# Any image with Python 3.11, pip, `update-ca-certificates` and the official image's layout
# of PATH (`python`, `pip`): the official slim image, or kfed-base:<release>, which
# deploy/image/build.sh builds from Debian packages when no registry is reachable.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
# PEM certificates the build must trust besides the base's, e.g. the CA of a proxy that
# inspects TLS between the build and the package index:
#   --build-arg EXTRA_CA_CERTS="$(cat corporate-ca.pem)"
# They reach only this stage (pip's downloads): the final image trusts what its base trusts.
ARG EXTRA_CA_CERTS=""
# The package index when it is not PyPI (a mirror, e.g. on an air-gapped network).
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN if [ -n "$EXTRA_CA_CERTS" ]; then \
      printf '%s\n' "$EXTRA_CA_CERTS" >/usr/local/share/ca-certificates/kfed-build-extra.crt \
      && update-ca-certificates >/dev/null; \
    fi
WORKDIR /src
# Dependencies first: this layer (the only one that needs the index) is reused while only
# kfed's code changes. The build backend comes too: kfed's wheel is then built offline.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" >requirements.txt \
 && python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')" >build-requirements.txt \
 && pip download --dest /wheels --only-binary=:all: --constraint constraints.txt \
        --requirement requirements.txt --requirement build-requirements.txt \
        ${EXTRA_CA_CERTS:+--cert /etc/ssl/certs/ca-certificates.crt}
COPY README.md ./
COPY manager ./manager
COPY worker_shim ./worker_shim
COPY e2e ./e2e
# kfed's own wheel only (its dependencies are in /wheels already), offline.
RUN pip wheel --no-deps --no-index --find-links=/wheels --wheel-dir /wheels --constraint constraints.txt . \
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
