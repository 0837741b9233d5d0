#!/usr/bin/env bash
# The Debian packages the test suite runs for real (`make test` calls this first):
# a PostgreSQL server for the registry suite, Chromium for the pages, tmux for the CLI's
# terminal test. Installs the missing ones when it can (root with apt-get, as in CI);
# otherwise says what is missing and carries on, and the tests that need a package fail
# with a message saying how to get it. Idempotent: nothing to do is a few milliseconds.
set -euo pipefail

# command that proves the package is there | Debian package
needed=(
    "/usr/lib/postgresql/*/bin/initdb|postgresql"
    "chromium|chromium"
    "tmux|tmux"
)

present() {
    local probe=$1
    if [[ $probe == /* ]]; then
        compgen -G "$probe" >/dev/null
    else
        command -v "$probe" >/dev/null 2>&1
    fi
}

missing=()
for entry in "${needed[@]}"; do
    probe=${entry%%|*}
    package=${entry##*|}
    present "$probe" || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test_deps: installing ${missing[*]} (Debian packages the tests use)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends keeps chromium from pulling a desktop; the PostgreSQL
    # package's own cluster is never started: the tests run their own in a temp folder.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "test_deps: missing ${missing[*]}; install them (as root: apt-get install" \
        "${missing[*]}), or the tests that need them fail saying so" >&2
fi
