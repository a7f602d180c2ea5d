# azgpu's on-node health check. It runs on each node through Run Command (RunShellScript, as root)
# and prints exactly one verdict line on stdout, last: a JSON object {"azgpu_health": 1, ...}.
# Run Command returns no exit code and only the last 4,096 bytes of stdout (Learn: linux/run-command;
# run-command-extension-linux main/cmds.go), so everything else goes to a log on the node
# (/var/log/azgpu/) and the verdict is digested here, small enough to come back whole.
#
# azgpu puts the settings (AZGPU_*) above this text. AZGPU_ROOT, empty on a real node, prefixes every
# file the script reads or writes, so tests and azgpu's simulated Azure run it on stub tools and files.
#
# Modes (AZGPU_MODE):
#   check         AzNHC (Azure HPC Node Health Checks) where the image has it and it knows the size,
#                 otherwise the fallback below: GPU count and memory (nvidia-smi -q / rocm-smi),
#                 NVLink state, InfiniBand ports (sysfs: state, phys_state, rate), Xids in the kernel
#                 log. Identity for Guest Health Reporting: PhysicalHostName (KVP pool 3), VM id (IMDS).
#   nccl-keygen   multi-node NCCL check, launcher: a key pair for the admin user (private key stays here)
#   nccl-trust    the other nodes: accept that key from the launcher's address, with an expiry time
#   nccl-run      launcher: all_reduce_perf across the nodes through HPC-X mpirun, then drop the key
#   nccl-untrust  the other nodes: remove the key again
set -u
export LC_ALL=C  # byte semantics for the text handling below, whatever the node's locale
R=${AZGPU_ROOT:-}
START=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/azgpu-health.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
VERDICT=$WORK/verdict
# The node's log: in a directory azgpu owns (root's, mode 700, not a link) or, when /var/log/azgpu is
# anything else, in this run's own temporary directory; files are created with noclobber (O_EXCL), so
# a planted link is never followed. The newest KEEP_LOGS files are kept, each at most LOG_MAX bytes.
LOGDIR=$R/var/log/azgpu
KEEP_LOGS=40
LOG_MAX=4000000
mkdir -p -m 700 "$LOGDIR" 2>/dev/null
if [ -L "$LOGDIR" ] || [ ! -d "$LOGDIR" ] || [ ! -O "$LOGDIR" ]; then LOGDIR=$WORK/log; mkdir -m 700 "$LOGDIR"; fi
chmod 700 "$LOGDIR" 2>/dev/null
LOG=$LOGDIR/health-$(date -u +%Y%m%dT%H%M%SZ)-$$.log
( set -C; : >"$LOG" ) 2>/dev/null || { LOG=$WORK/health.log; : >"$LOG"; }
MAXMSG=160      # characters of a message kept in the verdict before it must be shortened
# Bytes the verdict line may take: Run Command returns the last 4,096 bytes of stdout and the line is
# the only thing on it; 96 bytes stay free for the newline and anything the extension adds.
BUDGET=4000
MAX_FINDINGS=200  # findings kept for the digest; any beyond are only counted

# Every external command runs under timeout with a kill after it (a tool that ignores SIGTERM still
# ends), with no stdin, and never holds the verdict: stdout here is the log, not Run Command's pipe.
tmo() {  # seconds command...
    local s=$1
    shift
    timeout -k 10 "$s" "$@" </dev/null
}
hung() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
logged() {  # name file rc: a tool's output into the node log, bounded
    printf '==== %s (exit %s)\n' "$1" "$3"
    head -c 200000 "$2" 2>/dev/null
    printf '\n'
}
prune_logs() {
    local f n=0
    # Newest first; names are azgpu's own (date-stamped), so ls -t order is safe to act on.
    for f in $(ls -1t "$LOGDIR" 2>/dev/null); do
        n=$((n + 1))
        [ $n -gt $KEEP_LOGS ] && rm -f -- "$LOGDIR/$f"
    done
}

# ---------------------------------------------------------------------------------- JSON helpers
jsr() {  # JS = a JSON string of printable ASCII, at most $2 characters (no subprocess, no subshell)
    local s=$1
    s=${s//[^[:print:]]/ }
    [ -n "${2:-}" ] && s=${s:0:$2}
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    JS="\"$s\""
}
js() {  # the same, printed
    jsr "$@"
    printf '%s' "$JS"
}
jn() {  # a JSON number, or null
    case "$1" in ''|*[!0-9.]*|*.*.*|.*) printf 'null' ;; *) printf '%s' "$1" ;; esac
}

