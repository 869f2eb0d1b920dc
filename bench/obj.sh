#!/bin/bash
# The OBJ backend (DRAM <-> S3 objects, libcurl) against the curl command line on the same S3
# server, side by side (issue 22).
#
# One server for the whole run, started here on 127.0.0.1 with an ephemeral port: s3rver (npm,
# installed by tests/s3/setup.sh into $IXL_S3RVER_DIR or ~/.cache/ixl/s3rver; SERVER=s3rver,
# the default), or tests/s3/s3_strict_server.py (SERVER=s3t: it checks every signature, in
# Python, so it measures mostly itself). Its data directory is under /var/tmp (s3rver keeps
# objects in files).
#
# Rows, each measured ROUNDS (5) times in interleaved rounds (the order of the tools changes
# from round to round: reversed every second round, rotated by one every two, so that with
# three or more tools each runs first, in the middle and last, after each of the others),
# medians, GB/s = 10^9 B/s of object bytes over the wall time:
#   single objects of each size of SIZES (1M 16M 64M): COUNT objects of that size (default
#     BYTES / size, BYTES = 128M, at least 2), WRITE then READ, one object after the other:
#       curl:  one process given all the URLs (a --config file: keep-alive, one by one), PUT
#              with upload-file, GET to /dev/null
#       ixl:   ixlbench --backend OBJ --target-mem OBJ, one object per request, one request at a
#              time (--batch 1 --depth 1); OBJ's own parallelism inside a request (READ ranges of
#              read_split, multipart parts) is its to use
#     target: ixl >= 0.9x curl
#   multipart, for each size of SIZES of at least MPU_MIN (64M): the same WRITE compared like
#     for like (MPU_ROWS=0 leaves these rows out):
#       write-mpu: ixl forced to a multipart upload (mpu_threshold=part_size=PART: parts of
#              PART (8M), sent in parallel; OBJ's default does so above mpu_threshold, 64M)
#              against curl doing the same by hand: one curl for CreateMultipartUpload, one
#              curl --parallel for the parts (dump-header for their ETags), one curl for
#              CompleteMultipartUpload, per object (3 processes per object: their start-up is in
#              curl's time)
#       write-put: ixl with mpu_threshold above the size (one PUT, as curl's row does)
#     no target: these rows show where the time of the "write" row goes on this server
#   many objects: MANY (1000) objects of MANY_SIZE (64K), WRITE then READ:
#       curl:  one process, one by one (as above), and curl --parallel --parallel-max PAR (16);
#              for the READ also curl --parallel sending ixl's GET headers (Range of the whole
#              object, x-amz-checksum-mode: ENABLED; HDR_ROWS=0 leaves it out): the second
#              table's ms/obj then says whether those headers cost the server anything
#       ixl:   one request of MANY descriptors, max_conns=PAR
#     targets: ixl >= 2x curl one by one, and >= 0.9x curl --parallel
# Columns srv:ixl and srv:par: the server's CPU time (user + system, /proc/PID/stat) over the
# wall time of ixl's and curl --parallel's runs (medians): near 1.00 for a one-thread server
# (s3rver: one Node process, its I/O threads included) means the server is the limit; ms/obj:
# the server's CPU milliseconds per object during ixl's run (1000 / ms/obj objects a second is
# what the server can serve on one core, whoever asks).
# A second table gives, for every tool, the server's CPU milliseconds per object (all threads)
# and its event-loop thread's share of the wall time on a CPU (main) and on a CPU or waiting
# for one (busy), from /proc/PID/task/PID/schedstat: busy near 1.00 means the server's one
# JavaScript thread had work all the time (saturated), whatever the client.
# Every curl is signed like ixl's requests: --aws-sigv4 "aws:amz:REGION:s3" --user KEY:SECRET,
# x-amz-content-sha256: UNSIGNED-PAYLOAD, no wait for "100 Continue" (--expect100-timeout 0, as
# OBJ; not -H "Expect:", which curl 7.88 signs while leaving it out).
# ixlbench checks the data it moves once before its timed rows (its own check); curl's objects
# are compared with the source once (first round) by reading one back.
#
# Environment: BUILD_DIR (default build-bench; configured Release when missing), ROUNDS (5),
# SIZES ("1M 16M 64M"), BYTES (128M), COUNT (BYTES/size), MANY (1000), MANY_SIZE (64K), PAR
# (16), OPS ("write read"), SERVER (s3rver | s3t), REGION (us-east-1), HDR_ROWS (1), MPU_ROWS (1), MPU_MIN
# (64M), PART (8M), QUICK=1 (ROUNDS=3,
# SIZES=16M, BYTES=64M, MANY=300: a short look while developing), IXL_SKIP=1 (curl only),
# IXL_OPTS ("KEY=VALUE ...": more OBJ options for ixlbench, e.g. "mpu_threshold=128M"),
# SRV_OPTS (more s3rver options, e.g. "--silent": no log line per request), MANY=0
# (no many-object rows), IXL_BASE (a second build directory, e.g. main's Release build: its
# ixlbench runs every ixl row too, as tool "base" in the same interleaved rounds, on objects of
# its own, and a last table gives ixl over base per row: an A/B of two builds against the same
# server and the same curl rows). Exit status: 0, or 1 when a run failed; a FAIL of a target is reported,
# not an error.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ "${QUICK:-0}" = 1 ]; then
    : "${ROUNDS:=3}" "${SIZES:=16M}" "${BYTES:=64M}" "${MANY:=300}"
