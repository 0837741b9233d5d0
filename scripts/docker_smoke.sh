#!/usr/bin/env bash
# `make docker-smoke`: prove that the Dockerfile builds an image that serves, on a machine
# with no Docker engine and no image registry, using podman (rootful) instead.
#
#   1. install podman, runc, debootstrap, slirp4netns from Debian's packages if missing;
#   2. debootstrap --variant=minbase bookworm into a temporary folder, trimmed like the
#      official slim image, and `podman import` it as debian:bookworm-slim;
#   3. podman build the Dockerfile (pip's CA bundle, $PIP_CERT, as the optional build secret);
#   4. run the image with its port published on 127.0.0.1 only and API keys configured,
#      wait until its HEALTHCHECK and /healthz pass;
#   5. upload a small CSV table, train a model (?wait=true), predict with it; then one model
#      of each boosting library (xgboost, lightgbm, catboost: the image's boosting extra),
#      each trained at the top level on the table's 'neg'/'pos' classes and predicting,
#      with the engine that serves it; a random forest's explained prediction (TreeSHAP
#      from shap's compiled extension, without numba) and its training's explanations;
#   6. start a long training job, podman stop (SIGTERM) and require exit code 0; start the
#      container again on the same volume: the job is failed, version 1 still predicts;
#      stop it again (exit 0);
#   7. run it again on the same volume with ENSEMBLE_WORKERS=2: both server processes
#      answer (their pids, from the JSON request lines), SIGTERM stops both (exit 0);
#      clean everything up.
#
# Needs root and a few minutes; not part of `make test`. Every wait is bounded, and all
# HTTP traffic goes to 127.0.0.1. Knobs (environment):
#   SMOKE_PORT           host port on 127.0.0.1 (default: a free one)
#   SMOKE_DEBIAN_MIRROR  Debian mirror for debootstrap and apt in the image (default: apt's)
#   SMOKE_PIP_CONF       a pip.conf passed to the build as the `pipconf` secret
#   SMOKE_KEEP=1         keep the temporary folder, image and storage for a look afterwards
#   SMOKE_WORKDIR        where the temporary folder goes (default /var/tmp; not a tmpfs)
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT
readonly IMAGE=localhost/ensemble-service:smoke
readonly BASE_IMAGE=debian:bookworm-slim
readonly SUITE=bookworm
readonly MODEL=smoke-clf
readonly DEBOOTSTRAP_TIMEOUT=900 BUILD_TIMEOUT=1800 HEALTH_TIMEOUT=120 TRAIN_TIMEOUT=300
readonly STOP_GRACE=40 # > the image's ENSEMBLE_SHUTDOWN_TIMEOUT_S (30)

T_START=$(date +%s%N)
STEP_LOG=()
EXTRA_RUN_ARGS=()

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() {
    log "FAIL: $*" >&2
    exit 1
}
elapsed() { # nanosecond timestamp -> seconds since, one decimal
    local ms=$((($(date +%s%N) - $1) / 1000000))
    printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}
step() { # step NAME FUNCTION...: run it, time it, remember the time
    local name=$1 t0
    shift
    t0=$(date +%s%N)
    log "== $name"
    "$@"
    local dt
    dt=$(elapsed "$t0")
    STEP_LOG+=("$(printf '%-34s %7ss' "$name" "$dt")")
    log "   done in ${dt}s"
}

[[ $(id -u) -eq 0 ]] || die "run as root (rootful podman, debootstrap)"

WORK=$(mktemp -d "${SMOKE_WORKDIR:-/var/tmp}/ensemble-docker-smoke.XXXXXX")
readonly WORK
CTR=ensemble-smoke-$$
VOLUME=ensemble-smoke-data-$$
# Podman's run-time state in a short path under /run: slirp4netns puts its API socket
# there, and a socket path may have at most 107 bytes.
RUNDIR=$(mktemp -d /run/ensemble-smoke.XXXXXX)
readonly RUNDIR
# A private podman store inside $WORK: the imported debian:bookworm-slim cannot clobber an
# image of that name that someone else keeps in the machine's default store, and cleaning
# up is removing two folders.
PODMAN=(podman --root "$WORK/storage" --runroot "$RUNDIR/root" --tmpdir "$RUNDIR/tmp")

