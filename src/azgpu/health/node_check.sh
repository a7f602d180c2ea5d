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
exec 3>&1
LOGDIR=$R/var/log/azgpu
mkdir -p "$LOGDIR" 2>/dev/null || LOGDIR=${TMPDIR:-/tmp}
LOG=$LOGDIR/health-$(date -u +%Y%m%dT%H%M%SZ)-$$.log
exec >>"$LOG" 2>&1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/azgpu-health.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
MAXMSG=160      # characters of a message kept in the verdict
BUDGET=3400     # bytes the verdict may take: the 4 KB tail must hold all of it

# ---------------------------------------------------------------------------------- JSON helpers
js() {  # a JSON string of printable ASCII, at most $2 characters (no subprocess: it runs often)
    local s=$1
    s=${s//[^[:print:]]/ }
    [ -n "${2:-}" ] && s=${s:0:$2}
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}
jn() {  # a JSON number, or null
    case "$1" in ''|*[!0-9.]*|*.*.*) printf 'null' ;; *) printf '%s' "$1" ;; esac
}

FAILURES=()   # one JSON object per failure
GPU_FAULT=0
add_failure() {  # check kind message expected measured [fault_code] [xid] [gpus_json] [port]
    local o
    o="{\"check\":$(js "$1"),\"kind\":$(js "$2"),\"message\":$(js "$3" $MAXMSG),\"expected\":$(js "$4" 80),\"measured\":$(js "$5" 80)"
    [ -n "${6:-}" ] && o="$o,\"fault_code\":$(js "$6" 12)"
    [ -n "${7:-}" ] && o="$o,\"xid\":$(jn "$7")"
    [ -n "${8:-}" ] && o="$o,\"gpus\":$8"
    [ -n "${9:-}" ] && o="$o,\"port\":$(js "$9" 40)"
    FAILURES+=("$o}")
    case "$2" in missing_gpu|gpu_memory|xid|nvlink|nvidia_smi_*|rocm_smi_*|gpu_*) GPU_FAULT=1 ;; esac
}

