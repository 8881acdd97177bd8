#!/usr/bin/env bash
# Builds kfed's image (`make image`), with or without access to a container registry.
#
#   deploy/image/build.sh                 build $IMAGE (default kfed:0.1.0); prints the tag
#   deploy/image/build.sh --save PATH     and save it as a tarball `ctr images import` and
#                                         `docker load` take (rewritten only if the image changed)
#
# The base, the first of:
#   1. $PYTHON_IMAGE if set (an image of your registry's, or one already loaded);
#   2. python:3.11-slim-bookworm, the official base, if it is here;
#   3. kfed-base:$DEBIAN_RELEASE if it was built here before (no registry answered then);
#   4. python:3.11-slim-bookworm if `docker pull` gets it (bounded: KFED_PULL_TIMEOUT, 60 s);
#   5. kfed-base:$DEBIAN_RELEASE built from Debian packages: debootstrap (minbase, python3,
#      python3-venv, ca-certificates) from this machine's apt mirror (apt-mirror.sh), the
#      release's updates and security updates, a virtualenv /opt/venv first on PATH (`python`
#      and `pip` behave as in the official image), `docker import`ed. Cached twice: the docker
#      image, and its root filesystem under $KFED_CACHE_DIR/images/ (a new docker daemon
#      re-imports it in seconds). KFED_BASE=debian goes straight to 3/5, =official to 2/4.
# Then `docker build` of the Dockerfile with --build-arg PYTHON_IMAGE=<base>, BuildKit (the
# Dockerfile bind-mounts the builder's wheels into the final stage), host network (an index
# on localhost works too), the package index settings of this machine's pip (PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, from the environment or pip's configuration) and
# extra CA certificates: the PEM files of $KFED_EXTRA_CA_CERTS (a file or a directory;
# default the local CAs of this machine, /usr/local/share/ca-certificates; "none": none).
#
# Environment: IMAGE, PYTHON_IMAGE, KFED_BASE (auto|official|debian), DEBIAN_RELEASE
# (bookworm), DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR ("none": no security updates),
# KFED_EXTRA_CA_CERTS, KFED_PULL_TIMEOUT (60 s), KFED_CACHE_DIR, DOCKER (the docker CLI).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
here="$repo/deploy/image"
image="${IMAGE:-kfed:0.1.0}"
release="${DEBIAN_RELEASE:-bookworm}"
official_base="python:3.11-slim-$release"
base_recipe=1 # bump when the Debian base's recipe changes: cached bases of older recipes are rebuilt
cache_dir="${KFED_CACHE_DIR:-$HOME/.cache/kfed}/images"
save_path=""

say() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --save) [ $# -ge 2 ] || die "--save needs a path"; save_path=$2; shift 2 ;;
    --save=*) save_path=${1#--save=}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (usage: $0 [--save PATH])" ;;
  esac
done

# --- the docker CLI and engine -------------------------------------------------------------

# A docker CLI that builds with BuildKit: one with the buildx plugin, or one from before
# Docker 23 (its BuildKit client is built in, DOCKER_BUILDKIT=1). Debian bookworm's docker.io
# (20.10) is the second kind; a newer CLI without buildx only has the legacy builder, which
# cannot bind-mount another stage.
find_docker_cli() {
  local candidates=() cli seen=" "
  if [ -n "${DOCKER:-}" ]; then candidates+=("$DOCKER"); fi
  candidates+=(docker /usr/bin/docker)
  for cli in "${candidates[@]}"; do
    cli=$(command -v "$cli" 2>/dev/null) || continue
    case "$seen" in *" $cli "*) continue ;; esac
    seen="$seen$cli "
    if "$cli" buildx version >/dev/null 2>&1; then
      printf '%s\n' "$cli"
      return
    fi
    local major
    major=$("$cli" version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1) || true
    if [ -n "$major" ] && [ "$major" -lt 23 ] 2>/dev/null; then
      printf '%s\n' "$cli"
      return
    fi
  done
  printf '%s\n' "${seen# }"
  return 1
}

if ! command -v docker >/dev/null 2>&1 && ! command -v "${DOCKER:-docker}" >/dev/null 2>&1; then
  bash "$here/daemons.sh" install