fi
rounds=${ROUNDS:-5}
sizes=${SIZES:-1M 16M 64M}
bytes_run=${BYTES:-128M}
many=${MANY:-1000}
many_size=${MANY_SIZE:-64K}
par=${PAR:-16}
ops=${OPS:-write read}
server=${SERVER:-s3rver}
region=${REGION:-us-east-1}
ak=${ACCESS_KEY:-S3RVER} # s3rver's built-in credentials
sk=${SECRET_KEY:-S3RVER}
bucket=ixlbench
mpu_rows=${MPU_ROWS:-1}
mpu_min=${MPU_MIN:-64M}
hdr_rows=${HDR_ROWS:-1}
part=${PART:-8M}
timeout_s=300 # per command: a hung run must not hang the benchmark

bytes() { # 64M -> 67108864
    case $1 in
    *[kK]) echo $((${1%?} << 10)) ;;
    *[mM]) echo $((${1%?} << 20)) ;;
    *[gG]) echo $((${1%?} << 30)) ;;
    *) echo "$1" ;;
    esac
}
now() { date +%s.%N; }

# --- Tools ----------------------------------------------------------------------------------
bench=$build/tools/ixlbench
if [ "${IXL_SKIP:-0}" = 1 ]; then
    : # curl only (IXL_SKIP=1: the baseline's rows)
elif [ ! -f "$build/CMakeCache.txt" ] &&
    ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; then
    exit 1
elif ! cmake --build "$build" -j"$(nproc)" --target ixlbench ixl_plugin_OBJ \
    >"$build/obj_build.log" 2>&1; then
    if [ -x "$bench" ]; then
        echo "obj.sh: WARNING: the build failed (see $build/obj_build.log); using the ixlbench" \
            "built earlier" >&2
    else
        tail -n 20 "$build/obj_build.log" >&2
        echo "obj.sh: the build failed (cmake --build $build --target ixlbench)" >&2
        exit 1
    fi
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "obj.sh: curl is needed (apt-get install curl)" >&2
    exit 1
fi

work=$(mktemp -d /var/tmp/ixl-obj-bench.XXXXXX) || exit 1
srv_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# --- The server -----------------------------------------------------------------------------
mkdir -p "$work/data" "$work/src"
case $server in
s3rver)
    s3dir=${IXL_S3RVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ixl/s3rver}
    js=$s3dir/node_modules/s3rver/bin/s3rver.js
    if [ ! -f "$js" ]; then
        sh "$root/tests/s3/setup.sh" "$s3dir" >&2 || exit 1
    fi
    # shellcheck disable=SC2086 # SRV_OPTS: words for s3rver (e.g. --silent)
    node "$js" -d "$work/data" -a 127.0.0.1 -p 0 --configure-bucket "$bucket" ${SRV_OPTS:-} \
        >"$work/server.log" 2>&1 &
    srv_pid=$!
    ;;
