#!/usr/bin/env bash
# Installs the Debian packages edgec needs. `demo`: a C toolchain and Python venv support.
# `test`: also the Arm cross compilers, qemu user-mode emulation and OpenSSH (the test suite uses real ones), and
# ccache (the suite compiles the same runtime sources in hundreds of builds).
set -euo pipefail
kind=${1:-test}
pkgs=(gcc make libc6-dev python3-venv python3-dev fonts-dejavu-core)  # fonts: edgec/textlines.py draws with them
if [ "$kind" = test ]; then
  pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
         qemu-user openssh-server openssh-client ccache)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