# One finding per index of these arrays. TIER orders them for the 4 KB budget: 0 a host fault with a
# Guest Health Reporting category of its own, 1 any other failure of a check, 2 a fault of the check's
# own set-up (AzNHC's NHCNA, its watchdog) or information.
F_CHECK=(); F_KIND=(); F_MSG=(); F_EXP=(); F_MEAS=(); F_CODE=(); F_XID=(); F_GPUS=(); F_PORT=(); F_TIER=()
NF=0
EXTRA_DROPPED=()  # keys (fault code or check) of findings beyond MAX_FINDINGS
GPU_FAULT=0
add_failure() {  # check kind message expected measured [fault_code] [xid] [gpus_json] [port] [tier]
    local tier=${10:-}
    if [ -z "$tier" ]; then
        tier=1
        case "$2" in missing_gpu|gpu_*|xid|nvlink|fabric|imex_*|nvidia_smi_hang|ib_*|rocm_smi_hang) tier=0 ;; esac
        case "$2" in tool_missing|aznhc_*) tier=2 ;; esac
    fi
    case "$2" in missing_gpu|gpu_*|xid|nvlink|fabric|nvidia_smi_*|rocm_smi_*) GPU_FAULT=1 ;; esac
    if [ $NF -ge $MAX_FINDINGS ]; then
        EXTRA_DROPPED+=("${6:-$1}")
        return
    fi
    F_CHECK[NF]=$1; F_KIND[NF]=$2; F_MSG[NF]=$3; F_EXP[NF]=$4; F_MEAS[NF]=$5; F_CODE[NF]=${6:-}
    F_XID[NF]=${7:-}; F_GPUS[NF]=${8:-}; F_PORT[NF]=${9:-}; F_TIER[NF]=$tier
    NF=$((NF + 1))
}
FJSON=()
failures_json() {  # message length: FJSON[p] = the JSON of the finding ORDER[p] (no subshell: it is linear)
    local p i o
    FJSON=()
    for ((p = 0; p < ${#ORDER[@]}; p++)); do
        i=${ORDER[p]}
        jsr "${F_CHECK[i]}" 64; o="{\"check\":$JS"
        jsr "${F_KIND[i]}" 32; o="$o,\"kind\":$JS"
        jsr "${F_MSG[i]}" "$1"; o="$o,\"message\":$JS"
        jsr "${F_EXP[i]}" 80; o="$o,\"expected\":$JS"
        jsr "${F_MEAS[i]}" 80; o="$o,\"measured\":$JS"
        if [ -n "${F_CODE[i]}" ]; then jsr "${F_CODE[i]}" 12; o="$o,\"fault_code\":$JS"; fi
        case "${F_XID[i]}" in ''|*[!0-9]*) ;; *) o="$o,\"xid\":${F_XID[i]}" ;; esac
        case "${F_GPUS[i]}" in \[*) o="$o,\"gpus\":${F_GPUS[i]}" ;; esac
        if [ -n "${F_PORT[i]}" ]; then jsr "${F_PORT[i]}" 40; o="$o,\"port\":$JS"; fi
        FJSON[p]="$o}"
    done
}

# ---------------------------------------------------------------------------------- identity
imds() {  # IMDS compute/<field> as text (documented metadata endpoint; no proxy, short timeout)
    tmo 10 curl -s -H Metadata:true --noproxy '*' --max-time 5 \
        "http://169.254.169.254/metadata/instance/compute/$1?api-version=2021-02-01&format=text" 2>/dev/null
}
kvp_read() {  # Hyper-V KVP pool file: records of a 512-byte key and a 2,048-byte value, NUL-padded
    local file=$1 want=$2 size n i key value
    size=$(wc -c <"$file")
    n=$((size / 2560))
    [ $n -gt 256 ] && n=256
    for ((i = 0; i < n; i++)); do
        IFS= read -r -d '' key < <(dd if="$file" bs=512 skip=$((i * 5)) count=1 2>/dev/null)
        if [ "$key" = "$want" ]; then
            IFS= read -r -d '' value < <(dd if="$file" bs=512 skip=$((i * 5 + 1)) count=4 2>/dev/null)
            printf '%s' "$value"
            return 0
        fi
    done
    return 1
}
identity() {
    COMPUTER=$(tmo 10 hostname 2>/dev/null)
    PHYS=""
    # The HPC images ship kvp_client (AzNHC's getPhysHostName.py reads PhysicalHostName through it).
    if [ -x "$R/opt/azurehpc/tools/kvp_client" ]; then
        PHYS=$(tmo 20 "$R/opt/azurehpc/tools/kvp_client" 3 2>/dev/null | sed -n 's/^Key: PhysicalHostName; Value: //p' | head -n 1)
    fi
    if [ -z "$PHYS" ] && [ -r "$R/var/lib/hyperv/.kvp_pool_3" ]; then
        PHYS=$(kvp_read "$R/var/lib/hyperv/.kvp_pool_3" PhysicalHostName)
    fi
    VMID=$(imds vmId)
    VMID_SOURCE=imds
    if [ -z "$VMID" ] && [ -r "$R/sys/class/dmi/id/product_uuid" ]; then
        # The SMBIOS UUID holds the VM id, but the first three fields may be byte-swapped against
        # IMDS (WALinuxAgent#830): marked as such, and azgpu reports ARM's vmId beside it.
        VMID=$(head -c 64 "$R/sys/class/dmi/id/product_uuid")
        VMID_SOURCE=smbios
    fi
    [ -n "$VMID" ] || VMID_SOURCE=""
    VMSIZE=$(imds vmSize)
}

# ---------------------------------------------------------------------------------- GPUs
norm_bus() {  # 00000001:00:00.0 (nvidia-smi) and 0001:00:00.0 (sysfs) -> 0001:00:00.0
    local b=${1,,}
    printf '%s' "${b: -12}"
}
SMI_RC=""
nvidia_gpus() {  # nvidia-smi -q, once -> $WORK/gpus.txt, one GPU a line (fields below); sets SMI_RC
    [ -n "$SMI_RC" ] && return 0  # asked already: never a second call to a tool that hung
    tmo "${AZGPU_SMI_TIMEOUT:-120}" nvidia-smi -q >"$WORK/smi.txt" 2>&1
    SMI_RC=$?
    logged "nvidia-smi -q" "$WORK/smi.txt" "$SMI_RC"
    : >"$WORK/gpus.txt"
    [ "$SMI_RC" -eq 0 ] || return 0
    # bus|serial|memory MiB|product|SRAM unc. volatile|SRAM unc. aggregate|DRAM unc. volatile|DRAM unc.
    # aggregate|remap pending|remap failure|retired SBE|retired DBE|pending blacklist|fabric state|fabric
    # status|clique id|cluster uuid (nvidia-smi -q's section and field names; SRAM Uncorrectable is split
    # into Parity and SEC-DED by newer drivers: summed)
    awk '
        function val(   v) { v = $0; sub(/^[^:]*: */, "", v); sub(/ +$/, "", v); return v }
        function num(v) { return (v ~ /^[0-9]+$/) ? v + 0 : 0 }
        function emit() { print bus "|" serial "|" mem "|" name "|" sv "|" sa "|" dv "|" da "|" rp "|" rf "|" sbe "|" dbe "|" pbl "|" fst "|" fss "|" fcl "|" fcu }
        /^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+/ {
            if (bus != "") emit(); bus = $2; serial = ""; mem = ""; name = ""; sec = ""; sub2 = ""
            sv = 0; sa = 0; dv = 0; da = 0; rp = ""; rf = ""; sbe = ""; dbe = ""; pbl = ""; fst = ""; fss = ""; fcl = ""; fcu = ""
            next }
        /^    [A-Za-z]/ { if ($0 ~ /:/) sec = ""; else { sec = $0; sub(/^ +/, "", sec); sub(/ +$/, "", sec); sub2 = ""; next } }
        /^        [A-Za-z]/ && $0 !~ /:/ { sub2 = $0; sub(/^ +/, "", sub2); sub(/ +$/, "", sub2); next }
        /^    Product Name/ { name = val() }
        /^    Serial Number/ { serial = val() }
        sec == "FB Memory Usage" && /^        Total/ { mem = val(); sub(/ *MiB$/, "", mem) }
        sec == "ECC Errors" && sub2 == "Volatile" && /SRAM Uncorrectable/ { sv += num(val()) }
        sec == "ECC Errors" && sub2 == "Aggregate" && /SRAM Uncorrectable/ { sa += num(val()) }
        sec == "ECC Errors" && sub2 == "Volatile" && /DRAM Uncorrectable/ { dv += num(val()) }
        sec == "ECC Errors" && sub2 == "Aggregate" && /DRAM Uncorrectable/ { da += num(val()) }
        sec == "Remapped Rows" && /^        Pending/ { rp = val() }
        sec == "Remapped Rows" && /^        Remapping Failure Occurred/ { rf = val() }
        sec == "Retired Pages" && /^        Single Bit ECC/ { sbe = val() }
        sec == "Retired Pages" && /^        Double Bit ECC/ { dbe = val() }
        sec == "Retired Pages" && /^        Pending Page Blacklist/ { pbl = val() }
        sec == "Fabric" && /^        State/ { fst = val() }
        sec == "Fabric" && /^        Status/ { fss = val() }
        sec == "Fabric" && /^        CliqueId/ { fcl = val() }
        sec == "Fabric" && /^        ClusterUUID/ { fcu = val() }
        END { if (bus != "") emit() }' "$WORK/smi.txt" | tr -d '\r' >"$WORK/gpus.txt"
}
gpu_inventory_json() {  # [{"bus","serial"}] of the GPUs nvidia-smi lists (for Guest Health Reporting)
    local first=1 bus serial rest
    printf '['
    while IFS='|' read -r bus serial rest; do
        [ $first -eq 1 ] || printf ','
        first=0
        printf '{"bus":%s,"serial":%s}' "$(js "$(norm_bus "$bus")" 16)" "$(js "$serial" 32)"
    done <"$WORK/gpus.txt"
    printf ']'
}
gpu_ref() {  # bus serial -> [{"bus","serial"}]
    printf '[{"bus":%s,"serial":%s}]' "$(js "$(norm_bus "$1")" 16)" "$(js "${2:-}" 32)"
}
pci_nvidia_gpus() {  # bus ids of NVIDIA 3D/VGA controllers the PCI bus shows (vendor 0x10de, class 0x03xx)
    local d vendor class
    for d in "$R"/sys/bus/pci/devices/*; do
        [ -r "$d/vendor" ] || continue
        read -r vendor <"$d/vendor"
        [ "$vendor" = "0x10de" ] || continue
        class=""
        [ -r "$d/class" ] && read -r class <"$d/class"
        case "$class" in 0x0300*|0x0302*) norm_bus "${d##*/}"; echo ;; esac
    done
}
missing_json() {  # the GPUs on the PCI bus that nvidia-smi does not list
    local listed=" " b rest bus first=1 out="["
    while IFS='|' read -r b rest; do listed="$listed$(norm_bus "$b") "; done <"$WORK/gpus.txt"
    for bus in $(pci_nvidia_gpus); do
        case "$listed" in *" $bus "*) continue ;; esac
        [ $first -eq 1 ] || out="$out,"
        first=0
        out="$out{\"bus\":$(js "$bus" 16),\"serial\":\"\"}"
    done
    printf '%s]' "$out"
}
fallback_nvidia() {
    local want=${AZGPU_EXPECT_GPUS:-0} n first line bus serial mem name min pci lost rc
    nvidia_gpus
    if hung "$SMI_RC"; then
        add_failure nvidia-smi nvidia_smi_hang "nvidia-smi -q did not answer within ${AZGPU_SMI_TIMEOUT:-120} s" \
            "an answer" "no answer (timed out)"
        return
    fi
    if [ "$SMI_RC" -eq 127 ] || [ "$SMI_RC" -eq 126 ]; then
        # No nvidia-smi at all: the image lacks the driver's tools, which no new host changes.
        add_failure nvidia-smi tool_missing "nvidia-smi is not installed or not executable (exit $SMI_RC)" \
            "nvidia-smi" "exit $SMI_RC"
        return
    fi
    if [ "$SMI_RC" -eq 9 ]; then
        # nvidia-smi(1), RETURN VALUE: 9 "NVIDIA driver is not loaded" (AzNHC's csc_nvidia_smi.nhc: NHCNA). The
        # image's driver or this host: proven only when another host with the same image loads it.
        first=$(grep -v '^[[:space:]]*$' "$WORK/smi.txt" | head -n 1)
        add_failure nvidia-smi driver_not_loaded "NVIDIA driver not loaded (nvidia-smi exit 9): $first" \
            "a loaded driver" "exit 9"
        return
    fi
    if [ "$SMI_RC" -ne 0 ]; then
        # "Unable to determine the device handle for GPU 0000:...: GPU is lost. Reboot the system to
        # recover this GPU" (the driver's words for a GPU that fell off the bus, with or without an Xid).
        lost=$(grep -m 1 -i 'GPU is lost' "$WORK/smi.txt")
        if [ -n "$lost" ]; then
            bus=$(printf '%s' "$lost" | grep -oE '[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]' | head -n 1)
            add_failure nvidia-smi gpu_lost "$lost" "all GPUs answer" "GPU ${bus:-?} lost" "" "" \
                "$( [ -n "$bus" ] && gpu_ref "$bus" || printf '[]')"
            return
        fi
        if grep -qi 'No devices were found' "$WORK/smi.txt"; then
            : >"$WORK/gpus.txt"  # the driver sees none: count them against the PCI bus below
        else
            first=$(grep -v '^[[:space:]]*$' "$WORK/smi.txt" | head -n 1)
            add_failure nvidia-smi nvidia_smi_error "nvidia-smi -q failed (exit $SMI_RC): $first" "exit 0" "exit $SMI_RC"
            return
        fi
    fi
    n=$(grep -c . "$WORK/gpus.txt")
    GPUS_FOUND=$n
    if [ "$n" -lt "$want" ]; then
        pci=$(pci_nvidia_gpus | grep -c .)
        add_failure gpu_count missing_gpu "nvidia-smi lists $n of $want GPUs ($pci on the PCI bus)" "$want" "$n" \
            "" "" "$(missing_json)"
    elif [ "$n" -gt "$want" ]; then
        add_failure gpu_count gpu_count "nvidia-smi lists $n GPUs, the size has $want" "$want" "$n"
    fi
    min=${AZGPU_GPU_MEMORY_MIB_MIN:-0}
    local sv sa dv da rp rf sbe dbe pbl fst fss fcl fcu ref
    while IFS='|' read -r bus serial mem name sv sa dv da rp rf sbe dbe pbl fst fss fcl fcu; do
        ref=$(gpu_ref "$bus" "$serial")
        bus=$(norm_bus "$bus")
        case "$mem" in ''|*[!0-9]*) ;; *)
            if [ "$min" -gt 0 ] && [ "$mem" -lt "$min" ]; then
                add_failure gpu_memory gpu_memory "GPU $bus ($name) has $mem MiB" ">= $min MiB" "$mem MiB" "" "" "$ref"
            fi ;;
        esac
        # AzNHC's check_gpu_ecc (customTests/azure_gpu_ecc.nhc): a row remap pending or failed is NHC2007,
        # any uncorrectable SRAM error and DRAM errors above the conf's threshold are NHC2019.
        [ "$rp" = Yes ] && add_failure gpu_ecc gpu_row_remap "GPU $bus: row remap pending" "no remap pending" \
            "remap pending" NHC2007 "" "$ref"
        [ "$rf" = Yes ] && add_failure gpu_ecc gpu_row_remap "GPU $bus: row remapping failure occurred" \
            "no remap failure" "remap failure" NHC2007 "" "$ref"
        if [ "${sv:-0}" -gt 0 ] || [ "${sa:-0}" -gt 0 ]; then
            add_failure gpu_ecc gpu_ecc "GPU $bus: uncorrectable SRAM ECC errors (volatile $sv, aggregate $sa)" \
                "0 uncorrectable" "volatile $sv, aggregate $sa" NHC2019 "" "$ref"
        fi
        if [ "${dv:-0}" -gt "${AZGPU_ECC_DRAM_MAX:-20000000}" ] || [ "${da:-0}" -gt "${AZGPU_ECC_DRAM_MAX:-20000000}" ]; then
            add_failure gpu_ecc gpu_ecc "GPU $bus: uncorrectable DRAM ECC errors (volatile $dv, aggregate $da)" \
                "<= ${AZGPU_ECC_DRAM_MAX:-20000000}" "volatile $dv, aggregate $da" NHC2019 "" "$ref"
        fi
        # Page retirement (GPUs before A100; N/A on those that remap rows): AzNHC's check_SDBE_ecc.
        case "$sbe$dbe" in *[!0-9]*|'') ;; *)
            if [ $((sbe + dbe)) -ge 62 ] && [ "$pbl" = Yes ]; then
                add_failure gpu_ecc gpu_retired_pages "GPU $bus: page retirement table full ($((sbe + dbe)) pages, blacklist pending)" \
                    "< 62 retired pages" "$((sbe + dbe)) pages" NHC2018 "" "$ref"
            fi ;;
        esac
        if [ "${AZGPU_CHECK_FABRIC:-0}" = 1 ]; then
            printf '%s|%s|%s|%s|%s\n' "$fst" "$fss" "$fcl" "$fcu" "$bus|$serial" >>"$WORK/fabric.txt"
            if [ "$fst" != Completed ] || [ "$fss" != Success ]; then
                add_failure fabric fabric "GPU $bus: NVLink fabric state $fst, status $fss" "Completed Success" \
                    "$fst $fss" "" "" "$ref"
            fi
        fi
    done <"$WORK/gpus.txt"
    if [ "${AZGPU_CHECK_NVLINK:-0}" = 1 ] && [ "$n" -gt 1 ]; then
        tmo 60 nvidia-smi nvlink -s >"$WORK/nvlink.txt" 2>&1
        rc=$?
        logged "nvidia-smi nvlink -s" "$WORK/nvlink.txt" $rc
        # An empty answer means NVLink is not exposed to this VM: nothing to judge. A failed query is not a
        # pass: AzNHC's check_nvlink_status fails it as NHC2016 (customTests/azure_gpu_nvlink.nhc).
        if [ $rc -ne 0 ] && ! grep -qiE 'inactive|Unable to retrieve NVLink' "$WORK/nvlink.txt"; then
            line=$(grep -v '^[[:space:]]*$' "$WORK/nvlink.txt" | head -n 1)
            add_failure nvlink nvlink "nvidia-smi nvlink -s failed (exit $rc): $line" \
                "exit 0" "exit $rc" NHC2016
        elif grep -qiE 'inactive|Unable to retrieve NVLink' "$WORK/nvlink.txt"; then
            line=$(grep -iE -B1 'inactive|Unable to retrieve NVLink' "$WORK/nvlink.txt" | grep -E '^GPU [0-9]+' | head -n 1)
            add_failure nvlink nvlink "NVLink down: ${line%% (UUID*} $(grep -iE 'inactive|Unable' "$WORK/nvlink.txt" | head -n 1)" \
                "all links active" "inactive links"
        fi
    fi
    [ "${AZGPU_CHECK_FABRIC:-0}" = 1 ] && fabric_node && imex
}
FABRIC_JSON=""
fabric_node() {  # the node's fabric (every GPU's agreeing, else incomplete) for the rack grouping
    local st ss cl cu first=1 agree=1 complete=true a b c d bus serial
    [ -s "$WORK/fabric.txt" ] || return 0
    while IFS='|' read -r a b c d bus serial; do
        if [ $first = 1 ]; then st=$a; ss=$b; cl=$c; cu=$d; first=0
        elif [ "$a|$b|$c|$d" != "$st|$ss|$cl|$cu" ]; then agree=0; fi
    done <"$WORK/fabric.txt"
    # GPUs that disagree: each registered GPU is judged on its own, as verify_nvlink_setup judges every GPU's
    # Fabric block (one GPU with an all-zero ClusterUUID among good ones passed before).
    [ $agree = 1 ] || while IFS='|' read -r a b c d bus serial; do
        [ "$a" = Completed ] && [ "$b" = Success ] || continue
        case "$d" in ''|N/A|00000000-0000-0000-0000-000000000000) ;; *)
            case "$c" in ''|*[!0-9]*|0) ;; *) continue ;; esac ;; esac
        add_failure fabric fabric "GPU $bus: NVLink fabric without a valid ClusterUUID or CliqueId (${d:-none}, ${c:-none})" \
            "non-zero ClusterUUID and CliqueId" "${d:-none} ${c:-none}" "" "" "$(gpu_ref "$bus" "$serial")"
    done <"$WORK/fabric.txt"
    [ $agree = 1 ] && [ "$st" = Completed ] && [ "$ss" = Success ] || complete=false
    local zero=""
    # Microsoft's image test (Azure/azhpc-images tests/test-definitions.sh, verify_nvlink_setup) fails a GPU
    # whose ClusterUUID is empty or all zeros ("expected valid non-zero UUID") or whose CliqueId is 0.
    case "$cu" in 00000000-0000-0000-0000-000000000000) zero=$cu; cu=""; complete=false ;; esac
    case "$cu" in ''|N/A) cu=""; complete=false ;; esac
    case "$cl" in ''|*[!0-9]*|0) complete=false ;; esac
    case "$cl" in ''|*[!0-9]*) cl="" ;; esac
    FABRIC_JSON="{\"clusterUuid\":$( [ -n "$cu" ] && js "$cu" 64 || printf null),\"cliqueId\":$(jn "$cl"),\"state\":$(js "$st" 32),\"status\":$(js "$ss" 32),\"complete\":$complete}"
    if [ $agree = 1 ] && [ "$st" = Completed ] && { [ -z "$cu" ] || [ "${cl:-0}" = 0 ]; }; then
        add_failure fabric fabric \
            "NVLink fabric without a valid ClusterUUID or CliqueId (${zero:-${cu:-none}}, ${cl:-none})" \
            "non-zero ClusterUUID and CliqueId" "${zero:-${cu:-none}} ${cl:-none}"
    fi
    return 0
}
imex() {  # the IMEX service and its channel (azhpc-images verify_nvidia_imex_service)
    local state
    if [ "${AZGPU_IMEX_SERVICE:-active}" = installed ]; then
        # Slurm nodes (azgpu/imex.py): each job's prolog starts nvidia-imex for the job's nodes and its
        # epilog stops it, so outside a job the image need only have the service.
        tmo 15 systemctl cat nvidia-imex.service >/dev/null 2>&1 && state=installed || state=missing
        printf '==== systemctl cat nvidia-imex.service\n%s\n' "$state"
        [ "$state" = installed ] || add_failure imex imex_service "no nvidia-imex service" "installed" "$state"
    else
        state=$(tmo 15 systemctl is-active nvidia-imex 2>&1 | head -n 1)
        printf '==== systemctl is-active nvidia-imex\n%s\n' "$state"
        [ "$state" = active ] || add_failure imex imex_service "nvidia-imex service is ${state:-unknown}" "active" "${state:-unknown}"
    fi
    [ -e "$R/dev/nvidia-caps-imex-channels/channel0" ] || add_failure imex imex_channel \
        "no IMEX channel /dev/nvidia-caps-imex-channels/channel0" "channel0" "absent"
}
fallback_amd() {
    local want=${AZGPU_EXPECT_GPUS:-0} rc n first
    tmo "${AZGPU_SMI_TIMEOUT:-120}" rocm-smi --showbus >"$WORK/rocm.txt" 2>&1
    rc=$?
    logged "rocm-smi --showbus" "$WORK/rocm.txt" $rc
    if hung $rc; then
        add_failure rocm-smi rocm_smi_hang "rocm-smi did not answer within ${AZGPU_SMI_TIMEOUT:-120} s" "an answer" \
            "no answer (timed out)"
        return
    fi
    if [ $rc -eq 127 ] || [ $rc -eq 126 ]; then
        add_failure rocm-smi tool_missing "rocm-smi is not installed or not executable (exit $rc)" "rocm-smi" "exit $rc"
        return
    fi
    if [ $rc -ne 0 ]; then
        first=$(grep -v '^[[:space:]]*$' "$WORK/rocm.txt" | head -n 1)
        add_failure rocm-smi rocm_smi_error "rocm-smi --showbus failed (exit $rc): $first" "exit 0" "exit $rc"
        return
    fi
    n=$(grep -c 'PCI Bus:' "$WORK/rocm.txt")
    GPUS_FOUND=$n
    grep 'PCI Bus:' "$WORK/rocm.txt" | sed 's/.*PCI Bus: *//' | while read -r b; do echo "$b||0|AMD"; done >"$WORK/gpus.txt"
    if [ "$n" -lt "$want" ]; then
        add_failure gpu_count missing_gpu "rocm-smi lists $n of $want GPUs" "$want" "$n"
    fi
}
XIDS=${AZGPU_XIDS:-48 56 57 58 62 63 64 65 68 69 73 74 79 80 81 92 94 95 119 120}
XID_LINE='NVRM: Xid \((PCI:)?([0-9A-Fa-f:.]+)\): ([0-9]+),'
scan_xids() {  # Xids of this boot's kernel log that AzNHC's check_gpu_xid treats as faults (+94, 95)
    local line xid pci seen=" " gpus bus serial rest rc
    tmo 60 dmesg >"$WORK/dmesg.txt" 2>&1
    rc=$?
    grep -E 'NVRM' "$WORK/dmesg.txt" >"$WORK/nvrm.txt"
    logged "dmesg (NVRM lines)" "$WORK/nvrm.txt" $rc
    if [ $rc -ne 0 ]; then
        # Not a pass: run by hand as a user other than root where kernel.dmesg_restrict=1, dmesg answers
        # "read kernel buffer failed: Operation not permitted" (exit 1), and the Xids were never looked at.
        line=$(grep -v '^[[:space:]]*$' "$WORK/dmesg.txt" | head -n 1)
        add_failure xid check_not_run \
            "the kernel log could not be read (dmesg exit $rc: ${line:-no output}): Xids were not checked" \
            "a readable kernel log" "dmesg exit $rc"
        return 0
    fi
    while IFS= read -r line; do
        [[ $line =~ $XID_LINE ]] || continue
        xid=${BASH_REMATCH[3]}
        pci=${BASH_REMATCH[2],,}
        case " $XIDS " in *" $xid "*) ;; *) continue ;; esac
        case "$seen" in *" $xid@$pci "*) continue ;; esac
        seen="$seen$xid@$pci "
        gpus="[{\"bus\":$(js "$pci" 16),\"serial\":\"\"}]"
        while IFS='|' read -r bus serial rest; do
            case "$(norm_bus "$bus")" in "$pci"*)  # the driver writes domain:bus:device
                gpus="[{\"bus\":$(js "$(norm_bus "$bus")" 16),\"serial\":$(js "$serial" 32)}]" ;; esac
        done <"$WORK/gpus.txt"
        add_failure xid xid "Xid $xid on GPU $pci: ${line#*NVRM: }" "no Xid" "Xid $xid" "" "$xid" "$gpus"
    done < <(grep -E 'NVRM: Xid \(' "$WORK/nvrm.txt")
}

