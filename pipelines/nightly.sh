#!/bin/sh
# seqrec-nightly (pipelines/nightly.sh) - yesterday's model on today's log:
# the cron job. `make nightly` (pipelines/nightly.mk) execs it; cron may run
# build/bin/seqrec-nightly (or the installed one) directly and gets the
# job's own exit status. Every setting and exit status: seqrec-nightly(1)
# (man/man1/seqrec-nightly.1).
#
# Steps, each logged as one JSON line (stderr and NIGHTLY_DIR/nightly.log):
# lock, preprocess through the map, check that the log did not shrink,
# (fine-tune), the users to score, score the shards in parallel (local
# processes, or with NIGHTLY_LAUNCH one launcher job such as mpirun whose
# ranks are the shards), merge, publish. Any failure or signal ends the
# children, removes the run directory, logs a "failed" line and leaves the
# last publication, map, stream, history and model as they were; the last
# stderr line is "nightly: exit N: WHY".
set -eu

VERSION=@VERSION@
ME=seqrec-nightly
SETTINGS="NIGHTLY_LOG NIGHTLY_MODEL NIGHTLY_DIR NIGHTLY_LOG_KIND NIGHTLY_PREPROCESS NIGHTLY_TOPK
NIGHTLY_SCORE NIGHTLY_SHARDS NIGHTLY_LAUNCH NIGHTLY_THREADS NIGHTLY_FULL NIGHTLY_FINETUNE NIGHTLY_TRAIN
NIGHTLY_HOLDOUT NIGHTLY_WAIT NIGHTLY_DATE NIGHTLY_KEEP NIGHTLY_BIN NIGHTLY_MAKE_PID NIGHTLY_EXCLUDE
NIGHTLY_ALLOW"

usage() {
    cat <<EOF
Usage: $ME [NAME=VALUE]...
Run yesterday's model on today's log and publish every user's top-K items
atomically (NIGHTLY_DIR/latest). Settings come from the environment or from
NAME=VALUE arguments (the arguments win):

  NIGHTLY_LOG=FILE        today's raw log (required): the full history,
                          or with NIGHTLY_LOG_KIND=delta today's lines only
  NIGHTLY_MODEL=FILE      the model (required); fine-tuned in place with
                          NIGHTLY_FINETUNE=1 when the run publishes
  NIGHTLY_DIR=DIR         the job's directory (required)
  NIGHTLY_LOG_KIND=K      full (default: a log that lost users or
                          interactions is refused), delta (appended to
                          NIGHTLY_DIR/history) or replace (taken as is)
  NIGHTLY_PREPROCESS=OPTS seqrec-preprocess options (e.g. --format tsv)
  NIGHTLY_TOPK=K          items per user (default 10)
  NIGHTLY_SCORE=OPTS      more seqrec-score options of the lists
                          (e.g. --include-history, -c pop:100)
  NIGHTLY_EXCLUDE=FILE    items never recommended (retired), one original
                          id a line (seqrec-score --exclude-items)
  NIGHTLY_ALLOW=FILE      the only items recommended, one original id a
                          line (--allow-items; NIGHTLY_EXCLUDE wins)
  NIGHTLY_SHARDS=N        shards scored side by side (default 2)
  NIGHTLY_LAUNCH=CMD      score as one job of this launcher instead (e.g.
                          'mpirun -np 4' or 'srun -n 4'): its ranks are the
                          shards, rank 0 writes them all; same publication
  NIGHTLY_THREADS=N       cores in all, divided among the shards (all);
                          with NIGHTLY_LAUNCH each rank gets THREADS/SHARDS
  NIGHTLY_FULL=1          score every user (same bytes as a cached run)
  NIGHTLY_FINETUNE=1      fine-tune the model on today's stream first
  NIGHTLY_TRAIN=OPTS      seqrec-train options of the fine-tuning
                          (default --epochs 1)
  NIGHTLY_HOLDOUT=F       fraction of users holding out their last item
                          while fine-tuning (default 0.05)
  NIGHTLY_WAIT=S          seconds to wait for a running job (default 0)
  NIGHTLY_DATE=YYYYMMDD   the publication's date stamp (today, UTC)
  NIGHTLY_KEEP=N          days of publications kept (default 30, 0: all)
  NIGHTLY_BIN=DIR         where the seqrec programs are (default: next to
                          $ME, else PATH)
  -h, --help              show this help and exit
  -V, --version           show the version and exit

Exit status: 0 published, 1 a step failed (its status in the log),
64 bad setting, 65 bad data (a shrunken log), 66 missing input, 73 cannot
create output, 74 I/O error, 75 another run holds the lock, 128+N killed
by signal N. See seqrec-nightly(1).
EOF
}

