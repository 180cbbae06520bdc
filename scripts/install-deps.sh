#!/usr/bin/env bash
# Installs everything striker needs to build and test on a fresh Debian 12 machine.
# Only Debian packages (apt-get) and PyPI wheels (pip) are used.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
# What striker's own code and build use (zlib and brotli headers come with libcpp-httplib-dev, whose
# header includes them; libssl-dev: libcrypto for the Hub downloads' checksums). chromium +
# chromium-driver run the chat page's browser test (tests/python/test_web_chat.py).
DEBS=(cmake g++ ninja-build pkg-config clang libclang-rt-14-dev
      nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libcli11-dev libspdlog-dev libfmt-dev
      libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libicu-dev
      libcurl4-openssl-dev  # libcurl + libssl (libcrypto): Hugging Face Hub downloads
      chromium chromium-driver  # the chat page's browser test
      libzmq3-dev cppzmq-dev libmsgpack-cxx-dev curl)  # KV events (ZMQ, msgpack); cluster.sh
missing=()
for p in "${DEBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../tests/python/requirements.txt"