fi
if ! docker_cli=$(find_docker_cli); then
  # E.g. Docker CE's static CLI in /usr/local/bin without the buildx plugin, and no engine:
  # Debian's docker.io is one apt-get away, and its CLI has BuildKit built in.
  tried=$docker_cli
  if [ -z "${DOCKER:-}" ] && [ ! -x /usr/bin/docker ] && [ "$(id -u)" = 0 ]; then
    say "no docker CLI here builds with BuildKit (tried: $tried): installing Debian's docker.io"
    KFED_NEED_DEBIAN_DOCKER_CLI=1 bash "$here/daemons.sh" install
  fi
  docker_cli=$(find_docker_cli) \
    || die "no docker CLI here builds with BuildKit (tried: $tried). Install the buildx plugin (Debian trixie, Ubuntu: apt-get install docker-buildx; Docker CE: docker-buildx-plugin), or point DOCKER at a docker CLI older than 23 (Debian bookworm's docker.io: DOCKER=/usr/bin/docker)."
fi
docker() { DOCKER_BUILDKIT=1 "$docker_cli" "$@"; }

if ! docker info >/dev/null 2>&1; then
  if [ -n "${DOCKER_HOST:-}" ]; then
    die "the Docker engine at DOCKER_HOST=$DOCKER_HOST does not answer: $(docker info 2>&1 | tail -n 1)"
  fi
  say "no Docker engine answers: starting containerd and dockerd (deploy/image/daemons.sh)"
  bash "$here/daemons.sh" install
  bash "$here/daemons.sh" start
fi

# --- the base --------------------------------------------------------------------------------

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

debian_base_tag="kfed-base:$release"
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
rootfs_tarball="$cache_dir/kfed-base-$release-$arch-r$base_recipe.tar.gz"

import_debian_base() {
  say "importing $rootfs_tarball as $debian_base_tag"
  docker import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "LABEL io.kfed.base-recipe=$base_recipe io.kfed.debian-release=$release" \
    --change 'CMD ["python"]' \
    "$rootfs_tarball" "$debian_base_tag" >/dev/null
}