for a in "$@"; do
    case $a in
    -h|--help) usage || exit 74; exit 0 ;; # 74: stdout refused it (a full disk)
    -V|--version) echo "$ME (seqrec) $VERSION" || exit 74; exit 0 ;;
    NIGHTLY_*=*)
        case " $(echo $SETTINGS) " in
        *" ${a%%=*} "*) export "${a?}" ;;
        *) echo "$ME: ${a%%=*}: no such setting" >&2
           echo "nightly: exit 64: unknown setting ${a%%=*}" >&2; exit 64 ;;
        esac ;;
    *) echo "$ME: '$a': not a NIGHTLY_NAME=VALUE setting" >&2
       echo "Try '$ME --help' for more information." >&2
       echo "nightly: exit 64: bad argument" >&2; exit 64 ;;
    esac
done

# State of the run, read by the traps.
step=start      # the step running (named in a "failed" line)
t_step=$(date +%s.%N)
W=""            # the run directory
D=""            # NIGHTLY_DIR once it exists
pids=""         # children to end (each the leader of its own session)
why=""          # the reason of a non-zero exit (the last stderr line)
code=""         # the failing step's exit status
sig=""          # the signal that ended the run
logged=0        # 1: the failure's JSON line is written
published=""    # the publication, once done
publishing=0    # 1: signals wait until the publication is complete
pending=""      # a signal that arrived while publishing

now() { date +%s.%N; }

# log STEP START KEY=VALUE...: one JSON line to stderr and the job's log
# (numbers stay numbers; empty values are left out; strings are escaped)
log() {
    _s=$1 _t0=$2; shift 2
    _line=$(awk -v s="$_s" -v t0="$_t0" -v t1="$(now)" '
        function esc(v) { gsub(/\\/, "\\\\", v); gsub(/"/, "\\\"", v); gsub(/\t/, "\\t", v)
            gsub(/\n/, "\\n", v); gsub(/\r/, "\\r", v); gsub(/[\001-\037]/, " ", v); return v }
        BEGIN {
        printf "{\"step\":\"%s\",\"seconds\":%.3f", s, t1 - t0
        for (i = 1; i < ARGC; i++) { k = ARGV[i]; sub(/=.*/, "", k); v = substr(ARGV[i], length(k) + 2)
            if (v == "") continue
            if (v ~ /^-?[0-9]+(\.[0-9]+)?$/) printf ",\"%s\":%s", k, v; else printf ",\"%s\":\"%s\"", k, esc(v) }
        print "}" }' "$@")
    echo "$_line" >&2
    if [ -n "$D" ]; then echo "$_line" >> "$D/nightly.log" || true; fi
}

# die STATUS WHY: the job's own refusal (64, 65, 66, 73, 74)
die() { why=$2; echo "$ME: $2" >&2; exit "$1"; }

# stop_children: TERM to each child's session (a wrapper script's
# children too), then wait for them, so that none outlives the job
stop_children() {
    for _p in $pids; do kill -TERM "-$_p" 2>/dev/null || kill -TERM "$_p" 2>/dev/null || true; done
    for _p in $pids; do wait "$_p" 2>/dev/null || true; done
    pids=""
}

finish() {
    rc=$?
    trap - EXIT HUP INT TERM
    set +e
    stop_children
    [ -n "${dog:-}" ] && { kill "$dog" 2>/dev/null; wait "$dog" 2>/dev/null; }
    if [ -n "$sig" ]; then
        code=$rc
        why="killed by SIG$sig during $step${published:+ (after publishing $published)}"
    elif [ "$rc" -ne 0 ] && [ -z "$why" ]; then
        # an unwrapped command under set -e
        code=$rc rc=1 why="step $step failed (exit $code)"
    fi
    if [ "$rc" -ne 0 ] && [ "$logged" = 0 ]; then
        log "$step" "$t_step" status=failed exit="${code:-$rc}" signal="$sig" message="$why"
    fi
    [ -n "$W" ] && rm -rf "$W"
    [ "$rc" -eq 0 ] && why="published $published"
    echo "nightly: exit $rc: $why" >&2
    exit "$rc"
}
# on_signal NAME: end the run (after the publication, if one is under way)
on_signal() {
    if [ "$publishing" = 1 ]; then pending=$1; return; fi
    # the watchdog sends TERM when the forwarded signal had no effect
    [ "$1" = TERM ] && [ -n "$W" ] && [ -s "$W/.signal" ] && set -- "$(cat "$W/.signal")"
    sig=$1
    case $1 in HUP) exit 129 ;; INT) exit 130 ;; *) exit 143 ;; esac
}
trap finish EXIT
trap 'on_signal HUP' HUP
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

