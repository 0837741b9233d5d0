#!/usr/bin/env bash
# Installs the Debian packages of scripts/test_packages.txt that are missing (as root,
# with apt-get); without root it only names the missing ones and exits 1 if any are.
set -euo pipefail
list="$(dirname "$0")/test_packages.txt"
missing=()
while read -r package; do
  package="${package%%#*}"
  package="${package// /}"
  [ -z "$package" ] && continue
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done < "$list"
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages (install them as root): ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