# Podman 4.3 arms a systemd timer for every container with a HEALTHCHECK and complains on
# each start/stop when there is no systemd (as in this sandbox). The health check itself is
# run by this script (`podman healthcheck run`); drop only those complaints.
pm() {
    "${PODMAN[@]}" "$@" 2> >(grep -v 'unable to get systemd connection' >&2)
}

cleanup() {
    local rc=$?
    set +e
    if [[ ${SMOKE_KEEP:-0} == 1 ]]; then
        log "SMOKE_KEEP=1: kept $WORK and $RUNDIR: ${PODMAN[*]}"
        exit "$rc"
    fi
    local t0
    t0=$(date +%s%N)
    log "== cleanup"
    pm rm --force --time 0 "$CTR" >/dev/null 2>&1
    pm volume rm --force "$VOLUME" >/dev/null 2>&1
    pm rmi --force "$IMAGE" "$BASE_IMAGE" "docker.io/library/$BASE_IMAGE" >/dev/null 2>&1
    pm image prune --all --force >/dev/null 2>&1
    # Anything the store still has mounted under $WORK, deepest first, then the folder.
    findmnt -rn -o TARGET | grep -F -e "$WORK" -e "$RUNDIR" | sort -r |
        xargs -r -n1 umount -l 2>/dev/null
    rm -rf "$WORK" "$RUNDIR"
    log "   done in $(elapsed "$t0")s"
    log "total $(elapsed "$T_START")s, exit $rc"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. tools ----------------------------------------------------------------------------
install_tools() {
    local missing=() tool pkg
    for tool in podman:podman runc:runc debootstrap:debootstrap slirp4netns:slirp4netns \
        curl:curl findmnt:util-linux; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
    done
    # Debian's podman 4.3 recommends these; uidmap and fuse-overlayfs for other setups.
    for pkg in uidmap fuse-overlayfs containernetworking-plugins; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        log "installing from Debian: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >"$WORK/apt.log" || {
            tail -20 "$WORK/apt.log"
            die "apt-get install failed"
        }
    fi
    command -v python3 >/dev/null || die "python3 is needed for JSON on the host side"
    log "   $(podman --version), $(runc --version | head -1), debootstrap $(dpkg-query -W -f '${Version}' debootstrap)"
}

# --- 2. base image -----------------------------------------------------------------------
# The Debian mirror apt uses here (deb822 .sources or one-line sources.list), for SUITE and
# SUITE-security; SMOKE_DEBIAN_MIRROR overrides the first.
apt_mirrors() {
    python3 - "$SUITE" <<'PY'
import glob, re, sys
suite = sys.argv[1]
found = {}
def add(kind, uris, suites):
    for s in suites:
        key = "main" if s == suite else "security" if s == f"{suite}-security" else None
        if key and uris and key not in found:
            found[key] = uris[0]
for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
    for para in re.split(r"\n\s*\n", open(path).read()):
        f = {}
        for line in para.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            k, v = line.split(":", 1)
            f[k.strip().lower()] = v.split()
        if "deb" in f.get("types", []) and f.get("enabled", ["yes"])[0] != "no":
            add("deb", f.get("uris", []), f.get("suites", []))
for path in ["/etc/apt/sources.list", *glob.glob("/etc/apt/sources.list.d/*.list")]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        parts = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(parts) >= 3 and parts[0] == "deb":
            add("deb", [parts[1]], [parts[2]])
print(found.get("main", "http://deb.debian.org/debian"))
print(found.get("security", ""))
PY
}