# run_step NAME OUT COMMAND...: COMMAND in its own session (so that a
# signal ends all of it), stdout to OUT, stderr kept; a failure prints the
# step's message and ends the run with 1
run_step() {
    _name=$1 _out=$2; shift 2
    step=$_name t_step=$(now)
    setsid "$@" >"$_out" 2>"$W/$_name.err" 9>&- &
    _pid=$!
    pids="$pids $_pid"
    echo "$_pid" >> "$W/.pids"
    _st=0
    wait "$_pid" || _st=$?
    pids=$(echo $pids | sed "s/\(^\| \)$_pid\( \|$\)/ /")
    if [ "$_st" -ne 0 ]; then
        cat "$W/$_name.err" >&2
        code=$_st
        why="step $_name failed (exit $_st): $(head -c 300 "$W/$_name.err" | tr '\n' ' ' | sed 's/ *$//')"
        log "$_name" "$t_step" status=failed exit="$_st" message="$(cat "$W/$_name.err")"
        logged=1
        exit 1
    fi
}

# watchdog JOB MAKE: under make, whose signal handler for HUP and INT
# forwards nothing but waits for its children: while make handles one of
# HUP, INT, TERM (its bit set in SigBlk of /proc/MAKE/status), send it to
# the job; end the job when make is gone
watchdog() {
    while kill -0 "$1" 2>/dev/null; do
        _blk=$(awk '$1 == "SigBlk:" { print substr($2, length($2) - 7) } $1 == "State:" && $2 == "Z" { print "gone" }' \
            "/proc/$2/status" 2>/dev/null) || _blk=gone
        case $_blk in *gone*|"") kill -TERM "$1" 2>/dev/null; return 0 ;; esac
        _b=$((0x$_blk)) _s=""
        if [ $((_b & 1)) -ne 0 ]; then _s=HUP
        elif [ $((_b & 2)) -ne 0 ]; then _s=INT
        elif [ $((_b & 16384)) -ne 0 ]; then _s=TERM
        fi
        if [ -n "$_s" ]; then
            [ -d "$W" ] && echo "$_s" > "$W/.signal"
            kill -"$_s" "$1" 2>/dev/null
            # a signal ignored on the job's entry (SIGINT of a background
            # make) cannot be trapped: TERM, the job logs the first one
            sleep 2
            kill -TERM "$1" 2>/dev/null
            return 0
        fi
        sleep 0.2
    done
}

# abs PATH: PATH made absolute (relative paths are the caller's)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

