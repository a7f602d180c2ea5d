# azgpu's on-node certification step. It runs on one node through Run Command (RunShellScript, as
# root), runs one tool, keeps its output on the node and prints exactly one verdict line on stdout,
# last: {"azgpu_certify": 1, ...}. The node reads nothing into that output: azgpu parses it (its
# parsers are bounded and typed, azgpu/certify/*.py). Run Command returns only the last 4,096 bytes
# of stdout (Learn: linux/run-command), so the output comes back in pages of PAGE bytes, base64: the
# first page in the step's verdict, the others through mode `page`, each verdict naming the output's
# size and SHA-256 so azgpu checks what it put together.
#
# azgpu puts the settings (AZGPU_*) above this text. AZGPU_ROOT, empty on a real node, prefixes every
# file the script reads or writes, so tests and azgpu's simulated Azure run it on stub tools and files.
#
# Modes (AZGPU_MODE):
#   dcgm         dcgmi diag -r AZGPU_DCGM_LEVEL -j (DCGM's JSON)
#   thermal      dcgmproftester (target 1004, load on every GPU) for AZGPU_THERMAL_SECONDS, sampling
#                nvidia-smi -q -d PERFORMANCE every AZGPU_THERMAL_SAMPLE seconds for a HW slowdown
#   nvbandwidth  nvbandwidth: host to device, device to host and device to device (copy engines)
#   loopback     all_reduce_perf on this node's GPUs over InfiniBand only (NCCL_P2P_DISABLE=1,
#                NCCL_SHM_DISABLE=1), with each port's link_downed counter before and after
#   ibpair       ib_write_bw with GPUDirect on every port, as the server or as the client of AZGPU_IB_PEER
#                (both ends run at once, each through its own Run Command)
#   fabric       the launcher: run AZGPU_JOBS (collectives) at once through HPC-X mpirun, as the admin
#                user with the key of the multi-node NCCL check
#   page         page AZGPU_PAGE of the output of run AZGPU_PAGE_RUN
#   forget       the launcher: remove the key pair of the rounds
set -u
export LC_ALL=C
R=${AZGPU_ROOT:-}
START=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/azgpu-certify.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
PAGE=2700     # raw bytes a page holds: base64 of it and the rest of the verdict fit in 4,000 bytes
MAX_OUT=262144
OUTDIR=$R/var/log/azgpu/certify
mkdir -p -m 700 "$OUTDIR" 2>/dev/null
if [ -L "$OUTDIR" ] || [ ! -d "$OUTDIR" ] || [ ! -O "$OUTDIR" ]; then OUTDIR=$WORK/out; mkdir -m 700 "$OUTDIR"; fi
# Old outputs go: azgpu pages an output right after the step that made it.
find "$OUTDIR" -maxdepth 1 -type f -name 'run-*' -mmin +1440 -delete 2>/dev/null
RUN=${AZGPU_RUN:-}
[[ $RUN =~ ^[a-z0-9-]{8,48}$ ]] || RUN=invalid

