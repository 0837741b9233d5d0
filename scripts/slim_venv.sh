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

# pyarrow's optional components the service never loads, which pyarrow treats as a build
# without them (pyarrow.flight and pyarrow.fs.S3FileSystem raise ImportError; Parquet,
# datasets, compute stay): Arrow Flight RPC, and Arrow's own S3 client (the object store
# is boto3's, ENSEMBLE_OBJECT_STORE).
rm -f "$SITE"/pyarrow/libarrow_flight.so* "$SITE"/pyarrow/libarrow_python_flight.so* \
    "$SITE"/pyarrow/_flight.*.so "$SITE"/pyarrow/libarrow_s3.so* "$SITE"/pyarrow/_s3fs.*.so
step "pyarrow's Flight and S3 libraries"

# botocore's models of AWS services (one folder each, 440 of them): the service's only
# client is S3's (ensembles/registry/stores/s3.py), and botocore itself makes clients of
# STS, SSO, SSO OIDC and sign-in for the standard credential chain (assumed roles, web
# identity, SSO, login). botocore reads a model when a client of its service is made, so
# the others are never read; the endpoint, partition and retry tables stay.
if [[ -d $SITE/botocore/data ]]; then
    find "$SITE/botocore/data" -mindepth 1 -maxdepth 1 -type d \
        ! -name s3 ! -name sts ! -name sso ! -name sso-oidc ! -name signin -exec rm -rf {} +
fi
step "botocore's models but S3's and the credentials'"

# ONNX Runtime's Python tools for making models (transformer graph optimisation,
# quantisation, format conversion), which `import onnxruntime` never loads: the ONNX export
# only runs an InferenceSession (ensembles/export/onnx_format.py).
rm -rf "$SITE"/onnxruntime/transformers "$SITE"/onnxruntime/quantization \
    "$SITE"/onnxruntime/tools
step "ONNX Runtime's model tools"

# Symbol tables of shared libraries: dynamic linking uses .dynsym, which strip keeps. A
# library patchelf edited (auditwheel's grafted *.libs, RPATHs) can come out of strip with
# its loadable segments moved ("ELF load command address/offset not page-aligned"): each
# stripped copy replaces its original only if its segments load exactly as before.
python3 - "$SITE" <<'PY'
import os, shutil, struct, subprocess, sys, tempfile

def segments(path):
    """The PT_LOAD program headers (offset, address, file size, memory size, alignment)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
            return None
        end = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack_from(end + "Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        kind, _, offset, vaddr, _, filesz, memsz, align = struct.unpack_from(
            end + "IIQQQQQQ", table, i * phentsize)
        if kind == 1:
            loads.append((offset, vaddr, filesz, memsz, align))
    return loads

def loads_as_before(before, after):
    return after is not None and len(before) == len(after) and all(
        (a[1], a[3], a[4]) == (b[1], b[3], b[4]) and (a[1] - a[0]) % max(a[4], 4096) == 0
        for a, b in zip(after, before))

stripped = kept = 0
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        if ".so" not in name or os.path.islink(path):
            continue
        before = segments(path)
        if before is None:
            continue
        fd, copy = tempfile.mkstemp(dir=root)
        os.close(fd)
        subprocess.run(["strip", "--strip-unneeded", "-o", copy, path], check=True)
        if loads_as_before(before, segments(copy)):
            shutil.copymode(path, copy)
            os.replace(copy, path)
            stripped += 1
        else:
            os.remove(copy)
            kept += 1
print(f"slim_venv: stripped {stripped} shared libraries, kept {kept} as they were (patchelf)")
PY
step "symbol tables (strip --strip-unneeded)"

# Identical copies of one shared library (wheels carry no symbolic links: pyarrow's
# libarrow_python.so, .so.2600 and .so.2600.1.0; the same libgomp, libgfortran and
# libquadmath grafted into several packages' *.libs): each further copy becomes a relative
# link to the first. Only libraries (lib*.so*), never a Python extension module.
python3 - "$SITE" <<'PY'
import hashlib, os, sys

first, linked = {}, 0
for root, dirs, files in sorted(os.walk(sys.argv[1])):
    dirs.sort()
    for name in sorted(files):
        path = os.path.join(root, name)
        module = ".cpython-" in name or ".abi3." in name  # a Python extension module
        if not name.startswith("lib") or ".so" not in name or module or os.path.islink(path):
            continue
        if os.path.getsize(path) == 0:
            continue
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        original = first.setdefault((os.path.getsize(path), digest), path)
        if original != path:
            os.remove(path)
            os.symlink(os.path.relpath(original, root), path)
            linked += 1
print(f"slim_venv: {linked} copies of shared libraries linked to their first copy")
PY
step "identical copies of shared libraries"

# Bytecode: none shipped for the whole tree (pip was told --no-compile); the build stage
# compiles what a server process imports at start (the Dockerfile), the rest compiles in
# memory the first time a process imports it.
find "$SITE" -depth -type d -name __pycache__ -exec rm -rf {} +
step "bytecode"