# ---------------------------------------------------------------------------------- identity
imds() {  # IMDS compute/<field> as text (documented metadata endpoint; no proxy, short timeout)
    curl -s -H Metadata:true --noproxy '*' --max-time 5 \
        "http://169.254.169.254/metadata/instance/compute/$1?api-version=2021-02-01&format=text" 2>/dev/null
}
kvp_read() {  # Hyper-V KVP pool file: records of a 512-byte key and a 2,048-byte value, NUL-padded
    local file=$1 want=$2 size n i key value
    size=$(wc -c <"$file")
    n=$((size / 2560))
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
    COMPUTER=$(hostname 2>/dev/null)
    PHYS=""
    # The HPC images ship kvp_client (AzNHC's getPhysHostName.py reads PhysicalHostName through it).
    if [ -x "$R/opt/azurehpc/tools/kvp_client" ]; then
        PHYS=$("$R/opt/azurehpc/tools/kvp_client" 3 2>/dev/null | sed -n 's/^Key: PhysicalHostName; Value: //p' | head -n 1)
    fi
    if [ -z "$PHYS" ] && [ -r "$R/var/lib/hyperv/.kvp_pool_3" ]; then
        PHYS=$(kvp_read "$R/var/lib/hyperv/.kvp_pool_3" PhysicalHostName)
    fi
    VMID=$(imds vmId)
    VMID_SOURCE=imds
    if [ -z "$VMID" ] && [ -r "$R/sys/class/dmi/id/product_uuid" ]; then
        # The SMBIOS UUID holds the VM id, but the first three fields may be byte-swapped against
        # IMDS (WALinuxAgent#830): marked as such, and azgpu reports ARM's vmId beside it.
        VMID=$(cat "$R/sys/class/dmi/id/product_uuid")
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
nvidia_gpus() {  # nvidia-smi -q -> $WORK/gpus.txt: bus|serial|memory MiB|product name; sets SMI_RC
    timeout "${AZGPU_SMI_TIMEOUT:-120}" nvidia-smi -q >"$WORK/smi.txt" 2>&1
    SMI_RC=$?
    : >"$WORK/gpus.txt"
    [ "$SMI_RC" -eq 0 ] || return 0
    awk '
        function val(   v) { v = $0; sub(/^[^:]*: */, "", v); return v }
        function emit() { print bus "|" serial "|" mem "|" name }
        /^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+/ {
            if (bus != "") emit(); bus = $2; serial = ""; mem = ""; name = ""; fb = 0; next }
        /^    [A-Za-z]/ { fb = ($0 ~ /^    FB Memory Usage/) }
        /^    Product Name/ { name = val() }
        /^    Serial Number/ { serial = val() }
        fb && /^        Total/ { mem = val(); sub(/ *MiB$/, "", mem) }
        END { if (bus != "") emit() }' "$WORK/smi.txt" >"$WORK/gpus.txt"
}
gpu_inventory_json() {  # [{"bus","serial"}] of the GPUs nvidia-smi lists (for Guest Health Reporting)
    local first=1 bus serial mem name
    printf '['
    while IFS='|' read -r bus serial mem name; do
        [ $first -eq 1 ] || printf ','
        first=0
        printf '{"bus":%s,"serial":%s}' "$(js "$(norm_bus "$bus")" 16)" "$(js "$serial" 32)"
    done <"$WORK/gpus.txt"
    printf ']'
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
fallback_nvidia() {
    local want=${AZGPU_EXPECT_GPUS:-0} n first line bus serial mem name missing min
    nvidia_gpus
    if [ "$SMI_RC" -eq 124 ]; then
        add_failure nvidia-smi nvidia_smi_hang "nvidia-smi -q did not answer within ${AZGPU_SMI_TIMEOUT:-120} s" \
            "an answer" "no answer (timed out)"
        return
    fi
    if [ "$SMI_RC" -ne 0 ]; then
        first=$(grep -v '^[[:space:]]*$' "$WORK/smi.txt" | head -n 1)
        add_failure nvidia-smi nvidia_smi_error "nvidia-smi -q failed (exit $SMI_RC): $first" "exit 0" "exit $SMI_RC"
        return
    fi
    n=$(grep -c . "$WORK/gpus.txt")
    GPUS_FOUND=$n
    if [ "$n" -lt "$want" ]; then
        missing="["
        first=1
        local listed=" "
        while IFS='|' read -r b _; do listed="$listed$(norm_bus "$b") "; done <"$WORK/gpus.txt"
        for bus in $(pci_nvidia_gpus); do
            case "$listed" in *" $bus "*) continue ;; esac
            [ $first -eq 1 ] || missing="$missing,"
            first=0
            missing="$missing{\"bus\":$(js "$bus" 16),\"serial\":\"\"}"
        done
        missing="$missing]"
        add_failure gpu_count missing_gpu "nvidia-smi lists $n of $want GPUs" "$want" "$n" "" "" "$missing"
    elif [ "$n" -gt "$want" ]; then
        add_failure gpu_count gpu_count "nvidia-smi lists $n GPUs, the size has $want" "$want" "$n"
    fi
    min=${AZGPU_GPU_MEMORY_MIB_MIN:-0}
    if [ "$min" -gt 0 ]; then
        while IFS='|' read -r bus serial mem name; do
            case "$mem" in ''|*[!0-9]*) continue ;; esac
            if [ "$mem" -lt "$min" ]; then
                add_failure gpu_memory gpu_memory "GPU $(norm_bus "$bus") ($name) has $mem MiB" ">= $min MiB" "$mem MiB" \
                    "" "" "[{\"bus\":$(js "$(norm_bus "$bus")" 16),\"serial\":$(js "$serial" 32)}]"
            fi
        done <"$WORK/gpus.txt"
    fi
    if [ "${AZGPU_CHECK_NVLINK:-0}" = 1 ] && [ "$n" -gt 1 ]; then
        timeout 60 nvidia-smi nvlink -s >"$WORK/nvlink.txt" 2>&1
        # An empty answer means NVLink is not exposed to this VM: nothing to judge.
        if grep -qiE 'inactive|Unable to retrieve NVLink' "$WORK/nvlink.txt"; then
            line=$(grep -iE -B1 'inactive|Unable to retrieve NVLink' "$WORK/nvlink.txt" | grep -E '^GPU [0-9]+' | head -n 1)
            add_failure nvlink nvlink "NVLink down: ${line%% (UUID*} $(grep -iE 'inactive|Unable' "$WORK/nvlink.txt" | head -n 1)" \
                "all links active" "inactive links"
        fi
    fi
}
fallback_amd() {
    local want=${AZGPU_EXPECT_GPUS:-0} rc n first
    timeout "${AZGPU_SMI_TIMEOUT:-120}" rocm-smi --showbus >"$WORK/rocm.txt" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then
        add_failure rocm-smi rocm_smi_hang "rocm-smi did not answer within ${AZGPU_SMI_TIMEOUT:-120} s" "an answer" \
            "no answer (timed out)"
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
    local line xid pci seen=" " gpus bus serial mem name
    timeout 60 dmesg >"$WORK/dmesg.txt" 2>&1 || return 0
    while IFS= read -r line; do
        [[ $line =~ $XID_LINE ]] || continue
        xid=${BASH_REMATCH[3]}
        pci=${BASH_REMATCH[2],,}
        case " $XIDS " in *" $xid "*) ;; *) continue ;; esac
        case "$seen" in *" $xid@$pci "*) continue ;; esac
        seen="$seen$xid@$pci "
        gpus="[{\"bus\":$(js "$pci" 16),\"serial\":\"\"}]"
        while IFS='|' read -r bus serial mem name; do
            case "$(norm_bus "$bus")" in "$pci"*)  # the driver writes domain:bus:device
                gpus="[{\"bus\":$(js "$(norm_bus "$bus")" 16),\"serial\":$(js "$serial" 32)}]" ;; esac
        done <"$WORK/gpus.txt"
        add_failure xid xid "Xid $xid on GPU $pci: ${line#*NVRM: }" "no Xid" "Xid $xid" "" "$xid" "$gpus"
    done < <(grep -E 'NVRM: Xid \(' "$WORK/dmesg.txt")
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
    local want=${AZGPU_EXPECT_IB_PORTS:-0} rate=${AZGPU_EXPECT_IB_RATE:-0} base=$R/sys/class/infiniband n=0 p dev ll
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
aznhc_digest() {  # AzNHC's log -> failures (check, FaultCode, expected/measured where the message says)
    local log=$1 line msg check code exp meas xid port st
    while IFS= read -r line; do
        case "$line" in *"Health check failed:"*) ;; *) continue ;; esac
        msg=${line#*Health check failed:}
        msg=$(printf '%s' "$msg" | sed -E 's/^[[:space:]]+//; s/^-e //')
        check=aznhc
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
            if [ -d "$st" ]; then meas="$(port_state "$st") Gb/sec"; else meas=absent; fi
        fi
        if [[ $msg =~ Xid\ \([^\)]*\):\ ([0-9]+), ]]; then xid=${BASH_REMATCH[1]}; meas="Xid $xid"; exp="no Xid"; fi
        add_failure "$check" "" "$msg" "$exp" "$meas" "$code" "$xid" "" "$port"
        case "$check" in check_gpu_*|check_nvsmi_*|check_nvlink_*) GPU_FAULT=1 ;; esac
    done <"$log"
}
run_aznhc() {  # sets AZNHC=ran|unsupported|missing|failed|timeout; failures from its log
    local script=$R/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh rc
    AZNHC_LOG=$LOGDIR/aznhc-$(date -u +%Y%m%dT%H%M%SZ)-$$.log
    if [ ! -f "$script" ]; then AZNHC=missing; return; fi
    # -a: every check, not only up to the first failure; -t: seconds per check; -o: a log of our own.
    timeout "${AZGPU_AZNHC_BUDGET:-3600}" bash "$script" -a -t "${AZGPU_AZNHC_TIMEOUT:-500}" -o "$AZNHC_LOG" \
        >"$WORK/aznhc.out" 2>&1
    rc=$?
    if grep -qs 'is currently not supported by Azure health checks' "$WORK/aznhc.out" "$AZNHC_LOG"; then
        AZNHC=unsupported
    elif [ $rc -eq 124 ]; then
        AZNHC=timeout
        add_failure aznhc aznhc_timeout "AzNHC did not finish within ${AZGPU_AZNHC_BUDGET:-3600} s" "finished" "timed out"
    elif grep -qs 'Health check failed:' "$AZNHC_LOG"; then
        AZNHC=ran
        aznhc_digest "$AZNHC_LOG"
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
verdict_line() {  # the verdict with the first $2 failures
    local extra=$1 keep=$2 i list=""
    for ((i = 0; i < keep; i++)); do
        [ -n "$list" ] && list="$list,"
        list="$list${FAILURES[$i]}"
    done
    printf '{"azgpu_health":1,"mode":%s,%s,"failures":[%s],"more":%d,"log":%s,"seconds":%d}' \
        "$(js "${AZGPU_MODE:-check}")" "$extra" "$list" $((${#FAILURES[@]} - keep)) "$(js "${LOG#"$R"}" 120)" \
        $(($(date +%s) - START))
}
verdict() {  # the one line on stdout: messages shortened, then failures dropped, until it fits
    local extra=$1 n=${#FAILURES[@]} keep line i
    line=$(verdict_line "$extra" "$n")
    if [ ${#line} -gt $BUDGET ]; then
        for ((i = 0; i < n; i++)); do
            FAILURES[$i]=$(printf '%s' "${FAILURES[$i]}" | sed -E 's/("message":"([^"\\]|\\.){0,40})([^"\\]|\\.)*"/\1"/')
        done
        for keep in $n 12 8 4 2 1 0; do
            [ "$keep" -le "$n" ] || continue
            line=$(verdict_line "$extra" "$keep")
            [ ${#line} -le $BUDGET ] && break
        done
    fi
    printf '%s\n' "$line" >&3
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
    fi
    local inventory="" extra
    if [ "$GPU_FAULT" = 1 ] && [ "${AZGPU_GPU_VENDOR:-nvidia}" = nvidia ]; then
        [ -s "$WORK/gpus.txt" ] || nvidia_gpus
        inventory=",\"gpus\":$(gpu_inventory_json)"
    fi
    extra="\"checker\":$(js "$CHECKER"),\"aznhc\":$(js "${AZNHC:-missing}"),$(host_json)"
    [ -n "$AZNHC_ERROR" ] && extra="$extra,\"aznhc_error\":$(js "$AZNHC_ERROR" 160)"
    [ -n "$AZNHC_LOG" ] && [ -f "$AZNHC_LOG" ] && extra="$extra,\"aznhc_log\":$(js "${AZNHC_LOG#"$R"}" 120)"
    extra="$extra,\"gpus_found\":$(jn "$GPUS_FOUND"),\"ib_found\":$(jn "$IB_FOUND")$inventory"
    verdict "$extra"
}

# ---------------------------------------------------------------------------------- multi-node NCCL
admin_home() { printf '%s/home/%s' "$R" "${AZGPU_ADMIN_USER:?}"; }
nccl_keygen() {
    local dir
    dir=$(admin_home)/.azgpu-nccl
    rm -rf "$dir"
    mkdir -p -m 700 "$dir"
    ssh-keygen -q -t ed25519 -N '' -C azgpu-nccl -f "$dir/id_ed25519" </dev/null
    chown -R "${AZGPU_ADMIN_USER}:" "$dir" 2>/dev/null
    verdict "\"ok\":true,\"pubkey\":$(js "$(cat "$dir/id_ed25519.pub" 2>/dev/null)" 200)"
}
nccl_trust() {  # only the launcher's address, and only until the expiry time (OpenSSH authorized_keys,
                # in the node's time zone: UTC on the Azure images)
    local ssh
    ssh=$(admin_home)/.ssh
    mkdir -p -m 700 "$ssh"
    touch "$ssh/authorized_keys"
    sed -i '/ azgpu-nccl$/d' "$ssh/authorized_keys"
    printf 'from="%s",expiry-time="%s",no-agent-forwarding,no-X11-forwarding %s\n' "${AZGPU_NCCL_FROM:?}" \
        "${AZGPU_NCCL_EXPIRY:?}" "${AZGPU_NCCL_PUBKEY:?}" >>"$ssh/authorized_keys"
    chmod 600 "$ssh/authorized_keys"
    chown -R "${AZGPU_ADMIN_USER}:" "$ssh" 2>/dev/null
    verdict "\"ok\":true"
}
nccl_untrust() {
    local keys
    keys=$(admin_home)/.ssh/authorized_keys
    [ -f "$keys" ] && sed -i '/ azgpu-nccl$/d' "$keys"
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
    timeout "${AZGPU_NCCL_TIMEOUT:-1200}" runuser -u "$AZGPU_ADMIN_USER" -- bash -c '
        [ -r "$1" ] && . "$1" && module load mpi/hpcx
        shift
        exec mpirun "$@"' azgpu-nccl "$R/etc/profile.d/modules.sh" -np "$np" --map-by "ppr:${AZGPU_EXPECT_GPUS}:node" -hostfile "$hosts" \
        --mca plm_rsh_args "-i $dir/id_ed25519 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null" \
        -x LD_LIBRARY_PATH "${args[@]+"${args[@]}"}" "$exe" -b "${AZGPU_NCCL_BYTES:-8G}" -e "${AZGPU_NCCL_BYTES:-8G}" \
        -f 2 -g 1 -c 1 -n "${AZGPU_NCCL_ITERS:-20}" >"$WORK/nccl.txt" 2>&1
    rc=$?
    cp "$WORK/nccl.txt" "$LOGDIR/nccl-$(date -u +%Y%m%dT%H%M%SZ).log" 2>/dev/null
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

case "${AZGPU_MODE:-check}" in
    check) check ;;
    nccl-keygen) nccl_keygen ;;
    nccl-trust) nccl_trust ;;
    nccl-run) nccl_run ;;
    nccl-untrust) nccl_untrust ;;
    *) printf '{"azgpu_health":1,"mode":%s,"error":"unknown mode"}\n' "$(js "$AZGPU_MODE")" >&3 ;;
esac
