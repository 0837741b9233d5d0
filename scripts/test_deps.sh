#!/usr/bin/env bash
# The system programs the test suite runs for real (never mocked), installed from Debian's
# packages when missing. `make test` runs this first; the test fixtures run it too (as
# root) when they cannot find a program.
#
#   bash scripts/test_deps.sh             # every package below that is missing
#   bash scripts/test_deps.sh postgresql  # only these (names from the table)
#
# As root (CI) it installs what is missing with apt-get; otherwise it only says what is
# missing and exits 0: the tests that need it then fail, saying how to get it.
#
# To add a dependency, add one line to NEEDS: "<debian package>|<shell test, true when present>".
set -uo pipefail

NEEDS=(
  # PostgreSQL's server binaries (initdb, pg_ctl): the registry tests run on a real server.
  "postgresql|compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null"
  # Headless Chromium: the pages (/, /docs, /redoc, reports) are loaded in a real browser.
  "chromium|command -v chromium >/dev/null"
  # tmux: the CLI's progress bar and Ctrl-C are tested in a real terminal.
  "tmux|command -v tmux >/dev/null"
)

wanted=("$@")
missing=()
for need in "${NEEDS[@]}"; do
  package=${need%%|*}
  probe=${need#*|}
  if ((${#wanted[@]})) && [[ ! " ${wanted[*]} " == *" $package "* ]]; then
    continue
  fi
  if ! bash -c "$probe"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "test_deps: missing ${missing[*]} (install as root: apt-get install ${missing[*]});" \
    "the tests that need them will fail" >&2
  exit 0
fi
echo "test_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null &&
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  echo "test_deps: could not install ${missing[*]}; the tests that need them will fail" >&2
exit 0