step=settings
: "${NIGHTLY_LOG:=}" "${NIGHTLY_MODEL:=}" "${NIGHTLY_DIR:=}"
[ -n "$NIGHTLY_LOG" ] || die 64 "set NIGHTLY_LOG (today's log)"
[ -n "$NIGHTLY_MODEL" ] || die 64 "set NIGHTLY_MODEL (the model file)"
[ -n "$NIGHTLY_DIR" ] || die 64 "set NIGHTLY_DIR (the job's directory)"
LOGF=$(abs "$NIGHTLY_LOG")
MODEL=$(abs "$NIGHTLY_MODEL")
JOBDIR=$(abs "$NIGHTLY_DIR")
KIND=${NIGHTLY_LOG_KIND:-full}
TOPK=${NIGHTLY_TOPK:-10}
SHARDS=${NIGHTLY_SHARDS:-2}
LAUNCH=${NIGHTLY_LAUNCH:-}
THREADS=${NIGHTLY_THREADS:-$(nproc 2>/dev/null || echo 2)}
FULL=${NIGHTLY_FULL:-0}
FINETUNE=${NIGHTLY_FINETUNE:-0}
HOLDOUT=${NIGHTLY_HOLDOUT:-0.05}
WAIT=${NIGHTLY_WAIT:-0}
DATE=${NIGHTLY_DATE:-$(date -u +%Y%m%d)}
KEEP=${NIGHTLY_KEEP:-30}
if [ -n "${NIGHTLY_BIN:-}" ]; then
    BIN=$(abs "$NIGHTLY_BIN")/
elif [ -x "$(dirname "$0")/seqrec-score" ]; then
    BIN=$(cd "$(dirname "$0")" && pwd)/
else
    BIN=""
fi
case $TOPK$SHARDS$THREADS$WAIT$KEEP in *[!0-9]*) die 64 "NIGHTLY_TOPK, _SHARDS, _THREADS, _WAIT, _KEEP must be numbers" ;; esac
[ "$SHARDS" -ge 1 ] || die 64 "NIGHTLY_SHARDS must be at least 1"
[ "$TOPK" -ge 1 ] || die 64 "NIGHTLY_TOPK must be at least 1"
case $KIND in full|delta|replace) ;; *) die 64 "NIGHTLY_LOG_KIND must be full, delta or replace, not '$KIND'" ;; esac
case $DATE in [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;; *) die 64 "NIGHTLY_DATE must be YYYYMMDD, not '$DATE'" ;; esac
date -u -d "$DATE" +%s >/dev/null 2>&1 || die 64 "NIGHTLY_DATE: $DATE is not a date"
# shellcheck disable=SC2086
case " $(echo ${NIGHTLY_SCORE:-}) " in
*" -o "*|*" --output"*|*" -m "*|*" --model"*|*" -k "*|*" --topk"*|*" -f "*|*" --format"*|*" --shard"*|*" --users"*|*" --map"*|*" -t "*|*" --target"*)
    die 64 "NIGHTLY_SCORE: the job sets -m, -k, -f, -o, -t, --map, --users and --shard itself" ;;
*" --exclude-items"*|*" --allow-items"*)
    die 64 "NIGHTLY_SCORE: give the item lists as NIGHTLY_EXCLUDE and NIGHTLY_ALLOW (their contents key the cache)" ;;
esac
# the item filters: files of original item ids, read by every shard
EXCLUDE="" ALLOW="" filterargs=""
if [ -n "${NIGHTLY_EXCLUDE:-}" ]; then
    EXCLUDE=$(abs "$NIGHTLY_EXCLUDE")
    { [ -r "$EXCLUDE" ] && [ -f "$EXCLUDE" ]; } || die 66 "$NIGHTLY_EXCLUDE: cannot read NIGHTLY_EXCLUDE"
    filterargs="--exclude-items $EXCLUDE"
fi
if [ -n "${NIGHTLY_ALLOW:-}" ]; then
    ALLOW=$(abs "$NIGHTLY_ALLOW")
    { [ -r "$ALLOW" ] && [ -f "$ALLOW" ]; } || die 66 "$NIGHTLY_ALLOW: cannot read NIGHTLY_ALLOW"
    filterargs="$filterargs --allow-items $ALLOW"