make_base_image() {
    local mirrors mirror security rootfs="$WORK/rootfs"
    mapfile -t mirrors < <(apt_mirrors)
    mirror=${SMOKE_DEBIAN_MIRROR:-${mirrors[0]}}
    security=${mirrors[1]:-${mirror%/debian}/debian-security}
    log "   mirror $mirror (security: $security)"
    timeout "$DEBOOTSTRAP_TIMEOUT" debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" \
        >"$WORK/debootstrap.log" 2>&1 || {
        tail -20 "$WORK/debootstrap.log"
        die "debootstrap failed (log above)"
    }

    # Trim it the way debuerreotype makes the official -slim image: no docs, man pages,
    # locales; apt keeps no caches or translations; host files debootstrap copied go.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
    echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
    echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
    echo 'Apt::AutoRemove::SuggestsImportant "false";' \
        >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
    # Sources like the official image's: the suite, its updates and security.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    (
        cd "$rootfs"
        find usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
        find usr/share/doc -mindepth 1 -type d -empty -delete
        rm -rf usr/share/groff/* usr/share/info/* usr/share/linda/* usr/share/man/* \
            var/cache/apt/* var/lib/apt/lists/* var/log/*.log var/log/apt/* \
            etc/resolv.conf etc/hostname
        find usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    )
    log "   root file system: $(du -sh "$rootfs" | cut -f1)"

    tar --numeric-owner -C "$rootfs" -c . | pm import --quiet \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
    # `FROM debian:bookworm-slim` resolves to docker.io/library/...: name it that too, so
    # the build (with --pull=never) finds it locally and never asks a registry.
    pm tag "localhost/$BASE_IMAGE" "docker.io/library/$BASE_IMAGE"
    rm -rf "$rootfs"
}

# --- 3. build ----------------------------------------------------------------------------
# pip's configuration, reduced to http(s) indexes (file:// ones do not exist in the build).
pip_index_conf() {
    local index extra
    index=$(pip config get global.index-url 2>/dev/null || true)
    index=${PIP_INDEX_URL:-$index}
    extra=$(pip config get global.extra-index-url 2>/dev/null || true)
    extra=$(tr -s '[:blank:]' '\n' <<<"${PIP_EXTRA_INDEX_URL:-$extra}" | grep -E '^https?://' | tr '\n' ' ' || true)
    [[ $index =~ ^https?:// ]] || index=""
    [[ -n $index || -n $extra ]] || return 0
    {
        echo "[global]"
        [[ -z $index ]] || echo "index-url = $index"
        [[ -z $extra ]] || echo "extra-index-url = $extra"
    } >"$WORK/pip.conf"
    echo "$WORK/pip.conf"
}

build_image() {
    local args=(--pull=never --format docker --network host --tag "$IMAGE")
    # --format docker: the OCI image format has no HEALTHCHECK; podman would drop it.
    # --network host: RUN steps reach PyPI and the Debian mirror as this machine does,
    # without a CNI bridge and NAT rules on the host.
    if [[ -n ${PIP_CERT:-} && -s $PIP_CERT ]]; then
        args+=(--secret "id=pipcert,src=$PIP_CERT")
        log "   pip CA bundle: $PIP_CERT (build secret pipcert)"
    fi
    local conf=${SMOKE_PIP_CONF:-$(pip_index_conf)}
    if [[ -n $conf ]]; then
        args+=(--secret "id=pipconf,src=$conf")
        log "   pip configuration: $conf (build secret pipconf)"
    fi
    timeout "$BUILD_TIMEOUT" "${PODMAN[@]}" build "${args[@]}" "$ROOT" >"$WORK/build.log" 2>&1 || {
        tail -40 "$WORK/build.log"
        die "podman build failed (log above)"
    }
    grep -E '^\[[0-9]/[0-9]\] STEP' "$WORK/build.log" | sed -E 's/^(.{120}).*/\1…/; s/^/   /'
    grep -E '^Successfully installed' "$WORK/build.log" | fold -s -w 100 | sed 's/^/   /'
}