s3t)
    /usr/bin/python3 "$root/tests/s3/s3_strict_server.py" --access-key "$ak" --secret-key "$sk" \
        --region "$region" --bucket "$bucket" >"$work/server.log" 2>&1 &
    srv_pid=$!
    ;;
*) echo "obj.sh: SERVER is s3rver or s3t, not '$server'" >&2; exit 1 ;;
esac
port=
for _ in $(seq 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$work/server.log" |
        head -n 1)
    [ -n "$port" ] && break
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    cat "$work/server.log" >&2
    echo "obj.sh: the $server server did not start" >&2
    exit 1
fi
endpoint=http://127.0.0.1:$port
echo "server:  $server at $endpoint (data in $work/data)"
echo "load:    $(uptime)"

# --- curl -----------------------------------------------------------------------------------
curl_base=(curl -sS --fail --aws-sigv4 "aws:amz:$region:s3" --user "$ak:$sk"
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --expect100-timeout 0)

# curl_cfg OP PREFIX N FILE: a --config file moving N objects PREFIX-0.. (PUT from FILE, or GET
# to /dev/null).
curl_cfg() {
    local op=$1 prefix=$2 n=$3 file=$4 cfg=$work/$2.$1.cfg i
    : >"$cfg"
    for ((i = 0; i < n; i++)); do
        echo "url = \"$endpoint/$bucket/$prefix-$i\"" >>"$cfg"
        if [ "$op" = write ]; then
            echo "upload-file = \"$file\"" >>"$cfg"
        else
            echo "output = \"/dev/null\"" >>"$cfg"
        fi
    done
    echo "$cfg"
}

# curl_run OP PREFIX N FILE [--parallel]: prints the seconds the one curl process took.
curl_run() {
    local op=$1 prefix=$2 n=$3 file=$4 cfg t0 t1
    shift 4
    cfg=$(curl_cfg "$op" "$prefix" "$n" "$file")
    t0=$(now)
    if ! timeout "$timeout_s" "${curl_base[@]}" "$@" --config "$cfg" >"$work/curl.out" 2>&1; then
        head -c 2000 "$work/curl.out" >&2
        echo "obj.sh: curl $op $prefix failed" >&2
        return 1
    fi
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}

# curl_mpu PREFIX N FILE SIZE: a multipart upload of FILE to each of N objects by hand, one
# object after the other, parts of PART sent by one curl --parallel; prints the seconds.
curl_mpu() {
    local prefix=$1 n=$2 file=$3 size=$4 t0 t1 i p id url cfg xml parts
    parts=$work/src/$size.parts
    if [ ! -d "$parts" ]; then
        mkdir -p "$parts"
        split -b "$(bytes "$part")" -d -a 5 "$file" "$parts/p"
    fi
    t0=$(now)
    for ((i = 0; i < n; i++)); do
        url=$endpoint/$bucket/$prefix-$i
        id=$(timeout "$timeout_s" "${curl_base[@]}" -X POST "$url?uploads=" |
            sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p')
        if [ -z "$id" ]; then
            echo "obj.sh: curl CreateMultipartUpload $url failed" >&2
            return 1
        fi
        cfg=$work/mpu.cfg
        : >"$cfg"
        p=0
        for f in "$parts"/p*; do
            p=$((p + 1))
            { echo "url = \"$url?partNumber=$p&uploadId=$id\""
              echo "upload-file = \"$f\""
              echo "output = \"/dev/null\""; } >>"$cfg"
        done
        # Each part's number and ETag, one line per part as it completes.
        if ! timeout "$timeout_s" "${curl_base[@]}" --parallel --parallel-max "$par" \
            -w '%{url} %header{etag}\n' --config "$cfg" >"$work/mpu.etags" 2>"$work/curl.out"; then
            head -c 2000 "$work/curl.out" >&2
            echo "obj.sh: curl UploadPart $url failed" >&2
            return 1
        fi
        xml="<CompleteMultipartUpload>$(sed 's/.*partNumber=\([0-9]*\)&[^ ]* \(.*\)/\1 \2/' \
            "$work/mpu.etags" | sort -n | tr -d '\r' |
            awk '{ printf "<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>", $1, $2 }')"
        xml+="</CompleteMultipartUpload>"
        if ! timeout "$timeout_s" "${curl_base[@]}" -X POST --data-binary "$xml" \
            -H "Content-Type: application/xml" "$url?uploadId=$id" -o "$work/mpu.done" ||
            ! grep -q "CompleteMultipartUploadResult" "$work/mpu.done"; then
            echo "obj.sh: curl CompleteMultipartUpload $url failed" >&2
            return 1
        fi
    done
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}

