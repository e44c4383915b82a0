#!/usr/bin/env bash
# What latlab's tests need beyond Rust, installed when missing.
#   bash scripts/deps.sh          (scripts/test runs it first)
# Debian packages: rt-tests (cyclictest, hackbench, ptsematest, pmqtest: comparisons and loads),
# stress-ng and dbench (loads), make, gcc, tar, gzip (the compile loads), util-linux (prlimit,
# unshare, mount), chromium (the HTML reports opened in a headless browser), trace-cmd (the
# oracle that reads the trace.dat files latlab writes; only ever run to read files),
# protobuf-compiler (protoc decodes latlab's Perfetto exports with Perfetto's own .proto files,
# tests/fixtures/perfetto), postgresql
# (the results-database tests start their own server from /usr/lib/postgresql/*/bin), man-db and
# groff-base (`latlab man` pages rendered in the tests), dpkg (the package step of scripts/test),
# prometheus (its server scrapes `latlab run --metrics-listen` in the tests; promtool lints the text),
# python3 and python3-venv (tests/kcidb.rs makes a venv, target/kcidb-venv, and installs the
# kcidb-io package from PyPI into it with pip to validate `latlab export --format kcidb`),
# and for the kernel lab (scripts/kernel-lab: Debian kernels booted under QEMU by the lab_*
# tests) qemu-system-x86, busybox-static, cpio, xz-utils, rtla and util-linux (chrt, taskset in
# the guests), pkgconf, libtracefs-dev and libtraceevent-dev (rtla 6.12's build); then the
# lab's kernels are fetched into its cache when missing (apt-get download of Debian's 6.12-rt,
# 6.1 and 6.1-rt kernel packages, about 250 MB once; `apt-get update` first as root when apt
# does not know them), LAVA's test-shell scripts and dispatcher (unpacked; its python3 modules
# and libraries are installed above), and rtla 6.12 is built from Debian's
# linux-source-6.12 (scripts/rtla-build: 150 MB downloaded, ~30 s once).
# As root with apt-get, the missing ones are installed (apt-get update once first). Otherwise one
# line says what to install, and the tests that need them skip (or fail under
# LATLAB_REQUIRE_PRIVILEGED=1).
set -euo pipefail

# command -> Debian package
needs=(
    cyclictest:rt-tests hackbench:rt-tests ptsematest:rt-tests pmqtest:rt-tests
    stress-ng:stress-ng dbench:dbench
    make:make cc:gcc tar:tar gzip:gzip
    prlimit:util-linux unshare:util-linux mount:mount
    chromium:chromium
    trace-cmd:trace-cmd protoc:protobuf-compiler
    man:man-db groff:groff-base dpkg:dpkg
    prometheus:prometheus promtool:prometheus
    qemu-system-x86_64:qemu-system-x86 busybox:busybox-static cpio:cpio xz:xz-utils
    rtla:rtla chrt:util-linux taskset:util-linux pkg-config:pkgconf
)
missing=()
for n in "${needs[@]}"; do
    cmd=${n%%:*} pkg=${n#*:}
    if ! command -v "$cmd" >/dev/null 2>&1; then
        case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
    fi
done
# `python3 -m venv` needs ensurepip, which Debian ships in python3-venv.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
# rtla 6.12's build (scripts/rtla-build) links libtracefs and libtraceevent.
for l in libtracefs libtraceevent; do
    if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$l"; }; then
        missing+=("$l-dev")
    fi
done
# LAVA's dispatcher (scripts/lava-test-shell unpacks it; tests/lab_lava.rs runs a job with its
# lava-run) runs on Debian's own python3 with these modules (lava-dispatcher's and
# lava-common's dependencies), and its guestfs module loads libguestfs, which links these
# libraries: installed as Debian packages, the lava packages themselves only unpacked.
lava_py="yaml:python3-yaml jinja2:python3-jinja2 pexpect:python3-pexpect
    setproctitle:python3-setproctitle requests:python3-requests configobj:python3-configobj
    magic:python3-magic netifaces:python3-netifaces pyudev:python3-pyudev pytz:python3-tz
    aiohttp:python3-aiohttp voluptuous:python3-voluptuous"
[ -x /usr/bin/python3 ] || missing+=(python3)
for m in $lava_py; do
    if ! /usr/bin/python3 -c "import ${m%%:*}" >/dev/null 2>&1; then
        missing+=("${m#*:}")
    fi
done
for p in libvirt0 libfuse2 libyajl2 libssh-4; do
    if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
        missing+=("$p")
    fi
done
# PostgreSQL's server binaries are not on PATH.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=(postgresql)
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: everything the tests need is installed"
elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    echo "deps: installed ${missing[*]}"
else
    echo "deps: missing ${missing[*]}: as root, apt-get install ${missing[*]} (the tests that need them skip)" >&2
fi

# The kernel lab's kernels (a no-op when the cache has the versions apt offers).
if command -v apt-get >/dev/null 2>&1; then
    bash "$(dirname "$0")/kernel-lab" fetch rt-6.12 stock-6.1 rt-6.1 ||
        echo "deps: the kernel lab's kernels could not be fetched (the lab tests skip)" >&2
    bash "$(dirname "$0")/lava-test-shell" fetch ||
        echo "deps: LAVA's test-shell scripts or dispatcher could not be fetched (tests/lab_lava.rs skips)" >&2
    bash "$(dirname "$0")/rtla-build" fetch ||
        echo "deps: rtla 6.12 could not be built (tests/lab_rt_attribution.rs fails under LATLAB_REQUIRE_PRIVILEGED=1)" >&2
else
    echo "deps: no apt-get: the kernel lab's kernels cannot be fetched (the lab tests skip)" >&2
fi