fi
[ -r "$LOGF" ] || die 66 "$NIGHTLY_LOG: cannot read the log"
[ -r "$MODEL" ] || die 66 "$NIGHTLY_MODEL: cannot read the model"
mkdir -p "$JOBDIR/pub" 2>/dev/null || die 73 "$NIGHTLY_DIR: cannot create the job's directory"
D=$JOBDIR

# The delta's raw format: line-per-interaction formats can be appended
# (recbole, csv/tsv --header: the delta's header line is left out).
delta_header=0
if [ "$KIND" = delta ]; then
    # shellcheck disable=SC2086
    fmt=$(printf '%s\n' ${NIGHTLY_PREPROCESS:-} | awk 'p { print; exit } /^(-f|--format)$/ { p = 1 }
        /^--format=/ { sub(/^--format=/, ""); print; exit }')
    case $fmt in
    movielens|sasrec|csv|tsv) ;;
    recbole) delta_header=1 ;;
    s3rec) die 64 "NIGHTLY_LOG_KIND=delta: s3rec logs hold one line per user; a delta cannot be appended to them" ;;
    *) die 64 "NIGHTLY_LOG_KIND=delta needs the log's --format (movielens, recbole, sasrec, csv or tsv) in NIGHTLY_PREPROCESS" ;;
    esac
    # shellcheck disable=SC2086
    case " $(echo ${NIGHTLY_PREPROCESS:-}) " in *" --header "*) delta_header=1 ;; esac
    case $LOGF in *.gz|*.bz2|*.xz|*.zst|*.zip|*.tar|*.tgz|*.7z|*.rar)
        die 64 "NIGHTLY_LOG_KIND=delta: $NIGHTLY_LOG: a delta must be plain text" ;;
    esac
fi

# The lock: one run at a time (flock on a descriptor held to the end;
# children do not inherit it).
step=lock t_step=$(now)
exec 9>"$D/.lock" || die 73 "$D/.lock: cannot create the lock"
if ! flock -w "$WAIT" 9; then
    log lock "$t_step" status=busy
    logged=1
    die 75 "another run holds the lock ($D/.lock); nothing done"
fi
log lock "$t_step" status=taken
# under the lock every run directory and temporary file is a killed run's;
# its steps may still run (a SIGKILLed job cannot end them): end each
# session it recorded whose command line still names that directory
for _old in "$D"/.run.*; do
    [ -f "$_old/.pids" ] || continue
    for _p in $(cat "$_old/.pids"); do
        if tr '\0' ' ' < "/proc/$_p/cmdline" 2>/dev/null | grep -qF "$_old/"; then
            kill -TERM "-$_p" 2>/dev/null || kill -TERM "$_p" 2>/dev/null || true
        fi
    done