# --- ixl ------------------------------------------------------------------------------------
base=${IXL_BASE:-}
if [ -n "$base" ]; then
    base=$(cd "$base" && pwd) || exit 1
    if [ ! -x "$base/tools/ixlbench" ] || [ ! -d "$base/lib/plugins" ]; then
        echo "obj.sh: IXL_BASE=$base has no tools/ixlbench and lib/plugins (build ixlbench and" \
            "ixl_plugin_OBJ there)" >&2
        exit 1
    fi
fi
ixl_opts=(--opt "endpoint_override=$endpoint" --opt "bucket=$bucket" --opt "access_key=$ak"
    --opt "secret_key=$sk" --opt "region=$region")
for o in ${IXL_OPTS:-}; do ixl_opts+=(--opt "$o"); done

# ixl_run BUILD PREFIX OP SIZE N BATCH [OPTION...]: prints the seconds BUILD's ixlbench took to
# move N objects of SIZE (BATCH per request, one request at a time; objects PREFIX-SIZE/0.., see
# docs/ixlbench.md), from its CSV (the timed part: request creation, post, completion, release).
ixl_run() {
    local b=$1 prefix=$2 op=$3 size=$4 n=$5 batch=$6 out o more=()
    shift 6
    for o in "$@"; do more+=(--opt "$o"); done
    out=$(IXL_PLUGIN_DIR="$b/lib/plugins" timeout "$timeout_s" "$b/tools/ixlbench" --backend OBJ \
        --target-mem OBJ "${ixl_opts[@]}" "${more[@]}" \
        --opt "max_conns=$par" --obj-prefix "$prefix-$size" --op "$op" --block "$size" \
        --batch "$batch" --iters $((n / batch)) --warmup 0 --no-check --csv 2>"$work/ixl.err")
    local rc=$?
    if [ $rc -ne 0 ]; then
        head -c 2000 "$work/ixl.err" >&2
        echo "obj.sh: ixlbench $op $size x $n failed ($rc)" >&2
        return 1
    fi
    echo "$out" | awk -f "$root/bench/csv2tsv.awk" |
        awk -F'\t' -v want=$(($(bytes "$size") * n)) '
            NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
            $col["bytes"] != want {
                printf "obj.sh: ixlbench moved %s bytes, not %s\n", $col["bytes"], want > "/dev/stderr"
                exit 1
            }
            { printf "%.6f\n", $col["seconds"]; exit }'
}