# debootstrap, the release's security updates, a virtualenv, and what a slim image leaves
# out (documentation, apt's lists); then the root filesystem as a tarball, written atomically.
bootstrap_debian_base() {
  command -v debootstrap >/dev/null 2>&1 || bash "$here/daemons.sh" install
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to build the base (uid $(id -u)); or give a base: PYTHON_IMAGE=<an image with Python 3.11>"
  local mirror security root
  mirror="${DEBIAN_MIRROR:-$(bash "$here/apt-mirror.sh" "$release")}"
  mirror="${mirror:-http://deb.debian.org/debian}"
  security="${DEBIAN_SECURITY_MIRROR:-$(bash "$here/apt-mirror.sh" "$release-security")}"
  mkdir -p "$cache_dir"
  root=$(mktemp -d "$cache_dir/rootfs.XXXXXX")
  # shellcheck disable=SC2064  # expand now: $root is local
  trap "umount '$root/proc' 2>/dev/null || true; rm -rf '$root'" EXIT
  say "debootstrap $release from $mirror (minbase, python3, python3-venv, ca-certificates)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --extra-suites="$release-updates" "$release" "$root" "$mirror" >"$root.log" 2>&1 \
    || die "debootstrap failed; its log ends with:
$(tail -n 15 "$root.log")"
  rm -f "$root.log"
  printf 'deb %s %s %s-updates main\n' "$mirror" "$release" "$release" >"$root/etc/apt/sources.list"
  mount -t proc proc "$root/proc"
  if [ -n "$security" ] && [ "$security" != none ]; then
    say "security updates from $security"
    printf 'deb %s %s-security main\n' "$security" "$release" >>"$root/etc/apt/sources.list"
    chroot "$root" sh -ec 'apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get -y -qq upgrade' >&2
  fi
  say "virtualenv /opt/venv"
  chroot "$root" python3 -m venv /opt/venv
  umount "$root/proc"
  # As Debian's slim images: no documentation, now or from later apt-get installs.
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/lib/apt/lists/* \
    "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  tar --numeric-owner -C "$root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . \
    | gzip -1 >"$rootfs_tarball.tmp"
  mv "$rootfs_tarball.tmp" "$rootfs_tarball"
  rm -rf "$root"
  trap - EXIT
}

debian_base_is_current() {
  local recipe
  recipe=$(docker image inspect --format '{{index .Config.Labels "io.kfed.base-recipe"}}' "$debian_base_tag" 2>/dev/null) || true
  [ "$recipe" = "$base_recipe" ]
}

debian_base() {
  if debian_base_is_current; then
    say "$debian_base_tag: cached (built from Debian packages before)"
  elif [ -s "$rootfs_tarball" ]; then
    import_debian_base
  else
    bootstrap_debian_base
    import_debian_base
  fi
  printf '%s\n' "$debian_base_tag"
}

choose_base() {
  if [ -n "${PYTHON_IMAGE:-}" ]; then
    image_exists "$PYTHON_IMAGE" || docker pull "$PYTHON_IMAGE" >&2 \
      || die "PYTHON_IMAGE=$PYTHON_IMAGE is neither here nor pullable"
    printf '%s\n' "$PYTHON_IMAGE"
    return
  fi
  case "${KFED_BASE:-auto}" in
    debian) debian_base; return ;;
    official | auto) ;;
    *) die "KFED_BASE=${KFED_BASE} is none of auto, official, debian" ;;
  esac
  if image_exists "$official_base"; then
    printf '%s\n' "$official_base"
    return
  fi
  # Built here before, because no registry answered: no new attempt (KFED_BASE=official makes one).
  if [ "${KFED_BASE:-auto}" = auto ] && { debian_base_is_current || [ -s "$rootfs_tarball" ]; }; then
    debian_base
    return
  fi
  local why
  if why=$(timeout "${KFED_PULL_TIMEOUT:-60}" "$docker_cli" pull --quiet "$official_base" 2>&1); then
    printf '%s\n' "$official_base"
    return
  fi
  [ "${KFED_BASE:-auto}" = official ] && die "cannot pull $official_base: $why"
  say "no registry ($official_base: ${why##*$'\n'}): the base comes from Debian packages"
  debian_base
}

base=$(choose_base)
say "base: $base"

# --- build arguments: the package index and extra CAs ---------------------------------------

build_args=(--build-arg "PYTHON_IMAGE=$base")

# pip's configuration files of this machine, read once (pip starts slowly). Its cert and
# find-links name paths of this machine: the certificates go in as EXTRA_CA_CERTS below.
pip_config=""
if command -v python3 >/dev/null 2>&1; then
  pip_config=$(python3 -m pip config list 2>/dev/null) || pip_config=""
fi
pip_setting() {  # ENV_NAME pip-config-key
  local value="${!1:-}"
  if [ -z "$value" ]; then
    value=$(sed -n "s/^\(global\|install\|download\|wheel\)\.$2='\(.*\)'\$/\2/p" <<<"$pip_config" | head -n 1)
  fi
  [ -z "$value" ] || build_args+=(--build-arg "$1=$value")
}
pip_setting PIP_INDEX_URL index-url
pip_setting PIP_EXTRA_INDEX_URL extra-index-url
pip_setting PIP_TRUSTED_HOST trusted-host

extra_ca="${KFED_EXTRA_CA_CERTS:-/usr/local/share/ca-certificates}"
if [ "$extra_ca" != none ] && [ -e "$extra_ca" ]; then
  pem=""
  if [ -d "$extra_ca" ]; then
    for cert in "$extra_ca"/*.crt "$extra_ca"/*.pem; do
      [ -f "$cert" ] && pem+="$(cat "$cert")"$'\n'
    done
  else
    pem=$(cat "$extra_ca")
  fi
  if [ -n "$pem" ]; then
    say "extra CA certificates for the build: $extra_ca ($(grep -c 'BEGIN CERTIFICATE' <<<"$pem"))"
    build_args+=(--build-arg "EXTRA_CA_CERTS=$pem")
  fi
elif [ -n "${KFED_EXTRA_CA_CERTS:-}" ] && [ "$extra_ca" != none ]; then
  die "KFED_EXTRA_CA_CERTS=$extra_ca does not exist"
fi

# --- the image ---------------------------------------------------------------------------

say "docker build -t $image (base $base)"
previous=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || previous=""
docker build --network host "${build_args[@]}" \
  --label "org.opencontainers.image.base.name=$base" \
  --tag "$image" "$repo" >&2 \
  || die "docker build failed (above)"
id=$(docker image inspect --format '{{.Id}}' "$image")
if [ -n "$previous" ] && [ "$previous" != "$id" ]; then
  # The image this tag named before, unless another tag or a container still uses it.
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
say "image: $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%d MB", $1 / 1e6}'))"

if [ -n "$save_path" ]; then
  # docker save's manifest names the image's config by the image ID: same ID, same tarball.
  saved=$(tar -xOf "$save_path" manifest.json 2>/dev/null | grep -o '"Config":"[^"]*' | grep -o '[0-9a-f]\{64\}') || saved=""
  if [ "sha256:$saved" = "$id" ]; then
    say "saved already: $save_path"
  else
    mkdir -p "$(dirname "$save_path")"
    docker save "$image" -o "$save_path.tmp"
    chmod 0644 "$save_path.tmp" # docker save writes 0600; the image holds no secret
    mv "$save_path.tmp" "$save_path"
    say "saved: $save_path (import: ctr -n k8s.io images import $save_path)"
  fi
fi

printf '%s\n' "$image"