# ---------------------------------------------------------------------------------- InfiniBand
port_state() {  # sysfs port dir -> "STATE PHYS RATE": "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)"
    local p=$1 state="" phys="" rate=""  # (kernel drivers/infiniband/core/sysfs.c formats)
    [ -r "$p/state" ] && read -r _ state <"$p/state"
    [ -r "$p/phys_state" ] && read -r _ phys <"$p/phys_state"
    [ -r "$p/rate" ] && read -r rate _ <"$p/rate"
    printf '%s %s %s' "${state:-?}" "${phys:-?}" "${rate:-?}"
}
fallback_ib() {
    local want=${AZGPU_EXPECT_IB_PORTS:-0} rate=${AZGPU_EXPECT_IB_RATE:-0} base=$R/sys/class/infiniband n=0 p dev ll s ph r
    [ "$want" -gt 0 ] || return 0
    for p in "$base"/*/ports/*; do
        [ -d "$p" ] || continue
        # Accelerated networking's mlx5_an0 is an Ethernet port: only InfiniBand ones count.
        ll=""
        [ -r "$p/link_layer" ] && read -r ll <"$p/link_layer"
        [ "$ll" = InfiniBand ] || continue
        n=$((n + 1))
        dev=${p%/ports/*}
        dev=${dev##*/}:${p##*/}
        read -r s ph r <<<"$(port_state "$p")"
        printf 'port %s: %s %s %s\n' "$dev" "$s" "$ph" "$r"
        if [ "$s" != ACTIVE ] || [ "$ph" != LinkUp ]; then
            add_failure ib_port ib_port_down "InfiniBand port $dev is $s ($ph)" "ACTIVE LinkUp" "$s $ph" "" "" "" "$dev"
        elif [ "$rate" -gt 0 ] && [ "$r" != "$rate" ]; then
            read -r ll <"$p/rate"
            add_failure ib_port ib_port_rate "InfiniBand port $dev runs at $ll" "$rate Gb/sec" \
                "$r Gb/sec" "" "" "" "$dev"
        fi
    done
    IB_FOUND=$n
    if [ "$n" -lt "$want" ]; then
        add_failure ib_port ib_missing "$n of $want InfiniBand ports present" "$want ports" "$n ports"
    fi
}