inspect_image() {
    local size
    size=$(pm image inspect --format '{{.Size}}' "$IMAGE")
    IMAGE_SIZE="$((size / 1000000)) MB ($size bytes)"
    log "   image size: $IMAGE_SIZE; base image $(($(pm image inspect --format '{{.Size}}' "$BASE_IMAGE") / 1000000)) MB"
    log "   largest layers:"
    pm history --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" | sort -h -r | head -4 |
        cut -c1-140 | sed 's/^/     /'
    # The contract of the image, as its configuration says it.
    pm image inspect --format json "$IMAGE" | python3 -c '
import json, sys
img = json.load(sys.stdin)[0]
cfg = img["Config"]
env = dict(e.split("=", 1) for e in cfg.get("Env", []))
health = img.get("Healthcheck") or cfg.get("Healthcheck") or {}
checks = {
    "user is non-root (10001)": cfg.get("User") == "10001:10001",
    "EXPOSE 8000": "8000/tcp" in cfg.get("ExposedPorts", {}),
    "VOLUME /data": "/data" in cfg.get("Volumes", {}),
    "ENSEMBLE_DATA_DIR=/data": env.get("ENSEMBLE_DATA_DIR") == "/data",
    "HEALTHCHECK on /healthz": "/healthz" in " ".join(health.get("Test", [])),
    "python -m app (uvicorn with the graceful-shutdown setting) on 0.0.0.0:8000":
        cfg.get("Cmd") == ["python", "-m", "app"]
        and env.get("HOST") == "0.0.0.0" and env.get("PORT") == "8000",
}
for name, ok in checks.items():
    print("     " + ("ok  " if ok else "FAIL"), name)
sys.exit(0 if all(checks.values()) else 1)
' || die "image configuration"
}

# --- 4. run ------------------------------------------------------------------------------
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_container() {
    PORT=${SMOKE_PORT:-$(free_port)}
    BASE_URL="http://127.0.0.1:$PORT"
    TRAIN_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
    READ_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
    local run_args=(
        --detach --name "$CTR"
        # Published on the host's 127.0.0.1 only, through slirp4netns' own port forwarder:
        # no CNI bridge, no iptables rules, nothing on a private-range address of the host.
        --network slirp4netns:port_handler=slirp4netns --publish "127.0.0.1:$PORT:8000"
        # This sandbox lacks CAP_SYS_RESOURCE: podman's default rlimits (nofile 1048576,
        # nproc 4194304) are above its hard limits and runc could not set them.
        --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096
        # No systemd timer here; the script runs the image's HEALTHCHECK itself.
        --health-interval disable
        --volume "$VOLUME:/data"
        # Configuration only through ENSEMBLE_* variables.
        --env "ENSEMBLE_API_KEYS=$TRAIN_KEY:train,$READ_KEY:read"
        --env ENSEMBLE_WAIT_TIMEOUT_S=240
        "${EXTRA_RUN_ARGS[@]}"
    )
    pm run "${run_args[@]}" "$IMAGE" >/dev/null
    log "   container $CTR on 127.0.0.1:$PORT, volume $VOLUME at /data"
}

container_running() {
    [[ $(pm inspect --format '{{.State.Status}}' "$CTR" 2>/dev/null) == running ]]
}

wait_healthy() {
    local deadline=$((SECONDS + HEALTH_TIMEOUT)) t0
    t0=$(date +%s%N)
    until pm healthcheck run "$CTR" >/dev/null 2>&1 &&
        [[ $(curl -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time 5 "$BASE_URL/healthz") == 200 ]]; do
        if ! container_running; then
            pm logs "$CTR" 2>&1 | tail -30
            die "the container stopped before it was healthy (logs above)"
        fi
        ((SECONDS < deadline)) || {
            pm logs "$CTR" 2>&1 | tail -30
            die "not healthy within ${HEALTH_TIMEOUT}s"
        }
        sleep 1
    done
    log "   healthy after $(elapsed "$t0")s: HEALTHCHECK $(pm inspect --format '{{.State.Health.Status}}' "$CTR"), /healthz 200"
}

# --- 5. the API --------------------------------------------------------------------------
# api EXPECTED_STATUS METHOD PATH [curl args...]: the body lands in $WORK/body.json.
api() {
    local expected=$1 method=$2 path=$3 code
    shift 3
    code=$(curl -sS --noproxy '*' --max-time "${API_TIMEOUT:-30}" -o "$WORK/body.json" \
        -w '%{http_code}' -X "$method" "$@" "$BASE_URL$path") || code=000
    if [[ $code != "$expected" ]]; then
        {
            log "   $method $path -> $code, expected $expected:"
            head -c 2000 "$WORK/body.json" 2>/dev/null
            echo
        } >&2
        die "$method $path"
    fi
    log "   $method $path -> $code"
}
json() { # json EXPRESSION: evaluate it with `b` = the last response body
    python3 -c "import json, sys; b = json.load(open(sys.argv[1])); print($1)" "$WORK/body.json"
}