# Data check of the tools, once: ixlbench's own check (WRITE then READ, poisoned buffers), and a
# curl round trip compared byte for byte.
check_once() {
    local f=$work/src/check.dat
    head -c $((3 << 20)) /dev/urandom >"$f"
    if ! "${curl_base[@]}" -T "$f" "$endpoint/$bucket/check" -o /dev/null ||
        ! "${curl_base[@]}" "$endpoint/$bucket/check" -o "$f.back" || ! cmp -s "$f" "$f.back"; then
        echo "obj.sh: the curl round trip through $server does not give the bytes back" >&2
        return 1
    fi
    local b builds=()
    [ "${IXL_SKIP:-0}" != 1 ] && builds+=("$build")
    [ -n "$base" ] && builds+=("$base")
    for b in "${builds[@]}"; do
        IXL_PLUGIN_DIR="$b/lib/plugins" timeout "$timeout_s" "$b/tools/ixlbench" --backend OBJ \
            --target-mem OBJ "${ixl_opts[@]}" --block 1M --block-max 4M --iters 2 --warmup 0 >"$work/ixl.check" 2>&1 ||
            {
                tail -n 20 "$work/ixl.check" >&2
                echo "obj.sh: ixlbench's data check failed ($b)" >&2
                return 1
            }
    done
}

median() {
    sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

results=$work/results
: >"$results"
hz=$(getconf CLK_TCK)
srv_ticks() { awk '{ print $14 + $15 }' "/proc/$srv_pid/stat" 2>/dev/null || echo 0; }
# The server's main thread (Node's event loop: s3rver's JavaScript runs there alone): ns on a
# CPU and ns runnable but waiting for one (/proc/PID/task/PID/schedstat).
srv_main() { awk '{ print $1, $2 }' "/proc/$srv_pid/task/$srv_pid/schedstat" 2>/dev/null || echo 0 0; }
# record ROW TOOL SECONDS
record() { echo "$1 $2 $3" >>"$results"; }

check_once || exit 1
status=0
rows=()
for size in $sizes; do
    b=$(bytes "$size")
    n=${COUNT:-$(($(bytes "$bytes_run") / b))}
    [ "$n" -lt 2 ] && n=2
    head -c "$b" /dev/urandom >"$work/src/$size.dat"
    for op in $ops; do rows+=("$op:$size:$n:1"); done
    if [ "$mpu_rows" = 1 ] && [ "$b" -ge "$(bytes "$mpu_min")" ] &&
        [[ " $ops " == *" write "* ]]; then
        rows+=("write-mpu:$size:$n:1" "write-put:$size:$n:1")
    fi
done
head -c "$(bytes "$many_size")" /dev/urandom >"$work/src/many.dat"
if [ "$many" -gt 0 ]; then
    for op in $ops; do rows+=("$op:$many_size:$many:$many"); done
fi

for ((r = 1; r <= rounds; r++)); do
    for row in "${rows[@]}"; do
        IFS=: read -r op size n batch <<<"$row"
        src=$work/src/$size.dat
        [ "$batch" -gt 1 ] && src=$work/src/many.dat
        tools=(curl ixl)
        [ "$batch" -gt 1 ] && tools=(curl curlpar ixl)
        [ "$batch" -gt 1 ] && [ "$op" = read ] && [ "$hdr_rows" = 1 ] && tools+=(curlparh)
        [ "$op" = write-mpu ] && tools=(curlmpu ixl)
        [ -n "$base" ] && tools+=(base)
        xop=${op%-*} # write-mpu, write-put: WRITE
        xopts=()
        [ "$op" = write-put ] && xopts=("mpu_threshold=$(($(bytes "$size") + 1))")
        [ "$op" = write-mpu ] && xopts=("mpu_threshold=$part" "part_size=$part")
        k=$(((r - 1) / 2 % ${#tools[@]}))
        tools=("${tools[@]:k}" "${tools[@]:0:k}")
        if ((r % 2 == 0)); then # and reverse it
            rev=()
            for t in "${tools[@]}"; do rev=("$t" "${rev[@]}"); done
            tools=("${rev[@]}")
        fi
        for tool in "${tools[@]}"; do
            c0=$(srv_ticks)
            read -r m0 w0 < <(srv_main)
            case $tool in
            curl) s=$(curl_run "$xop" "c-$size" "$n" "$src") ;;
            curlpar) s=$(curl_run "$xop" "c-$size" "$n" "$src" --parallel --parallel-max "$par") ;;
            curlmpu) s=$(curl_mpu "cm-$size" "$n" "$src" "$size") ;;
            curlparh) # curl --parallel sending ixl's GET headers: does the server pay for them?
                s=$(curl_run "$xop" "c-$size" "$n" "$src" --parallel --parallel-max "$par" \
                    -H "Range: bytes=0-$(($(bytes "$size") - 1))" -H "x-amz-checksum-mode: ENABLED")
                ;;
            ixl)
                if [ "${IXL_SKIP:-0}" = 1 ]; then continue; fi
                s=$(ixl_run "$build" ixl "$xop" "$size" "$n" "$batch" "${xopts[@]}")
                ;;
            base) s=$(ixl_run "$base" ixlb "$xop" "$size" "$n" "$batch" "${xopts[@]}") ;;
            esac || { status=1; continue; }
            c1=$(srv_ticks)
            read -r m1 w1 < <(srv_main)
            record "$row" "$tool" "$s"
            record "$row" "$tool-srv" "$(awk -v a="$c0" -v b="$c1" -v hz="$hz" -v s="$s" \
                'BEGIN { printf "%.3f\n", (s > 0 ? (b - a) / hz / s : 0) }')"
            record "$row" "$tool-cpu" "$(awk -v a="$c0" -v b="$c1" -v hz="$hz" \
                'BEGIN { printf "%.3f\n", (b - a) / hz }')"
            # The event loop's share of the timed seconds: on a CPU, and on a CPU or waiting
            # for one ("busy": 1.00 = it never waited for work).
            record "$row" "$tool-main" "$(awk -v a="$m0" -v b="$m1" -v s="$s" \
                'BEGIN { printf "%.2f\n", (s > 0 ? (b - a) / 1e9 / s : 0) }')"
            record "$row" "$tool-busy" "$(awk -v a="$m0" -v b="$m1" -v c="$w0" -v d="$w1" \
                -v s="$s" 'BEGIN { printf "%.2f\n", (s > 0 ? (b - a + d - c) / 1e9 / s : 0) }')"
        done
    done
