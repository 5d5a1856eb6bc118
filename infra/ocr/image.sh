#!/bin/sh
# The OCR function's container image, built here and anywhere (docs/operations/parsing.md "The OCR
# image"; issue 47). The Makefile's `ocr-image` and `test` call it; so does the rehearsal test
# (tests/integration/test_ocr_image.py) when run on its own.
#
#   infra/ocr/image.sh tag            the image's name: platform-ocr:<hash of its inputs>
#   infra/ocr/image.sh build          base (when missing) + wheels + docker build (when the tag is missing)
#   infra/ocr/image.sh base           the base image (BASE), made from Debian's packages when no registry has it
#   infra/ocr/image.sh daemon-start   start dockerd when none answers (remembers that it did)
#   infra/ocr/image.sh daemon-stop    stop dockerd if daemon-start started it
#   infra/ocr/image.sh tools          apt-get install docker.io debootstrap when missing (as root)
#
# Inputs of the tag: the Dockerfile, this script, the three requirements files, app.py and
# chalicelib/ (no __pycache__), and the BASE name: the image is rebuilt only when one changes.
# The build context is a tar of exactly those files plus a wheelhouse (below): nothing else is sent.
#
# Python packages are downloaded on the host (`pip download`, the host's certificates and
# indexes), pinned, for CPython 3.11 on glibc 2.36 (bookworm), into .local/ocr-wheels; the
# Dockerfile installs them with `pip --no-index`: the build reaches Debian's archive only.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BASE=${OCR_BASE:-debian:bookworm-slim}
NAME=${OCR_IMAGE_NAME:-platform-ocr}
PY=${PY:-.venv/bin/python}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
STATE=.local/docker
REQUIREMENTS="requirements.txt infra/ocr/requirements.txt infra/ocr/requirements-runtime-client.txt"

inputs() {   # the files the image is made of, sorted, one a line
    { echo infra/ocr/Dockerfile; echo infra/ocr/image.sh; echo app.py; for r in $REQUIREMENTS; do echo "$r"; done
      find chalicelib -type f ! -name '*.pyc' ! -path '*/__pycache__/*'; } | LC_ALL=C sort
}

tag() {
    hash=$( { echo "BASE=$BASE"; inputs | while read -r f; do sha256sum "$f"; done; } | sha256sum | cut -c1-16)
    echo "$NAME:$hash"
}

answers() { docker info >/dev/null 2>&1; }

tools() {
    missing=""
    command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
    command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap"
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "the OCR image needs$missing: run as root, or: sudo apt-get install$missing" >&2
        exit 1
    fi
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

daemon_start() {
    answers && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "no Docker daemon answers and only root can start one here: start it (sudo dockerd &), or run as root" >&2
        exit 1
    fi
    command -v dockerd >/dev/null 2>&1 || tools
    mkdir -p "$STATE"
    # its own process group (setsid): a Ctrl-C of make reaches it only through daemon-stop
    setsid dockerd --pidfile "$ROOT/$STATE/dockerd.pid" >"$STATE/dockerd.log" 2>&1 < /dev/null &
    echo $! > "$STATE/started-by-us"
    i=0
    until answers; do
        i=$((i + 1))
        if [ $i -gt 120 ] || ! kill -0 "$(cat "$STATE/started-by-us")" 2>/dev/null; then
            echo "dockerd did not start within 60 s; its log ($STATE/dockerd.log):" >&2
            tail -20 "$STATE/dockerd.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    echo "dockerd started (pid $(cat "$STATE/started-by-us"), log $STATE/dockerd.log); stopped at the end"
}

daemon_stop() {
    [ -f "$STATE/started-by-us" ] || return 0
    pid=$(cat "$STATE/started-by-us")
    rm -f "$STATE/started-by-us"
    kill -TERM "$pid" 2>/dev/null || return 0
    i=0
    while kill -0 "$pid" 2>/dev/null; do   # dockerd stops its containers and its containerd first
        i=$((i + 1))
        [ $i -gt 60 ] && { kill -KILL "$pid" 2>/dev/null; break; }
        sleep 0.5
    done
    echo "dockerd (pid $pid) stopped"
}

base() {
    docker image inspect "$BASE" >/dev/null 2>&1 && return 0
    timeout 120 docker pull -q "$BASE" >/dev/null 2>&1 && return 0   # a registry that answers
    echo "$BASE: no registry answers; made from Debian's packages (debootstrap --variant=minbase bookworm)"
    command -v debootstrap >/dev/null 2>&1 || tools
    dir=$(mktemp -d /tmp/ocr-base.XXXXXX)
    trap 'rm -rf "$dir"' EXIT
    debootstrap --variant=minbase bookworm "$dir" "$MIRROR" >"$dir.log" 2>&1 \
        || { tail -20 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
    rm -f "$dir.log"
    # as Debian's docker images: the updates and security suites, no docs or man pages installed
    cat > "$dir/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
    printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/locale/*\npath-exclude /usr/share/info/*\n' \
        > "$dir/etc/dpkg/dpkg.cfg.d/docker-minimal"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' - "$BASE" >/dev/null
    rm -rf "$dir"
    trap - EXIT
    echo "$BASE imported"
}

wheels() {   # the pinned Python packages for the image: CPython 3.11, manylinux up to glibc 2.36
    dest=.local/ocr-wheels
    stamp="$dest/.inputs"
    want=$(cat $REQUIREMENTS | sha256sum)
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
    rm -rf "$dest"
    mkdir -p "$dest"
    # shellcheck disable=SC2046
    "$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --dest "$dest" \
        --python-version 3.11 --implementation cp --abi cp311 \
        $(v=36; while [ $v -ge 5 ]; do printf -- '--platform manylinux_2_%s_x86_64 ' $v; v=$((v - 1)); done) \
        --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \
        $(for r in $REQUIREMENTS; do printf -- '-r %s ' "$r"; done)
    echo "$want" > "$stamp"
}

build() {
    image=$(tag)
    if docker image inspect "$image" >/dev/null 2>&1; then
        docker tag "$image" "$NAME:latest"
        echo "$image: built already"
        return 0
    fi
    started=$(date +%s)
    base
    wheels
    # the context: exactly the inputs and the wheelhouse (the virtualenvs never go)
    # shellcheck disable=SC2046
    tar -c --exclude=__pycache__ --exclude='*.pyc' $(inputs) -C .local ocr-wheels \
        | docker build --build-arg BASE="$BASE" -f infra/ocr/Dockerfile -t "$image" -
    docker tag "$image" "$NAME:latest"
    # the tags of earlier inputs go (their layers shared with this one stay): one image per checkout
    docker images "$NAME" --format '{{.Tag}}' | grep -vx -e latest -e "${image#*:}" \
        | while read -r old; do docker rmi -f "$NAME:$old" >/dev/null 2>&1 || true; done
    echo "$image built in $(( $(date +%s) - started )) s"
}

case "${1:-}" in
    tag) tag ;;
    build) build ;;
    base) base ;;
    wheels) wheels ;;
    daemon-start) daemon_start ;;
    daemon-stop) daemon_stop ;;
    tools) tools ;;
    *) echo "usage: $0 tag|build|base|wheels|daemon-start|daemon-stop|tools" >&2; exit 2 ;;
esac