check_access_and_readiness() {
    api 200 GET /readyz
    log "     $(json 'b')"
    api 401 GET /v1/kinds
    api 200 GET /v1/kinds -H "Authorization: Bearer $READ_KEY"
    api 403 POST /v1/datasets -H "Authorization: Bearer $READ_KEY" \
        -H 'Content-Type: application/json' -d '{"columns": ["a"], "rows": [[1]]}'
}

upload_table() {
    python3 - >"$WORK/smoke.csv" <<'PY'
import random
rng = random.Random(0)
print("x1,x2,color,label")
for _ in range(80):
    a, b = rng.gauss(0, 1), rng.gauss(0, 1)
    color = rng.choice(["red", "green", "blue"])
    print(f"{a:.4f},{b:.4f},{color},{'pos' if a + 0.5 * b > 0 else 'neg'}")
PY
    api 201 POST /v1/datasets -H "Authorization: Bearer $TRAIN_KEY" \
        -F "file=@$WORK/smoke.csv;type=text/csv" -F name=smoke
    DATASET_ID=$(json 'b["id"]')
    log "     $DATASET_ID: $(json 'str(b["n_rows"]) + " rows; " + ", ".join(c["name"] + ":" + c["dtype"] for c in b["columns"])')"
}

train_model() {
    local body
    body=$(
        cat <<EOF
{"dataset_id": "$DATASET_ID", "target": "label", "random_state": 0,
 "evaluation": {"holdout_fraction": 0.25},
 "ensemble": {"kind": "voting", "params": {"voting": "soft"}, "estimators": [
   {"name": "lr", "kind": "logistic_regression"},
   {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 20}},
   {"name": "nb", "kind": "gaussian_nb"}]}}
EOF
    )
    API_TIMEOUT=$((TRAIN_TIMEOUT + 30)) api 201 POST "/v1/models/$MODEL/versions?wait=true" \
        -H "Authorization: Bearer $TRAIN_KEY" -H 'Content-Type: application/json' -d "$body"
    log "     version $(json 'b["version"]') ($(json 'b["kind"]'), $(json 'b["task"]')), hold-out accuracy $(json 'b["metrics"]["holdout"]["accuracy"]'), trained in $(json 'b["training"]["duration_s"]')s"
}

predict() {
    api 200 POST "/v1/models/$MODEL/versions/latest/predict" \
        -H "Authorization: Bearer $READ_KEY" -H 'Content-Type: application/json' \
        -d '{"instances": [{"x1": 1.5, "x2": 0.5, "color": "red"},
                           {"x1": -1.2, "x2": -0.8, "color": "blue"},
                           {"x1": 0.9, "x2": 1.1, "color": "green"}],
             "options": {"return_proba": true}}'
    log "     predictions $(json 'b["predictions"]'), classes $(json 'b["classes"]')"
    [[ $(json 'b["predictions"]') == "['pos', 'neg', 'pos']" ]] || die "unexpected predictions"
    local uid
    uid=$(pm exec "$CTR" id -u)
    [[ $uid == 10001 ]] || die "the service runs as uid $uid, not 10001"
    log "     serving as uid $uid; /data holds: $(pm exec "$CTR" ls /data | tr '\n' ' ')"
}

