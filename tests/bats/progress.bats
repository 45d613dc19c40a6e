#!/usr/bin/env bats
# seqrec-train's progress bar: on a terminal (a pty from script(1)) it shows
# elapsed time, estimates to the end of the epoch and of the run, and the
# validation's progress; the JSON lines are the bytes of a piped run.

load helper

setup() {
  common_setup
  command -v script > /dev/null || skip "no script(1) for a pty"
  seqrec-synth --users 1500 --items 200 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  ARGS=(--dim 16 --ffn 16 --max-len 20 --batch 64 --threads 2 --epochs 2)
}

# on_tty CMD: runs CMD with a pty as its terminal; its output in $T/tty
on_tty() { script -qec "$*" /dev/null > "$T/tty"; }

@test "progress: on a terminal the bar has ETAs and the validation's progress; the log is unchanged" {
  on_tty seqrec-train "${ARGS[@]}" --log "$T/tty.jsonl" -o "$T/a.sqm" "$T/s.sqr"
  seqrec-train "${ARGS[@]}" --log "$T/pipe.jsonl" -o "$T/b.sqm" "$T/s.sqr" 2> "$T/pipe.err"
  bar=$(tr '\r' '\n' < "$T/tty")
  grep -Eq '^.\[Kepoch 1/2 \[#* *\] +[0-9]+% loss [0-9.]+ \| [0-9]+s, ETA epoch [0-9hms?]+, run [0-9hms?]+$' <<< "$bar"
  grep -Eq '^.\[Kepoch 1/2 validating \[#* *\] +[0-9]+% of 1500 targets \| [0-9]+s, ETA epoch' <<< "$bar"
  grep -Eq '^.\[Kepoch 2/2 validating \[#{20}\] 100% of 1500 targets .*\| best ndcg@10 0\.[0-9]{4} \(epoch [12]\)$' <<< "$bar"
  # with --log, one human line an epoch stays on the terminal
  grep -Eq '^.\[Kepoch 2/2 loss [0-9.]+ valid ndcg@10 [0-9.]+' <<< "$bar"
  # the same model and JSON lines as the piped run, which drew nothing
  cmp "$T/a.sqm" "$T/b.sqm"
  diff <(strip_times "$T/tty.jsonl") <(strip_times "$T/pipe.jsonl")
  [ ! -s "$T/pipe.err" ]
}

@test "progress: with the JSON lines on the terminal, each stands alone on its line" {
  on_tty seqrec-train "${ARGS[@]}" -o "$T/a.sqm" "$T/s.sqr"
  seqrec-train "${ARGS[@]}" -o "$T/b.sqm" "$T/s.sqr" 2> "$T/pipe.err"
  # the JSON lines are what follows the bar's last erase on each line
  sed 's/.*\x1b\[K//' "$T/tty" | tr -d '\r' | grep '^{' > "$T/tty.jsonl"
  [ "$(wc -l < "$T/tty.jsonl")" -eq 2 ]
  diff <(strip_times "$T/tty.jsonl") <(strip_times "$T/pipe.err")
  # piped: JSON lines only, no escape sequence, no carriage return
  ! grep -q $'\r' "$T/pipe.err" || false
  ! grep -q $'\x1b' "$T/pipe.err" || false
}