done

# --- Table ----------------------------------------------------------------------------------
gbps() {
    awk -v s="$1" -v b="$2" 'BEGIN { if (s == "nan" || s <= 0) print "nan"; else printf "%.4f", b / s / 1e9 }'
}
# ratio T_BASE T_IXL: ixl's throughput over the baseline's (same bytes: the inverse of the times)
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b <= 0) print "nan"; else printf "%.2f", a / b }'
}
verdict() { awk -v r="$1" -v t="$2" 'BEGIN { print (r != "nan" && r >= t) ? "pass" : "FAIL" }'; }

echo
echo "OBJ vs curl on $server, $rounds interleaved rounds, medians; GB/s = 10^9 B/s" \
    "(load at the end: $(uptime | sed 's/.*load average: //'))"
fmt='%-9s %-12s %9s %9s %9s %8s %8s %7s %7s %6s  %s\n'
# shellcheck disable=SC2059 # the format is this script's
printf "$fmt" op objects curl curl-par ixl ixl/curl ixl/par srv:ixl srv:par ms/obj targets
for row in "${rows[@]}"; do
    IFS=: read -r op size n batch <<<"$row"
    total=$(($(bytes "$size") * n))
    c=$(grep -E "^$row curl(mpu)? " "$results" | awk '{ print $3 }' | median)
    p=$(grep "^$row curlpar " "$results" | awk '{ print $3 }' | median)
    x=$(grep "^$row ixl " "$results" | awk '{ print $3 }' | median)
    sx=$(grep "^$row ixl-srv " "$results" | awk '{ print $3 }' | median)
    sp=$(grep "^$row curlpar-srv " "$results" | awk '{ print $3 }' | median)
    [ "$sp" = nan ] && sp=-
    mo=$(grep "^$row ixl-cpu " "$results" | awk '{ print $3 }' | median |
        awk -v n="$n" '{ if ($1 == "nan") print "nan"; else printf "%.2f", $1 * 1000 / n }')
    gc=$(gbps "$c" "$total")
    gp=$(gbps "$p" "$total")
    gx=$(gbps "$x" "$total")
    rc=$(ratio "$c" "$x")
    rp=$(ratio "$p" "$x")
    if [ "$batch" -gt 1 ]; then
        tg="ixl/curl >= 2: $(verdict "$rc" 2), ixl/par >= 0.9: $(verdict "$rp" 0.9)"
    elif [ "$op" = write-mpu ]; then
        gp=-
        rp=-
        tg="(no target: multipart, parts of $part in parallel: ixl, and curl by hand)"
    elif [ "$op" = write-put ]; then
        gp=-
        rp=-
        tg="(no target: ixl with mpu_threshold above the size: one PUT)"
    else
        gp=-
        rp=-
        tg="ixl/curl >= 0.9: $(verdict "$rc" 0.9)"
    fi
    # shellcheck disable=SC2059
    printf "$fmt" "$op" "${n}x$size" "$gc" "$gp" "$gx" "$rc" "$rp" "$sx" "$sp" "$mo" "$tg"
