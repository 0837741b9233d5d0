#!/usr/bin/env bash
# The Docker image's build stage runs this on its virtual environment before the runtime
# stage copies it: what the service never loads goes, so the image carries only what runs.
# Each removal is one the packages do not need at run time (their test suites, C headers,
# static libraries, symbol tables, the installer); docs/docker.md has the figures.
#
#   scripts/slim_venv.sh /opt/venv
#
# Kept on purpose: every *.dist-info (importlib.metadata reads the versions a model's
# lineage records, and entry points), `testing` packages (numpy.testing is imported by
# scipy and scikit-learn), and Python's own standard library.
set -Eeuo pipefail

VENV=${1:?usage: slim_venv.sh VENV}
SITE=$(echo "$VENV"/lib/python3*/site-packages)
[[ -d $SITE ]] || {
    echo "slim_venv.sh: no site-packages under $VENV" >&2
    exit 1
}

size() { du -sm "$SITE" | cut -f1; }
before=$(size)
step() { # step WHAT: print what the step before it saved
    local now
    now=$(size)
    printf 'slim_venv: %-44s -%4d MB (%d MB left)\n' "$1" $((before - now)) "$now"
    before=$now
}

# The installer: the image installs nothing at run time.
if [[ -x $VENV/bin/python ]]; then
    "$VENV/bin/python" -m pip uninstall --quiet --yes pip setuptools
fi
step "pip, setuptools"

# Test suites bundled in packages (pandas/tests, scipy/**/tests, sklearn/**/tests, ...):
# folders named tests, never imported by the package itself; and three named test.
find "$SITE" -depth -type d -name tests -prune -exec rm -rf {} +
rm -rf "$SITE"/onnx/backend/test "$SITE"/tornado/test "$SITE"/joblib/test
step "bundled test suites"

# What only builds extensions against a package: C/C++ headers and sources, Cython
# declarations, static libraries.
rm -rf "$SITE"/pyarrow/include "$SITE"/pyarrow/src "$SITE"/numpy/_core/include
find "$SITE" -type f \( -name '*.a' -o -name '*.pxd' -o -name '*.pyx' -o -name '*.pxi' \) -delete
step "headers, Cython sources, static libraries"

# Symbol tables of shared libraries: dynamic linking uses .dynsym, which strip keeps.
while IFS= read -r -d '' lib; do
    if [[ $(head -c 4 "$lib") == $'\x7fELF' ]]; then strip --strip-unneeded "$lib"; fi
done < <(find "$SITE" -type f -name '*.so*' -print0)
step "symbol tables (strip --strip-unneeded)"

# Bytecode: none shipped for the whole tree (pip was told --no-compile); the build stage
# compiles what a server process imports at start (the Dockerfile), the rest compiles in
# memory the first time a process imports it.
find "$SITE" -depth -type d -name __pycache__ -exec rm -rf {} +
step "bytecode"