train_and_serve_libraries() { # one model per boosting library, trained and predicting
    local kind ensemble
    # Each at the top level on this table's 'neg'/'pos' classes (XGBoost's own classifier
    # takes only 0..k-1: the kind encodes them, docs/kinds.md).
    for kind in xgboost lightgbm catboost; do
        case $kind in
        xgboost) ensemble='{"kind": "xgboost", "params": {"n_estimators": 30, "max_depth": 3}}' ;;
        lightgbm) ensemble='{"kind": "lightgbm", "params": {"n_estimators": 30, "min_child_samples": 5}}' ;;
        catboost) ensemble='{"kind": "catboost", "params": {"iterations": 30, "depth": 4}}' ;;
        esac
        API_TIMEOUT=$((TRAIN_TIMEOUT + 30)) api 201 POST "/v1/models/$MODEL-$kind/versions?wait=true" \
            -H "Authorization: Bearer $TRAIN_KEY" -H 'Content-Type: application/json' \
            -d '{"dataset_id": "'"$DATASET_ID"'", "target": "label", "random_state": 0,
                 "evaluation": {"holdout_fraction": 0.25}, "ensemble": '"$ensemble"'}'
        log "     $kind: version $(json 'b["version"]'), hold-out accuracy $(json 'b["metrics"]["holdout"]["accuracy"]'), served by $(json '(b.get("inference") or {}).get("engine")'), libraries $(json 'b["artifact"]["library_versions"]')"
        api 200 POST "/v1/models/$MODEL-$kind/versions/latest/predict" \
            -H "Authorization: Bearer $READ_KEY" -H 'Content-Type: application/json' \
            -d '{"instances": [{"x1": 1.5, "x2": 0.5, "color": "red"},
                               {"x1": -1.2, "x2": -0.8, "color": "blue"},
                               {"x1": 0.9, "x2": 1.1, "color": "green"}],
                 "options": {"return_proba": true}}'
        log "     $kind predictions $(json 'b["predictions"]'), probabilities $(json '[[round(p, 3) for p in r] for r in b["probabilities"]]')"
        [[ $(json 'b["predictions"]') == "['pos', 'neg', 'pos']" ]] || die "unexpected $kind predictions"
    done
}

explain_trees() { # exact TreeSHAP in the image, which installs shap without numba
    API_TIMEOUT=$((TRAIN_TIMEOUT + 30)) api 201 POST "/v1/models/$MODEL-trees/versions?wait=true" \
        -H "Authorization: Bearer $TRAIN_KEY" -H 'Content-Type: application/json' \
        -d '{"dataset_id": "'"$DATASET_ID"'", "target": "label", "random_state": 0,
             "evaluation": {"holdout_fraction": 0.25},
             "ensemble": {"kind": "random_forest", "params": {"n_estimators": 20}}}'
    local trained
    trained=$(json '(b["metrics"].get("explanations") or {}).get("method")')
    log "     metrics.explanations at training: $trained"
    [[ $trained == tree_shap ]] || die "training recorded no TreeSHAP explanations"
    api 200 POST "/v1/models/$MODEL-trees/versions/latest/predict" \
        -H "Authorization: Bearer $READ_KEY" -H 'Content-Type: application/json' \
        -d '{"instances": [{"x1": 1.5, "x2": 0.5, "color": "red"},
                           {"x1": -1.2, "x2": -0.8, "color": "blue"}],
             "options": {"explain": true}}'
    log "     explained: $(json 'b["explanations"]["method"]'), additivity error $(json 'b["explanations"]["additivity_error"]'), contributions of row 1 $(json 'b["explanations"]["contributions"][0]["pos"]')"
    [[ $(json 'b["explanations"]["method"]') == tree_shap ]] || die "no TreeSHAP explanation"
    [[ $(json 'b["explanations"]["additivity_error"] <= 1e-6') == True ]] || die "not additive"
}

# --- 6. stop, restart on the same volume, stop ---------------------------------------------
start_long_job() { # a job that is still running when SIGTERM comes
    api 202 POST "/v1/models/$MODEL/versions" \
        -H "Authorization: Bearer $TRAIN_KEY" -H 'Content-Type: application/json' \
        -d '{"dataset_id": "'"$DATASET_ID"'", "target": "label", "random_state": 0,
             "ensemble": {"kind": "random_forest", "params": {"n_estimators": 5000}}}'
    LONG_JOB=$(json 'b["id"]')
    local deadline=$((SECONDS + 30)) status
    while :; do
        api 200 GET "/v1/jobs/$LONG_JOB" -H "Authorization: Bearer $READ_KEY" >/dev/null
        status=$(json 'b["status"]')
        [[ $status == queued ]] || break
        ((SECONDS < deadline)) || die "job $LONG_JOB still queued after 30s"
        sleep 0.2
    done
    log "     job $LONG_JOB (version $(json 'b["version"]')) is $status"
    [[ $status == running ]] || log "     (it ended before SIGTERM: the interruption is not exercised)"
}

