# Helpers for the guest's /init and for scenario scripts (installed as /lib/interop.sh; a
# scenario runs as `( . /lib/interop.sh; . /scenario.sh )`, so it can call these directly).
#
# Console markers (one line each, on ttyS0, greppable by the host harness):
#   @@COUNTERS tag=TAG rcvd_pkts=N sent_pkts=N ...   every rxe0 port-1 hw counter
#   @@RESULT NAME VALUE                              a scenario's own result
#   @@HOST WORD                                      a line received from the host (see host_wait)
#   @@EXEC_BEGIN ID / @@EXEC_END ID rc=N             around the output of a command run by `serve`
#
# The host talks to the guest over a second serial port, ttyS1, which /init opens as fd 3 before
# it prints @@READY (a tty's FIFO is cleared when it is opened, so it stays open).

RXE_PORT=/sys/class/infiniband/rxe0/ports/1

# counters TAG: print every hw counter of rxe0 port 1 on one @@COUNTERS line
counters() {
    local line="@@COUNTERS tag=$1" f v
    for f in rcvd_pkts sent_pkts; do
        v=$(cat "$RXE_PORT/hw_counters/$f" 2>/dev/null) || v=NA
        line="$line $f=$v"
    done
    for f in "$RXE_PORT"/hw_counters/*; do
        case "${f##*/}" in rcvd_pkts | sent_pkts | lifespan) continue ;; esac
        v=$(cat "$f" 2>/dev/null) || v=NA
        line="$line ${f##*/}=$v"
    done
    echo "$line"
}

# counter NAME: the value of one hw counter
counter() { cat "$RXE_PORT/hw_counters/$1"; }

# result NAME VALUE...: print a @@RESULT line
result() { local n="$1"; shift; echo "@@RESULT $n $*"; }

# host_wait WORD [TIMEOUT_S]: read lines from the host (ttyS1, fd 3) until one equals WORD.
# Returns 1 on timeout (default 120 s) or when the channel is closed.
host_wait() {
    local want="$1" t="${2:-120}" line
    while IFS= read -r -t "$t" line <&3; do
        line="${line%$(printf '\r')}"
        echo "@@HOST $line"
        [ "$line" = "$want" ] && return 0
    done
    echo "@@ERROR host_wait $want: timeout or channel closed"
    return 1
}

# host_read: read one line from the host into $HOST_LINE (no timeout)
host_read() { IFS= read -r HOST_LINE <&3; }

# serve: run commands sent by the host, one per line, until `end`:
#   counters TAG          -> @@COUNTERS tag=TAG ...
#   exec ID SHELL-COMMAND -> @@EXEC_BEGIN ID, the command's output, @@EXEC_END ID rc=N
#   end                   -> return
serve() {
    local line cmd id rest rc
    while IFS= read -r line <&3; do
        line="${line%$(printf '\r')}"
        cmd="${line%% *}"
        rest="${line#* }"
        case "$cmd" in
        counters) counters "$rest" ;;
        exec)
            id="${rest%% *}"
            rest="${rest#* }"
            echo "@@EXEC_BEGIN $id"
            sh -c "$rest" </dev/null 2>&1
            rc=$?
            echo "@@EXEC_END $id rc=$rc"
            ;;
        end) echo "@@HOST end"; return 0 ;;
        "") ;;
        *) echo "@@ERROR serve: unknown command: $line" ;;
        esac
    done
}

# gids: print the non-zero GIDs among the first 16 of rxe0 port 1 with their types, as
# @@GID INDEX GID TYPE (rxe's table has 1024 entries; reading them all costs seconds under TCG)
gids() {
    local i g t
    i=0
    while [ $i -lt 16 ]; do
        if read -r g <"$RXE_PORT/gids/$i" 2>/dev/null; then
            case "$g" in
            0000:0000:0000:0000:0000:0000:0000:0000 | "") ;;
            *)
                read -r t <"$RXE_PORT/gid_attrs/types/$i" 2>/dev/null || t=unknown
                echo "@@GID $i $g $(echo "$t" | tr ' ' '_')"
                ;;
            esac
        fi
        i=$((i + 1))
    done
}