tmo() {  # seconds command...: every tool ends, even one that ignores SIGTERM, and reads no stdin
    local s=$1
    shift
    timeout -k 10 "$s" "$@" </dev/null
}
js() {  # a JSON string of printable ASCII, at most $2 characters
    local s=$1
    s=${s//[^[:print:]]/ }
    [ -n "${2:-}" ] && s=${s:0:$2}
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}
verdict() {  # ok exit file [extra json fields]: the one line, with the output's first page
    local ok=$1 rc=$2 file=$3 extra=${4:-} bytes pages sum page now
    head -c "$MAX_OUT" "$file" >"$WORK/kept" 2>/dev/null
    ( set -C; cat "$WORK/kept" >"$OUTDIR/run-$RUN" ) 2>/dev/null
    bytes=$(wc -c <"$WORK/kept")
    pages=$(( (bytes + PAGE - 1) / PAGE ))
    sum=$(sha256sum "$WORK/kept" | cut -c1-64)
    page=$(head -c "$PAGE" "$WORK/kept" | base64 -w0)
    now=$(date +%s)
    printf '{"azgpu_certify":1,"mode":%s,"run":%s,"ok":%s,"exit":%d,"seconds":%d,"bytes":%d,"pages":%d,"sha256":"%s","output":"%s"%s}\n' \
        "$(js "${AZGPU_MODE:-}" 16)" "$(js "$RUN" 48)" "$ok" "$rc" $((now - START)) "$bytes" "$pages" "$sum" "$page" \
        "$extra" >"$WORK/verdict"
}
missing() {  # tool: the image lacks it (an image fault, never the host's)
    printf '%s: not found on this node\n' "$1" >"$WORK/out"
    verdict false 127 "$WORK/out" ",\"error\":$(js "$1 is not installed" 120)"
}
find_tool() {  # the first of the names that exists on PATH or as an absolute path
    local t
    for t in "$@"; do
        if [ "${t#/}" != "$t" ]; then [ -x "$R$t" ] && { printf '%s' "$R$t"; return 0; }
        else command -v "$t" 2>/dev/null && return 0; fi
    done
    return 1
}
admin_home() { printf '%s/home/%s' "$R" "${AZGPU_ADMIN_USER:?}"; }
nccl_tests() { printf '%s/opt/nccl-tests/build/%s_perf' "$R" "$1"; }
nccl_lines() {  # of nccl-tests' output, what azgpu reads: the result rows and the trailer (not one line per rank)
    grep -E '^ *[0-9]+ +[0-9]+ +[A-Za-z]|NCCL version|^# (nThread|Collective test|Out of bounds|Avg bus)' || true
}
perftest_lines() {  # of ib_write_bw's report: the device, the header, the rows, CUDA's device name, its errors
    grep -E '^ *#bytes|Device *:|^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+|initializing CUDA|device name =|Couldn.t|Failed|[Ee]rror' || true
}
ports() { ls -1 "$R/sys/class/infiniband" 2>/dev/null | grep -E '^mlx5_ib[0-9]+$' | sort -V; }
counters() {  # label: each port's link_downed counter (the kernel's count of link failures)
    local dev v
    for dev in $(ports); do
        v=$(head -c 32 "$R/sys/class/infiniband/$dev/ports/1/counters/link_downed" 2>/dev/null | tr -dc 0-9)
        printf '%s %s link_downed %s\n' "$1" "$dev" "${v:-unknown}"
    done
}
versions() {  # what the certificate records: driver, VBIOS, OFED, the HCA firmware, the image
    local drv vbios ofed fw image
    drv=$(tmo 30 nvidia-smi --query-gpu=driver_version,vbios_version --format=csv,noheader 2>/dev/null | head -n 1)
    vbios=${drv#*, }; drv=${drv%%,*}
    ofed=$(tmo 10 ofed_info -s 2>/dev/null | head -n 1)
    fw=$(head -c 64 "$R/sys/class/infiniband/$(ports | head -n 1)/fw_ver" 2>/dev/null)
    image=$(tmo 10 curl -s -H Metadata:true --noproxy '*' --max-time 5 \
        "http://169.254.169.254/metadata/instance/compute/storageProfile/imageReference?api-version=2021-02-01" 2>/dev/null | head -c 400)
    printf ',"versions":{"driver":%s,"vbios":%s,"ofed":%s,"hca_fw":%s,"image":%s}' "$(js "$drv" 40)" "$(js "$vbios" 40)" \
        "$(js "$ofed" 60)" "$(js "$fw" 40)" "$(js "$image" 400)"
}

dcgm() {
    local rc
    [[ ${AZGPU_DCGM_LEVEL:-2} =~ ^[1-4]$ ]] || AZGPU_DCGM_LEVEL=2
    command -v dcgmi >/dev/null 2>&1 || { missing dcgmi; return; }
    tmo "${AZGPU_STEP_TIMEOUT:-1800}" dcgmi diag -r "$AZGPU_DCGM_LEVEL" -j >"$WORK/out" 2>"$WORK/err"
    rc=$?
    verdict true $rc "$WORK/out"
}
thermal() {
    local tool seconds=${AZGPU_THERMAL_SECONDS:-120} every=${AZGPU_THERMAL_SAMPLE:-15} n=${AZGPU_EXPECT_GPUS:-8} i k pids=()
    [[ $seconds =~ ^[0-9]{1,5}$ ]] || seconds=120
    [[ $every =~ ^[0-9]{1,4}$ ]] && [ "$every" -gt 0 ] || every=15
    [[ $n =~ ^[0-9]{1,3}$ ]] || n=8
    tool=$(find_tool dcgmproftester13 dcgmproftester12 dcgmproftester11) || { missing dcgmproftester; return; }
    {
        echo "== gpus"
        tmo 30 nvidia-smi --query-gpu=index,pci.bus_id,serial --format=csv,noheader
    } >"$WORK/out" 2>&1
    # One load per GPU, as Microsoft's thermal test runs it (target 1004, the SM-bound workload).
    for ((i = 0; i < n; i++)); do
        CUDA_VISIBLE_DEVICES=$i tmo $((seconds + 120)) "$tool" --no-dcgm-validation -t 1004 -d "$seconds" \
            >"$WORK/load-$i" 2>&1 &
        pids[i]=$!
    done
    : >"$WORK/active"
    for ((k = every; k <= seconds; k += every)); do
        sleep "$every"
        tmo 30 nvidia-smi -q -d PERFORMANCE 2>&1 | grep -E '^GPU |Clocks (Event|Throttle) Reasons|Slowdown' >"$WORK/sample"
        # The first sample that shows a slowdown is kept whole; the last sample is kept too.
        if [ ! -s "$WORK/active" ] && grep -q 'Slowdown.*: Active' "$WORK/sample"; then
            { echo "== sample at ${k} s"; cat "$WORK/sample"; } >"$WORK/active"
        fi
    done
    for ((i = 0; i < n; i++)); do wait "${pids[i]}"; echo "== load gpu $i exit $?"; done >>"$WORK/out"
    cat "$WORK/active" >>"$WORK/out"
    { echo "== final sample at ${seconds} s"; cat "$WORK/sample" 2>/dev/null; } >>"$WORK/out"
    verdict true 0 "$WORK/out"
}
nvbandwidth_step() {
    local tool rc
    tool=$(find_tool nvbandwidth /opt/nvbandwidth/nvbandwidth /opt/azurehpc/test/azurehpc-health-checks/bin/nvbandwidth) \
        || { missing nvbandwidth; return; }
    tmo "${AZGPU_STEP_TIMEOUT:-900}" "$tool" -t host_to_device_memcpy_ce -t device_to_host_memcpy_ce \
        -t device_to_device_memcpy_read_ce >"$WORK/out" 2>&1
    rc=$?
    verdict true $rc "$WORK/out" "$(versions)"
}
mpi() {  # seconds np hostfile args...: HPC-X's mpirun as the admin user, under timeout
    local s=$1 np=$2 hosts=$3
    shift 3
    tmo "$s" runuser -u "$AZGPU_ADMIN_USER" -- bash -c '
        [ -r "$1" ] && . "$1" && module load mpi/hpcx
        shift
        exec mpirun "$@"' azgpu-certify "$R/etc/profile.d/modules.sh" -np "$np" \
        --map-by "ppr:${AZGPU_EXPECT_GPUS}:node" -hostfile "$hosts" "$@"
}
nccl_env() {  # -x K=V for each of AZGPU_NCCL_ENV (checked: names and values of safe characters)
    local kv
    for kv in ${AZGPU_NCCL_ENV:-}; do [[ $kv =~ ^[A-Z][A-Z0-9_]{0,63}=[A-Za-z0-9_./:,=-]{0,200}$ ]] && printf -- '-x\n%s\n' "$kv"; done
}
loopback() {
    local exe rc args=()
    exe=$(nccl_tests all_reduce)
    [ -x "$exe" ] || { missing all_reduce_perf; return; }
    mapfile -t args < <(nccl_env)
    echo "localhost slots=${AZGPU_EXPECT_GPUS:?}" >"$WORK/hosts"
    chmod 644 "$WORK/hosts"
    counters before >"$WORK/out"
    AZGPU_JOB=loopback mpi "${AZGPU_STEP_TIMEOUT:-900}" "$AZGPU_EXPECT_GPUS" "$WORK/hosts" -x LD_LIBRARY_PATH \
        -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_DEBUG=VERSION "${args[@]+"${args[@]}"}" "$exe" \
        -b "${AZGPU_NCCL_MIN:-8G}" \
        -e "${AZGPU_NCCL_MAX:-16G}" -f 2 -g 1 -c 0 -n "${AZGPU_NCCL_ITERS:-20}" 2>&1 | nccl_lines >>"$WORK/out"
    rc=${PIPESTATUS[0]}
    counters after >>"$WORK/out"
    verdict true "$rc" "$WORK/out"
}
ibpair() {  # ib_write_bw on every port at once with GPUDirect (each port's own GPU): this node as the server,
            # or as the client of the server at AZGPU_IB_PEER (retrying until the server listens)
    local role=${AZGPU_IB_ROLE:-} peer=${AZGPU_IB_PEER:-} s=${AZGPU_IB_SECONDS:-5} i=0 dev port try rc
    [[ $s =~ ^[0-9]{1,3}$ ]] || s=5
    if ! [[ $peer =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}$ ]] || { [ "$role" != server ] && [ "$role" != client ]; }; then
        echo "refused: not a role and an IPv4 peer" >"$WORK/out"
        verdict false 2 "$WORK/out" ',"error":"refused: not a role and an IPv4 peer"'
        return
    fi
    command -v ib_write_bw >/dev/null 2>&1 || { missing ib_write_bw; return; }
    for dev in ${AZGPU_IB_DEVICES:-}; do
        [[ $dev =~ ^mlx5_ib[0-9]{1,2}$ ]] || continue
        port=$((18515 + i))
        if [ "$role" = server ]; then
            tmo 300 ib_write_bw -d "$dev" --use_cuda="$i" -F --report_gbits -D "$s" -p "$port" >/dev/null 2>&1 &
        else
            (
                for ((try = 0; try < 30; try++)); do
                    tmo $((s + 60)) ib_write_bw -d "$dev" --use_cuda="$i" -F --report_gbits -D "$s" -p "$port" "$peer" \
                        >"$WORK/rail-$i" 2>&1
                    rc=$?
                    [ $rc -eq 0 ] || ! grep -q "Couldn.t connect" "$WORK/rail-$i" && break
                    sleep 2
                done
                { echo "---- rail $dev"; perftest_lines <"$WORK/rail-$i"; } >"$WORK/report-$i"
            ) &
        fi
        i=$((i + 1))
    done
    wait
    if [ "$role" = server ]; then echo "served $i port(s)" >"$WORK/out"; else cat "$WORK"/report-* >"$WORK/out" 2>/dev/null; fi
    verdict true 0 "$WORK/out"
}
collective() {  # id op min max ips [mnnvl]: nccl-tests across those nodes, over InfiniBand or a rack's NVLink
    local id=$1 op=$2 min=$3 max=$4 ips=$5 mnnvl=0 exe args=() ip np=0
    [ "${6:-}" = mnnvl ] && mnnvl=1
    exe=$(nccl_tests "$op")
    [ -x "$exe" ] || { echo "$exe: not found"; return 127; }
    mapfile -t args < <(nccl_env)
    for ip in ${ips//,/ }; do echo "$ip slots=$AZGPU_EXPECT_GPUS"; np=$((np + AZGPU_EXPECT_GPUS)); done >"$WORK/hosts-$id"
    chmod 644 "$WORK/hosts-$id"
    AZGPU_JOB=$id mpi "${AZGPU_STEP_TIMEOUT:-1200}" "$np" "$WORK/hosts-$id" --mca plm_rsh_args "-i $(admin_home)/.azgpu-nccl/id_ed25519 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null" \
        -x LD_LIBRARY_PATH -x NCCL_MNNVL_ENABLE=$mnnvl "${args[@]+"${args[@]}"}" "$exe" -b "$min" -e "$max" -f 2 -g 1 -c 0 \
        -n "${AZGPU_NCCL_ITERS:-20}" 2>&1 | nccl_lines
    return "${PIPESTATUS[0]}"
}
fabric() {
    local line id kind rest ip='([0-9]{1,3}\.){3}[0-9]{1,3}' size='[0-9]{1,12}[KMG]?'
    : >"$WORK/out"
    while IFS= read -r line; do
        [ -z "$line" ] && continue
        id=${line%% *}; rest=${line#* }; kind=${rest%% *}; rest=${rest#* }
        if [[ $id =~ ^[0-9]{1,4}$ ]] && [ "$kind" = collective ] && \
           [[ $rest =~ ^(all_reduce|alltoall)\ $size\ $size\ $ip(,$ip){0,1023}(\ mnnvl)?$ ]]; then
            # shellcheck disable=SC2086
            ( set -- $rest; collective "$id" "$@" >"$WORK/job-$id" 2>&1; echo "==== end $id exit $?" >>"$WORK/job-$id" ) &
        else
            echo "==== job refused: $(printf '%s' "$line" | tr -dc '[:print:]' | head -c 120)" >>"$WORK/out"
        fi
    done <<<"${AZGPU_JOBS//;/$'\n'}"
    wait
    for line in $(ls -1 "$WORK" | grep -E '^job-[0-9]+$' | sort -t- -k2 -n); do
        echo "==== job ${line#job-}"
        cat "$WORK/$line"
    done >>"$WORK/out"
    verdict true 0 "$WORK/out"
}
forget() {  # the launcher's key pair goes once the rounds are over
    rm -rf "$(admin_home)/.azgpu-nccl"
    : >"$WORK/out"
    verdict true 0 "$WORK/out"
}
page() {
    local run=${AZGPU_PAGE_RUN:-} n=${AZGPU_PAGE:-} file bytes pages sum out
    if ! [[ $run =~ ^[a-z0-9-]{8,48}$ ]] || ! [[ $n =~ ^[0-9]{1,3}$ ]] || [ ! -f "$OUTDIR/run-$run" ] || [ -L "$OUTDIR/run-$run" ]; then
        printf '{"azgpu_certify":1,"mode":"page","run":%s,"ok":false,"error":"no such output"}\n' "$(js "$run" 48)" >"$WORK/verdict"
        return
    fi
    file=$OUTDIR/run-$run
    bytes=$(wc -c <"$file"); pages=$(( (bytes + PAGE - 1) / PAGE )); sum=$(sha256sum "$file" | cut -c1-64)
    out=$(dd if="$file" bs="$PAGE" skip="$n" count=1 2>/dev/null | base64 -w0)
    printf '{"azgpu_certify":1,"mode":"page","run":%s,"ok":true,"page":%d,"bytes":%d,"pages":%d,"sha256":"%s","output":"%s"}\n' \
        "$(js "$run" 48)" "$n" "$bytes" "$pages" "$sum" "$out" >"$WORK/verdict"
}

main() {
    case "${AZGPU_MODE:-}" in
        dcgm) dcgm ;;
        thermal) thermal ;;
        nvbandwidth) nvbandwidth_step ;;
        loopback) loopback ;;
        fabric) fabric ;;
        ibpair) ibpair ;;
        page) page ;;
        forget) forget ;;
        *) printf '{"azgpu_certify":1,"mode":%s,"ok":false,"error":"unknown mode"}\n' "$(js "${AZGPU_MODE:-}" 16)" >"$WORK/verdict" ;;
    esac
}
# The tools run with stdout and stderr away from Run Command's pipe: only the verdict reaches it.
( main ) >"$WORK/log" 2>&1 </dev/null
[ -s "$WORK/verdict" ] && IFS= read -r line <"$WORK/verdict" && printf '%s\n' "$line"
exit 0