stop_container() {
    # SIGTERM (the image's STOPSIGNAL); SIGKILL only after STOP_GRACE seconds.
    timeout $((STOP_GRACE + 30)) "${PODMAN[@]}" stop --time "$STOP_GRACE" "$CTR" >/dev/null \
        2> >(grep -v 'unable to get systemd connection' >&2) || die "podman stop"
    local code
    code=$(pm inspect --format '{{.State.ExitCode}}' "$CTR")
    log "   container log (tail):"
    pm logs "$CTR" 2>&1 | tail -6 | sed 's/^/     /'
    [[ $code == 0 ]] || die "exit code $code after SIGTERM, expected 0"
    log "   exit code $code after SIGTERM"
}

restart_same_volume() {
    pm start "$CTR" >/dev/null
    wait_healthy
    api 200 GET "/v1/jobs/$LONG_JOB" -H "Authorization: Bearer $READ_KEY"
    local status
    status=$(json 'b["status"]')
    log "     the interrupted job is $status: $(json '(b.get("error") or {}).get("detail")')"
    [[ $status == failed || $status == succeeded ]] || die "job $LONG_JOB is $status after a restart"
    api 200 POST "/v1/models/$MODEL/versions/1/predict" \
        -H "Authorization: Bearer $READ_KEY" -H 'Content-Type: application/json' \
        -d '{"instances": [{"x1": 1.5, "x2": 0.5, "color": "red"}]}'
    log "     version 1 still predicts from the volume: $(json 'b["predictions"]')"
}

# --- 7. two server processes --------------------------------------------------------------
start_two_processes() { # the same image and volume, ENSEMBLE_WORKERS=2
    pm rm "$CTR" >/dev/null
    EXTRA_RUN_ARGS=(--env ENSEMBLE_WORKERS=2)
    start_container
}

predict_from_both() { # new connections until requests were served by two processes
    local pids="" n
    for ((n = 1; n <= 60; n++)); do
        api 200 POST "/v1/models/$MODEL/versions/1/predict" \
            -H "Authorization: Bearer $READ_KEY" -H 'Content-Type: application/json' \
            -d '{"instances": [{"x1": 1.5, "x2": 0.5, "color": "red"}]}' >/dev/null
        [[ $(json 'b["predictions"]') == "['pos']" ]] || die "unexpected prediction"
        pids=$(pm logs "$CTR" 2>&1 | python3 -c '
import json, sys
pids = set()
for line in sys.stdin:
    try:
        entry = json.loads(line)
    except ValueError:
        continue
    if entry.get("event") == "request" and entry.get("path", "").endswith("/predict"):
        pids.add(entry.get("pid"))
print(" ".join(sorted(str(p) for p in pids)))')
        [[ $(wc -w <<<"$pids") -ge 2 ]] && break
    done
    [[ $(wc -w <<<"$pids") -ge 2 ]] || die "60 predictions were served by one process only ($pids)"
    log "     $n predictions, served by the server processes $pids"
}

log "ensemble-service docker smoke test in $WORK"
step "tools" install_tools
step "debootstrap + import base image" make_base_image
step "podman build" build_image
step "inspect image" inspect_image
step "start container" start_container
step "wait until healthy" wait_healthy
step "access and readiness" check_access_and_readiness
step "upload table" upload_table
step "train (?wait=true)" train_model
step "predict" predict
step "boosting libraries: train and serve" train_and_serve_libraries
step "explain (TreeSHAP)" explain_trees
step "start a long job" start_long_job
step "stop (SIGTERM) during the job" stop_container
step "restart on the same volume" restart_same_volume
step "stop (SIGTERM)" stop_container
step "two server processes: start" start_two_processes
step "two server processes: healthy" wait_healthy
step "two server processes: predict" predict_from_both
step "two server processes: stop (SIGTERM)" stop_container

log "summary"
printf '   %s\n' "${STEP_LOG[@]}"
log "   image size: $IMAGE_SIZE"
log "PASS in $(elapsed "$T_START")s (before cleanup)"