done

# Where the server's time went, per tool (medians): ms/obj = the server's CPU (all its threads)
# per object; main = its event-loop thread on a CPU over the tool's seconds; busy = on a CPU or
# runnable and waiting for one. busy near 1.00: the one JavaScript thread never waited for
# work, so no client can make the server go faster; main well under busy: it waited for a CPU
# (the machine's cores are taken, by the client, the server's I/O threads or other load).
echo
echo "The server during each tool's runs: ms/obj main busy (see the script's end)"
sfmt='%-9s %-12s %20s %20s %20s %20s\n'
# shellcheck disable=SC2059
printf "$sfmt" op objects "curl (one by one)" "curl-par / curl-mpu" ixl "curl-par, ixl's hdrs"
for row in "${rows[@]}"; do
    IFS=: read -r op size n batch <<<"$row"
    cols=()
    for tool in curl curlpar ixl curlparh; do
        [ "$tool" = curlpar ] && [ "$op" = write-mpu ] && tool=curlmpu
        [ "$tool" = curl ] && [ "$op" = write-mpu ] && { cols+=("-"); continue; }
        if ! grep -q "^$row $tool-cpu " "$results"; then
            cols+=("-")
            continue
        fi
        ms=$(grep "^$row $tool-cpu " "$results" | awk '{ print $3 }' | median |
            awk -v n="$n" '{ printf "%.2f", $1 * 1000 / n }')
        mn=$(grep "^$row $tool-main " "$results" | awk '{ print $3 }' | median)
        bz=$(grep "^$row $tool-busy " "$results" | awk '{ print $3 }' | median)
        cols+=("$ms $(printf '%.2f %.2f' "$mn" "$bz")")
    done
    # shellcheck disable=SC2059
    printf "$sfmt" "$op" "${n}x$size" "${cols[@]}"
done

if [ -n "$base" ]; then
    echo
    echo "A/B: ixl = $build, base = $base (same rounds, medians; GB/s)"
    afmt='%-9s %-12s %9s %9s %8s %9s %9s\n'
    # shellcheck disable=SC2059
    printf "$afmt" op objects base ixl ixl/base base/curl ixl/curl
    for row in "${rows[@]}"; do
        IFS=: read -r op size n batch <<<"$row"
        total=$(($(bytes "$size") * n))
        c=$(grep -E "^$row curl(mpu)? " "$results" | awk '{ print $3 }' | median)
        x=$(grep "^$row ixl " "$results" | awk '{ print $3 }' | median)
        y=$(grep "^$row base " "$results" | awk '{ print $3 }' | median)
        # shellcheck disable=SC2059
        printf "$afmt" "$op" "${n}x$size" "$(gbps "$y" "$total")" "$(gbps "$x" "$total")" \
            "$(ratio "$y" "$x")" "$(ratio "$c" "$y")" "$(ratio "$c" "$x")"
    done
fi
exit $status
