#!/usr/bin/env bash
# The Debian packages the tests need beyond Python's: installed when missing (as root), or
# named loudly when they cannot be (the tests that need them then skip, saying why).
#
#   chromium           the real browser of tests/e2e/test_browser.py (driven by Playwright
#                      through its executable: Playwright never downloads a browser here)
#   fonts-dejavu-core  the fonts the report plots name (their SVG text stays text)
#
# Usage: scripts/test_deps.sh          install what is missing (root), else report it
#        scripts/test_deps.sh --check  only report; exit 1 when something is missing
set -euo pipefail

PACKAGES=(chromium fonts-dejavu-core)

missing=()
for package in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed"; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "test_deps: missing Debian packages: ${missing[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "test_deps: WARNING: missing Debian packages: ${missing[*]}; not root, so not" \
        "installing them: the tests that need them will be SKIPPED" \
        "(run: sudo apt-get install ${missing[*]})" >&2
    exit 0
fi
echo "test_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