# ---------------------------------------------------------------------------------- AzNHC
# AzNHC's checks that test the host and say what they found (customTests/*.nhc, LBNL NHC check_hw_ib):
# their findings come first in the verdict.
HOST_CHECKS=" check_gpu_count check_gpu_xid check_nvsmi_healthmon check_gpu_persistence check_nvlink_status check_gpu_ecc check_gpu_bw check_cuda_bw check_gpu_clock_throttling check_app_gpu_clocks check_gpu_vbios check_gpu_xgmi check_hw_ib check_ib_link_flapping check_ib_bw_gdr check_ib_bw_non_gdr check_nccl_allreduce_ib_loopback check_nccl_allreduce check_rccl_allreduce check_nvme_count check_cpu_stream "
aznhc_digest() {  # AzNHC's failure lines (log and stdout, each once) -> findings
    local line msg check code exp meas xid port st tier gref
    while IFS= read -r msg; do
        check=aznhc
        # LBNL NHC's watchdog (AzNHC's -t covers the whole run): the run stopped, the check did not fail.
        if [[ $msg =~ Script\ timed\ out\ while\ executing\ \"?([A-Za-z0-9_]*) ]]; then
            add_failure "${BASH_REMATCH[1]:-aznhc}" aznhc_watchdog "$msg" "finished within -t ${AZNHC_T:-?} s" \
                "AzNHC's watchdog ended the run" "" "" "" "" 2
            continue
        fi
        if [[ $msg =~ ^(check_[A-Za-z0-9_]+): ]]; then check=${BASH_REMATCH[1]}
        elif [[ $msg =~ (check_[A-Za-z0-9_]+) ]]; then check=${BASH_REMATCH[1]}; fi
        code=""
        # AzNHC spells it FaultCode, faultCode and (once) FauleCode.
        [[ $msg =~ [Ff]aul[te][Cc]ode:[[:space:]]*(NHC[A-Za-z0-9]+) ]] && code=${BASH_REMATCH[1]}
        exp=""; meas=""; xid=""; port=""
        if [[ $msg =~ Expected\ to\ see\ ([^ ]+)\ but\ found\ ([0-9]+) ]]; then
            exp=${BASH_REMATCH[1]}; meas=${BASH_REMATCH[2]}
        elif [[ $msg =~ [Ee]xpected\ \>=?\ ?([0-9.]+)\ ?(GB/s|Gbps) ]]; then
            exp=">= ${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
            [[ $msg =~ measured\ ([0-9.]+)\ ?(GB/s|Gbps) ]] && meas="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
        elif [[ $msg =~ Bandwidth\ ([0-9.]+)\ is\ less\ than\ ([0-9.]+) ]]; then
            meas=${BASH_REMATCH[1]}; exp=">= ${BASH_REMATCH[2]}"
        elif [[ $msg =~ No\ IB\ port\ ([^ ]+)\ is\ ([A-Z_]+)\ \(([A-Za-z]+)\ ([0-9]+)\ Gb/sec\) ]]; then
            port=${BASH_REMATCH[1]}
            exp="${BASH_REMATCH[2]} ${BASH_REMATCH[3]} ${BASH_REMATCH[4]} Gb/sec"
            # check_hw_ib says what it wanted, not what it found: read the port.
            st="$R/sys/class/infiniband/${port%%:*}/ports/${port##*:}"
            case "$port" in *..*|*/*) st="" ;; esac
            if [ -n "$st" ] && [ -d "$st" ]; then meas="$(port_state "$st") Gb/sec"; else meas=absent; fi
        fi
        if [[ $msg =~ Xid\ \([^\)]*\):\ ([0-9]+), ]]; then xid=${BASH_REMATCH[1]}; meas="Xid $xid"; exp="no Xid"; fi
        # The GPU a finding names (customTests: "NVRM: Xid (PCI:0002:00:00)", "GPU id 3:", "GPU 2 has", "on GPU 1"):
        # resolved to its bus id and serial once nvidia-smi -q has been read (resolve_gpu_refs).
        gref=""
        if [[ $msg =~ PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}) ]]; then gref="@pci:${BASH_REMATCH[1],,}"
        elif [[ $msg =~ GPU\ id\ ([0-9]{1,3}) ]]; then gref="@idx:${BASH_REMATCH[1]}"
        elif [[ $msg =~ GPU\ ([0-9]{1,3})([^0-9A-Fa-f.:]|$) ]]; then gref="@idx:${BASH_REMATCH[1]}"; fi
        tier=1
        case "$HOST_CHECKS" in *" $check "*) tier=0 ;; esac
        case "$code" in NHCNA) tier=2 ;; NHC20[0-2][0-9]) [ "$code" != NHC2023 ] && [ "$code" != NHC2010 ] && tier=0 ;; esac
        add_failure "$check" "" "$msg" "$exp" "$meas" "$code" "$xid" "$gref" "$port" "$tier"
        case "$check" in check_gpu_*|check_nvsmi_*|check_nvlink_*) GPU_FAULT=1 ;; esac
        # nvidia-smi failed or hung under AzNHC: azgpu does not start it again for the GPU inventory.
        [ "$check" = check_nvsmi_healthmon ] && SMI_RC=125 && : >"$WORK/gpus.txt"
    done < <(cat "$@" 2>/dev/null | tr -d '\r' | grep -a 'Health check failed:' | sed -E 's/.*Health check failed:[[:space:]]*//; s/^-e //' | awk '!seen[$0]++')
}
resolve_gpu_refs() {  # findings that name a GPU by PCI address or index (@pci:..., @idx:N): bus id and serial
    local i ref want n bus serial rest b found buses=() refs=()
    if [ -f "$WORK/gpus.txt" ]; then
        while IFS='|' read -r bus serial rest; do  # read once: 200 findings must not read it 200 times
            b=${bus,,}
            b=${b: -12}
            jsr "$b" 16; found="[{\"bus\":$JS"
            jsr "$serial" 32; found="$found,\"serial\":$JS}]"
            buses+=("$b")
            refs+=("$found")
        done <"$WORK/gpus.txt"
    fi
    for ((i = 0; i < NF; i++)); do
        ref=${F_GPUS[i]}
        case "$ref" in @*) ;; *) continue ;; esac
        want=${ref#@*:}
        found=""
        case "$ref" in
            @idx:*) n=$((10#$want)); [ "$n" -lt ${#refs[@]} ] && found=${refs[n]} ;;
            @pci:*) for ((n = 0; n < ${#buses[@]}; n++)); do
                        case "${buses[n]}" in "${want: -10}"*) found=${refs[n]}; break ;; esac
                    done
                    if [ -z "$found" ]; then jsr "${want: -10}" 16; found="[{\"bus\":$JS,\"serial\":\"\"}]"; fi ;;
        esac
        F_GPUS[i]=$found
    done
}
run_aznhc() {  # sets AZNHC=ran|unsupported|missing|failed|timeout; findings from its log and stdout
    local script=$R/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh rc
    AZNHC_LOG=$LOGDIR/aznhc-$(date -u +%Y%m%dT%H%M%SZ)-$$.log
    if [ ! -f "$script" ]; then AZNHC=missing; AZNHC_LOG=""; return; fi
    ( set -C; : >"$AZNHC_LOG" ) 2>/dev/null || AZNHC_LOG=$WORK/aznhc.log
    # -a: every check, not only up to the first failure. -t is LBNL NHC's watchdog for the whole run
    # (facts 14.2), not a per-check limit: the run's budget; timeout(1) backs it with a minute more.
    AZNHC_T=${AZGPU_AZNHC_TIMEOUT:-3480}
    tmo $((AZNHC_T + 60)) bash "$script" -a -t "$AZNHC_T" -o "$AZNHC_LOG" >"$WORK/aznhc.out" 2>&1
    rc=$?
    logged "AzNHC run-health-checks.sh -a -t $AZNHC_T (stdout and stderr)" "$WORK/aznhc.out" $rc
    aznhc_digest "$AZNHC_LOG" "$WORK/aznhc.out"
    if [ $NF -gt 0 ]; then
        AZNHC=ran
    elif grep -qs 'is currently not supported by Azure health checks' "$WORK/aznhc.out" "$AZNHC_LOG"; then
        AZNHC=unsupported
    elif hung $rc; then
        AZNHC=timeout
        add_failure aznhc aznhc_timeout "AzNHC did not finish within $((AZNHC_T + 60)) s" "finished" "timed out" \
            "" "" "" "" 2
    elif [ $rc -eq 0 ]; then
        AZNHC=ran
    else
        AZNHC=failed
        AZNHC_ERROR="exit $rc: $(grep -v '^[[:space:]]*$' "$WORK/aznhc.out" | tail -n 1)"
    fi
    if [ -z "$PHYS" ]; then
        PHYS=$(sed -n 's/^ *PHYSICAL HOST NAME: *//p' "$AZNHC_LOG" 2>/dev/null | tail -n 1)
    fi
}

# ---------------------------------------------------------------------------------- verdict
ORDER=()
LINE=""
verdict_line() {  # extra, findings kept (the first of FJSON), dropped json -> LINE
    local list="" p
    for ((p = 0; p < $2; p++)); do list="$list${list:+,}${FJSON[p]}"; done
    printf -v LINE '{"azgpu_health":1,"mode":%s,%s,"failures":[%s],"more":%d,"dropped":{%s},"log":%s,"seconds":%d}' \
        "$V_MODE" "$1" "$list" $((NF + ${#EXTRA_DROPPED[@]} - $2)) "$3" "$V_LOG" "$V_SECONDS"
}
dropped_json() {  # keep: per fault code (or check) counts of the findings left out, so none is lost
    local keep=$1 i k out="" keys=()
    for ((i = keep; i < NF; i++)); do
        k=${F_CODE[ORDER[i]]}
        [ -n "$k" ] || k=${F_KIND[ORDER[i]]:-${F_CHECK[ORDER[i]]}}
        keys+=("$k")
    done
    keys+=("${EXTRA_DROPPED[@]+"${EXTRA_DROPPED[@]}"}")
    [ ${#keys[@]} -gt 0 ] || return 0
    printf '%s\n' "${keys[@]}" | sort | uniq -c | head -n 16 | while read -r n k; do
        [ -n "$out" ] && printf ','
        out=1
        printf '%s:%d' "$(js "$k" 40)" "$n"
    done
}
verdict() {  # the one line: host faults first, messages shortened before any finding is dropped
    # Linear in the findings (200 of them assemble in well under a second): each finding's JSON is made
    # once per message length, and the findings that fit are found by bisection, not one drop at a time.
    local extra=$1 t i len lo hi mid
    ORDER=()
    for t in 0 1 2; do
        for ((i = 0; i < NF; i++)); do [ "${F_TIER[i]}" = "$t" ] && ORDER+=("$i"); done
    done
    jsr "${AZGPU_MODE:-check}"; V_MODE=$JS
    jsr "${LOG#"$R"}" 120; V_LOG=$JS
    V_SECONDS=$(($(date +%s) - START))
    local all
    all=$(dropped_json "$NF")
    for len in $MAXMSG 80 40 0; do
        failures_json "$len"
        verdict_line "$extra" "$NF" "$all"
        [ ${#LINE} -le $BUDGET ] && break
    done
    if [ ${#LINE} -gt $BUDGET ]; then
        # Keeping fewer findings only shortens the line (a finding is longer than its count in "dropped").
        lo=0
        hi=$NF
        while [ $lo -lt $hi ]; do
            mid=$(((lo + hi + 1) / 2))
            verdict_line "$extra" "$mid" "$(dropped_json "$mid")"
            if [ ${#LINE} -le $BUDGET ]; then lo=$mid; else hi=$((mid - 1)); fi
        done
        verdict_line "$extra" "$lo" "$(dropped_json "$lo")"
    fi
    printf '%s\n' "$LINE" >"$VERDICT"
}
host_json() {
    printf '"host":{"computer":%s,"physical_host":%s,"vm_id":%s,"vm_id_source":%s,"vm_size":%s}' \
        "$(js "$COMPUTER" 64)" "$(js "$PHYS" 64)" "$(js "$VMID" 40)" "$(js "$VMID_SOURCE")" "$(js "$VMSIZE" 48)"
}

check() {
    GPUS_FOUND=""; IB_FOUND=""; AZNHC=""; AZNHC_ERROR=""; AZNHC_LOG=""
    identity
    run_aznhc
    CHECKER=aznhc
    if [ "$AZNHC" != ran ] && [ "$AZNHC" != timeout ]; then
        CHECKER=fallback
        if [ "${AZGPU_GPU_VENDOR:-nvidia}" = amd ]; then fallback_amd; else fallback_nvidia; fi
        fallback_ib
        [ "${AZGPU_GPU_VENDOR:-nvidia}" = nvidia ] && scan_xids
    elif [ "${AZGPU_CHECK_FABRIC:-0}" = 1 ]; then
        nvidia_gpus
        [ "$SMI_RC" -eq 0 ] && while IFS='|' read -r bus serial _ _ _ _ _ _ _ _ _ _ _ a b c d; do
            printf '%s|%s|%s|%s|%s\n' "$a" "$b" "$c" "$d" "$(norm_bus "$bus")|$serial" >>"$WORK/fabric.txt"
            if [ "$a" != Completed ] || [ "$b" != Success ]; then  # AzNHC does not look at the fabric
                add_failure fabric fabric "GPU $(norm_bus "$bus"): NVLink fabric state $a, status $b" \
                    "Completed Success" "$a $b" "" "" "$(gpu_ref "$bus" "$serial")"
            fi
        done <"$WORK/gpus.txt"
        fabric_node
    fi
    local inventory="" extra
    if [ "$GPU_FAULT" = 1 ] && [ "${AZGPU_GPU_VENDOR:-nvidia}" = nvidia ]; then
        nvidia_gpus  # answers from the first call, if there was one: a hung tool is not asked again
        inventory=",\"gpus\":$(gpu_inventory_json)"
    fi
    resolve_gpu_refs
    extra="\"checker\":$(js "$CHECKER"),\"aznhc\":$(js "${AZNHC:-missing}"),$(host_json)"
    [ -n "$AZNHC_ERROR" ] && extra="$extra,\"aznhc_error\":$(js "$AZNHC_ERROR" 160)"
    [ -n "$AZNHC_LOG" ] && [ -f "$AZNHC_LOG" ] && extra="$extra,\"aznhc_log\":$(js "${AZNHC_LOG#"$R"}" 120)"
    extra="$extra,\"gpus_found\":$(jn "$GPUS_FOUND"),\"ib_found\":$(jn "$IB_FOUND")$inventory"
    [ -n "$FABRIC_JSON" ] && extra="$extra,\"fabric\":$FABRIC_JSON"
    verdict "$extra"
}

# ---------------------------------------------------------------------------------- multi-node NCCL
admin_home() { printf '%s/home/%s' "$R" "${AZGPU_ADMIN_USER:?}"; }
# One OpenSSH public key line made by nccl-keygen: type, base64 blob, the comment azgpu-nccl. Anything
# else (a second line, options, another comment) is refused: it would be written into authorized_keys.
KEY_RE='^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5[A-Za-z0-9+/]{20,200}={0,2} azgpu-nccl$'
nccl_keygen() {
    local dir
    dir=$(admin_home)/.azgpu-nccl
    rm -rf "$dir"
    mkdir -p -m 700 "$dir"
    tmo 60 ssh-keygen -q -t ed25519 -N '' -C azgpu-nccl -f "$dir/id_ed25519"
    chown -R "${AZGPU_ADMIN_USER}:" "$dir" 2>/dev/null
    verdict "\"ok\":true,\"pubkey\":$(js "$(head -c 400 "$dir/id_ed25519.pub" 2>/dev/null)" 200)"
}
drop_key() {  # authorized_keys without the lines azgpu added for this key (and nothing else)
    local keys=$1 key=$2
    [ -f "$keys" ] && [ ! -L "$keys" ] || return 0
    awk -v k=" $key" 'index($0, "from=\"") != 1 || substr($0, length($0) - length(k) + 1) != k' "$keys" >"$WORK/keys"
    cat "$WORK/keys" >"$keys"
}
nccl_trust() {  # only the launcher's address, and only until the expiry time (OpenSSH authorized_keys,
                # in the node's time zone: UTC on the Azure images)
    local ssh key=${AZGPU_NCCL_PUBKEY:-}
    if ! [[ $key =~ $KEY_RE ]] || ! [[ ${AZGPU_NCCL_FROM:-} =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || \
       ! [[ ${AZGPU_NCCL_EXPIRY:-} =~ ^[0-9]{12}$ ]]; then
        verdict "\"ok\":false,\"error\":\"refused: not one azgpu-nccl public key, an IPv4 address and an expiry time\""
        return
    fi
    ssh=$(admin_home)/.ssh
    mkdir -p -m 700 "$ssh"
    [ -L "$ssh/authorized_keys" ] && { verdict "\"ok\":false,\"error\":\"authorized_keys is a symbolic link\""; return; }
    touch "$ssh/authorized_keys"
    drop_key "$ssh/authorized_keys" "$key"
    printf 'from="%s",expiry-time="%s",no-agent-forwarding,no-X11-forwarding %s\n' "$AZGPU_NCCL_FROM" \
        "$AZGPU_NCCL_EXPIRY" "$key" >>"$ssh/authorized_keys"
    chmod 600 "$ssh/authorized_keys"
    chown "${AZGPU_ADMIN_USER}:" "$ssh" "$ssh/authorized_keys" 2>/dev/null
    verdict "\"ok\":true"
}
nccl_untrust() {  # every node after the check, the launcher too: the key accepted, and the key pair made here
    local key=${AZGPU_NCCL_PUBKEY:-}
    if [[ $key =~ $KEY_RE ]]; then
        drop_key "$(admin_home)/.ssh/authorized_keys" "$key"
    fi
    rm -rf "$(admin_home)/.azgpu-nccl"
    verdict "\"ok\":true"
}
nccl_run() {
    local dir hosts=$WORK/hostfile np exe rc busbw size wrong line kv args=()
    dir=$(admin_home)/.azgpu-nccl
    for line in ${AZGPU_NCCL_HOSTS:?}; do echo "$line slots=${AZGPU_EXPECT_GPUS:?}"; done >"$hosts"
    chmod 644 "$hosts"
    np=$(( $(grep -c . "$hosts") * AZGPU_EXPECT_GPUS ))
    exe=/opt/nccl-tests/build/all_reduce_perf
    [ "${AZGPU_GPU_VENDOR:-nvidia}" = amd ] && exe=/opt/rccl-tests/all_reduce_perf
    for kv in ${AZGPU_NCCL_ENV:-}; do args+=(-x "$kv"); done
    # HPC-X's mpirun as the admin user, reaching the others over ssh with the launcher's key.
    tmo "${AZGPU_NCCL_TIMEOUT:-1200}" runuser -u "$AZGPU_ADMIN_USER" -- bash -c '
        [ -r "$1" ] && . "$1" && module load mpi/hpcx
        shift
        exec mpirun "$@"' azgpu-nccl "$R/etc/profile.d/modules.sh" -np "$np" --map-by "ppr:${AZGPU_EXPECT_GPUS}:node" -hostfile "$hosts" \
        --mca plm_rsh_args "-i $dir/id_ed25519 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null" \
        -x LD_LIBRARY_PATH "${args[@]+"${args[@]}"}" "$exe" -b "${AZGPU_NCCL_BYTES:-8G}" -e "${AZGPU_NCCL_BYTES:-8G}" \
        -f 2 -g 1 -c 1 -n "${AZGPU_NCCL_ITERS:-20}" >"$WORK/nccl.txt" 2>&1
    rc=$?
    logged "all_reduce_perf" "$WORK/nccl.txt" $rc  # into the node's log: no copy through a path a user could plant
    rm -rf "$dir"
    # The last data row is the largest message: its out-of-place bus bandwidth (column 8) and #wrong.
    line=$(grep -E '^ *[0-9]+ +[0-9]+ +[a-z0-9]+ ' "$WORK/nccl.txt" | tail -n 1)
    size=$(printf '%s' "$line" | awk '{print $1}')
    busbw=$(printf '%s' "$line" | awk '{print $8}')
    wrong=$(printf '%s' "$line" | awk '{print $9}')
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        verdict "\"ok\":false,\"exit\":$rc,\"ranks\":$np,\"error\":$(js "$(grep -v '^[[:space:]]*$' "$WORK/nccl.txt" | tail -n 3 | tr '\n' ' ')" 400)"
    else
        verdict "\"ok\":true,\"ranks\":$np,\"size_bytes\":$(jn "$size"),\"busbw_gbps\":$(jn "$busbw"),\"wrong\":$(jn "$wrong")"
    fi
}

main() {
    case "${AZGPU_MODE:-check}" in
        check) check ;;
        nccl-keygen) nccl_keygen ;;
        nccl-trust) nccl_trust ;;
        nccl-run) nccl_run ;;
        nccl-untrust) nccl_untrust ;;
        *) printf '{"azgpu_health":1,"mode":%s,"error":"unknown mode"}\n' "$(js "$AZGPU_MODE" 40)" >"$VERDICT" ;;
    esac
}
# The checks run with stdout and stderr in the node's log; Run Command's stdout is not open to them or
# to anything they start, so nothing but the verdict written at the end can reach it.
( main ) >>"$LOG" 2>&1 </dev/null
prune_logs
head -c "$LOG_MAX" "$LOG" >"$WORK/log.head" 2>/dev/null && [ "$(wc -c <"$LOG")" -gt "$LOG_MAX" ] && cat "$WORK/log.head" >"$LOG"
[ -s "$VERDICT" ] && IFS= read -r line <"$VERDICT" && printf '%s\n' "$line"
exit 0