done
rm -rf "$D"/.run.* "$D/.latest.tmp" "$D"/pub/*.tmp "$D/key.tmp" "$MODEL.tmp" 2>/dev/null || true
W=$(mktemp -d "$D/.run.XXXXXX") || die 73 "$D: cannot create a run directory"
if [ -n "${NIGHTLY_MAKE_PID:-}" ]; then
    watchdog $$ "$NIGHTLY_MAKE_PID" 9>&- </dev/null &
    dog=$!
fi

# 1. today's log (or the history and today's delta) through the map
input=$LOGF
if [ "$KIND" = delta ]; then
    step=history t_step=$(now)
    {
        if [ -s "$D/history" ]; then
            cat "$D/history"
            awk -v skip="$delta_header" 'NR > skip' "$LOGF"
        else
            awk 1 "$LOGF"
        fi
    } > "$W/history" || die 74 "$W/history: cannot write the history"
    input=$W/history
    log history "$t_step" lines="$(wc -l < "$W/history")" delta_lines="$(awk -v skip="$delta_header" 'NR > skip' "$LOGF" | wc -l)"
fi

# The model's own id map (seqrec-preprocess --model) is the base map of the
# first night; later nights extend the job's map, which must extend the
# model's (preprocess refuses another with 65).
set -- --model "$MODEL"
[ -f "$D/ids.map" ] && set -- "$@" --map-in "$D/ids.map"
set -- "$@" --new-items "$([ "$FINETUNE" = 1 ] && echo append || echo drop)"
# shellcheck disable=SC2086
run_step preprocess "$W/stats.txt" "${BIN}seqrec-preprocess" ${NIGHTLY_PREPROCESS:-} "$@" \
    --map "$W/ids.map" --stats -o "$W/seq.sqr" "$input"
t_pre=$t_step
run_step split /dev/null "${BIN}seqrec-split" --leave-one-out -o "$W/today.split" "$W/seq.sqr"
stat_of() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$W/stats.txt"; }
users=$(stat_of users)
step=preprocess
log preprocess "$t_pre" users="$users" items="$(stat_of items)" interactions="$(stat_of interactions)" \
    new_users="$(stat_of new_users)" dropped_items="$(stat_of dropped_new_items)" \
    dropped_interactions="$(stat_of dropped_interactions)"

# seq_of SPLIT: user<TAB>interactions<TAB>train<TAB>valid<TAB>test lines, sorted
seq_of() {
    "${BIN}seqrec-cat" "$1" | awk -F'\t' -v OFS='\t' '{
        n = split($2, a, " ") + split($3, b, " ") + split($4, c, " "); print $1, n, $2, $3, $4 }' |
        LC_ALL=C sort
}
seq_of "$W/today.split" > "$W/new.txt"

# 2. the log is the full history: one that lost users or interactions
# against the last published stream is refused (NIGHTLY_LOG_KIND=delta or
# replace say otherwise)
if [ -f "$D/last.split" ]; then
    step=check t_step=$(now)
    seq_of "$D/last.split" > "$W/old.txt"
    # shellcheck disable=SC2046
    set -- $(awk -F'\t' 'NR == FNR { n[$1] = $2; next } { if (!($1 in n)) { u++; i += $2 } else if (n[$1] < $2) i += $2 - n[$1] }
        END { print u + 0, i + 0 }' "$W/new.txt" "$W/old.txt")
    log check "$t_step" lost_users="$1" lost_interactions="$2" kind="$KIND"
    if [ "$KIND" != replace ] && [ "$1$2" != 00 ]; then
        logged=1
        n() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
        log check "$t_step" status=failed exit=65 message="the log shrank"
        die 65 "today's log lacks $(n "$1") of yesterday's users and $(n "$2") interactions: a delta? set NIGHTLY_LOG_KIND=delta (or replace)"
    fi
fi

# 3. fine-tune yesterday's model (optional) on a split where a few users
# hold out their last item and everyone else trains on all of it (today's
# new items reach training)
model=$MODEL
if [ "$FINETUNE" = 1 ]; then
    run_step finesplit /dev/null "${BIN}seqrec-split" --holdout-users "$HOLDOUT" -o "$W/train.split" "$W/seq.sqr"
    # shellcheck disable=SC2086
    run_step finetune /dev/null "${BIN}seqrec-train" --init "$MODEL" ${NIGHTLY_TRAIN:---epochs 1} --map "$W/ids.map" \
        --threads "$THREADS" --log "$W/train.log" -o "$W/model.sqm" "$W/train.split"
    model=$W/model.sqm
    log finetune "$t_step" epochs="$(wc -l < "$W/train.log")"
fi

# 4. the users to score: all, or those whose sequence changed (or is new)
# when nothing else that shapes the lists changed: the cache's key is the
# model's bytes, seqrec-score's version, the top-K options, the items of
# the map and the item filters' contents (a newly retired item must leave
# every list, not just the rescored users')
step=users t_step=$(now)
key=$({
    echo "topk=$TOPK"
    echo "score=${NIGHTLY_SCORE:-}"
    "${BIN}seqrec-score" --version
    sha256sum < "$model"
    awk -F'\t' '$1 == "item"' "$W/ids.map" | sha256sum
    if [ -n "$EXCLUDE" ]; then echo exclude; sha256sum < "$EXCLUDE"; fi
    if [ -n "$ALLOW" ]; then echo allow; sha256sum < "$ALLOW"; fi
} | sha256sum | cut -d' ' -f1)
reason=""
if [ "$FULL" = 1 ]; then reason=NIGHTLY_FULL
elif [ ! -f "$D/last.split" ] || [ ! -e "$D/latest" ] || [ ! -f "$D/last.key" ]; then reason=first
elif [ "$(cat "$D/last.key")" != "$key" ]; then reason=key
fi
# originals FILE: the original ids of the users whose dense ids are FILE's
# first field (the map's user lines)
originals() {
    awk -F'\t' 'NR == FNR { want[$1] = 1; next } $1 == "user" && ($2 in want) { print $3 }' \
        "$1" "$W/ids.map"
}
if [ -n "$reason" ]; then
    scope=all
    userarg=""
    n_users=$users
else
    scope=changed
    originals "$W/new.txt" > "$W/today.users"    # for the merge
    cut -f1,3- "$W/old.txt" > "$W/old.cmp"
    cut -f1,3- "$W/new.txt" > "$W/new.cmp"
    LC_ALL=C comm -13 "$W/old.cmp" "$W/new.cmp" | cut -f1 > "$W/changed.dense"
    originals "$W/changed.dense" > "$W/users.txt"
    userarg="--users $W/users.txt"
    n_users=$(wc -l < "$W/users.txt")
fi
log users "$t_step" scope="$scope" reason="$reason" users="$n_users"

# 5. the shards, side by side, the cores divided among them: local
# processes, each with its --shard; or (NIGHTLY_LAUNCH) one launcher job,
# whose ranks score a shard each and whose rank 0 writes the one part
# (seqrec-score(1), "Under a launcher"): the same lines either way
step=score t_step=$(now)
per=$((THREADS / SHARDS))
[ "$per" -ge 1 ] || per=1
nrun=$SHARDS lshards=$SHARDS    # processes started here; shards logged
[ -z "$LAUNCH" ] || nrun=1 lshards=""
i=0
[ "$n_users" -gt 0 ] || i=$nrun    # nothing changed: nothing to score
while [ "$i" -lt "$nrun" ]; do
    shard="--shard $i/$SHARDS"
    [ -z "$LAUNCH" ] || shard=""
    # shellcheck disable=SC2086
    setsid $LAUNCH "${BIN}seqrec-score" -m "$model" --topk "$TOPK" ${NIGHTLY_SCORE:-} --map "$W/ids.map" \
        $shard $userarg $filterargs -j "$per" -o "$W/part.$i" "$W/today.split" \
        </dev/null >/dev/null 2>"$W/score.$i.err" 9>&- &
    pids="$pids $!"
    echo "$!" >> "$W/.pids"
    i=$((i + 1))
done
failed=0 scode=0
for p in $pids; do
    st=0
    wait "$p" || st=$?
    [ "$st" -eq 0 ] || { failed=$((failed + 1)); scode=$st; }
done
pids=""
if [ "$failed" -gt 0 ]; then
    cat "$W"/score.*.err >&2
    if [ -n "$LAUNCH" ]; then
        code=$scode why="the scoring job ($LAUNCH) failed (exit $scode); nothing published"
    else
        code=$scode why="$failed of $SHARDS shards failed (exit $scode); nothing published"
    fi
    log score "$t_step" status=failed exit="$scode" shards="$lshards" launch="$LAUNCH" failed="$failed" \
        message="$(cat "$W"/score.*.err)"
    logged=1
    exit 1
fi
# the item lists' ids the map does not know: every shard warns alike, the
# first part's warnings are passed on and their number logged
unknown_items=0
if [ -n "$filterargs" ] && [ -f "$W/score.0.err" ]; then
    grep -E ': warning: (.*: item .*|[0-9]+ unknown item ids? in all .*) ignored$' "$W/score.0.err" >&2 || true
    unknown_items=$(awk '/unknown item ids? in all/ { for (i = 1; i <= NF; i++) if ($i == "unknown") n = $(i - 1) }
        END { print n + 0 }' "$W/score.0.err")
fi
log score "$t_step" shards="$lshards" launch="$LAUNCH" threads_per_shard="$per" unknown_items="$unknown_items"

# 6. merge: the lines scored today, and the last publication's for today's
# users not scored (users absent from today's log are dropped)
step=merge t_step=$(now)
cat "$W"/part.* > "$W/new.tsv" 2>/dev/null || : > "$W/new.tsv"
if [ "$scope" = changed ]; then
    awk -F'\t' 'FILENAME == ARGV[1] { today[$1] = 1; next }
        FILENAME == ARGV[2] { seen[$1] = 1; print; next }
        ($1 in today) && !($1 in seen)' "$W/today.users" "$W/new.tsv" "$D/latest" > "$W/merged.tsv"
else
    cp "$W/new.tsv" "$W/merged.tsv"
fi
LC_ALL=C sort -t "$(printf '\t')" -k1,1 "$W/merged.tsv" > "$W/top.tsv"
# today's new items (beyond the model's) and their slots in the lists
n0=$("${BIN}seqrec-cat" --header "$MODEL" | awk -F'\t' '$1 == "config" && $2 ~ /^n_items=/ { sub(/^n_items=/, "", $2); print $2 }')
slots=$(awk -F'\t' -v n0="${n0:-0}" 'NR == FNR { if ($1 == "item" && $2 > n0) { new[$3] = 1; k++ } next }
    { m = split($2, a, ","); for (j = 1; j <= m; j++) { sub(/:[^:]*$/, "", a[j]); if (a[j] in new) s++ } }
    END { print k + 0, s + 0 }' "$W/ids.map" "$W/top.tsv")
log merge "$t_step" users="$(wc -l < "$W/top.tsv")" scored="$(wc -l < "$W/new.tsv")" \
    new_items="${slots% *}" new_item_slots="${slots#* }"

# 7. publish: the cache key goes first (a run killed in between rescores
# everyone), then the state, the dated file and the link, and the key
step=publish t_step=$(now)
publishing=1
pub=pub/top$TOPK-$DATE.tsv
rm -f "$D/last.key"
if [ "$FINETUNE" = 1 ]; then
    cp "$W/model.sqm" "$MODEL.tmp" && mv "$MODEL.tmp" "$MODEL" || die 74 "$MODEL: cannot replace the model"
fi
[ "$KIND" = delta ] && { mv "$W/history" "$D/history" || die 74 "$D/history: cannot write"; }
mv "$W/ids.map" "$D/ids.map" || die 74 "$D/ids.map: cannot write"
mv "$W/today.split" "$D/last.split" || die 74 "$D/last.split: cannot write"
mv "$W/top.tsv" "$D/$pub.tmp" && mv "$D/$pub.tmp" "$D/$pub" || die 74 "$D/$pub: cannot write"
ln -sfn "$pub" "$D/.latest.tmp" && mv -T "$D/.latest.tmp" "$D/latest" || die 74 "$D/latest: cannot switch the link"
echo "$key" > "$D/key.tmp" && mv "$D/key.tmp" "$D/last.key" || die 74 "$D/last.key: cannot write"
published=$pub
# retention: publications older than NIGHTLY_KEEP days (never the latest)
removed=0
if [ "$KEEP" -gt 0 ]; then
    cutoff=$(date -u -d "$DATE - $KEEP days" +%Y%m%d)
    for f in "$D"/pub/top*-[0-9]*.tsv; do
        [ -f "$f" ] || continue
        stamp=${f##*-} stamp=${stamp%.tsv}
        case $stamp in [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;; *) continue ;; esac
        [ "pub/${f##*/}" = "$pub" ] && continue
        if [ "$stamp" -le "$cutoff" ]; then rm -f "$f" && removed=$((removed + 1)); fi
    done
fi
log publish "$t_step" file="$pub" removed="$removed" keep="$KEEP"
publishing=0
[ -z "$pending" ] || on_signal "$pending"
