#!/usr/bin/env bash
# Liger-Kernel 0.8.5's test/transformers on a CUDA machine (the CUDA path of the suite stands in
# for the Ascend NPU): `tracker run` and plain `pytest -n N --dist worksteal` side by side, in the
# same call, each on GPUs of its own, with the same slots per GPU and the same pinning, each with
# a cold Triton cache of its own. Expects, under .device/ (git-ignored):
#   whl/                  the tracker's wheel and its dependencies' wheels (Python 3.12)
#   liger_kernel-0.8.5/   the unpacked source archive (src/ and test/ are enough)
#   hist/<runner>.db      optional: a tracker database from an earlier call, the history the
#                         runner of that name plans with (copy it back from OUT); or
#                         hist/<runner>.db.xz, the same compressed (7.7 MB of runs 15-28: 1 MB)
# LANES: what runs at once, "tool:gpus[:runner]" each, e.g.
#   LANES="tracker:0:h200-1gpu xdist:1"           1 GPU each, side by side
#   LANES="tracker:0,1:h200-2gpu xdist:2,3"       2 GPUs each (a 4-GPU machine)
#   LANES="polluter:0:h200" POLLUTER=<nodeid> RUN_ID=N [TRIES=N]
#                                                 the polluter search for that test, replaying its
#                                                 process order in run N of hist/h200.db
#   ... POLLUTER=<nodeid> ORDER="<nodeid> ... <nodeid>"
#                                                 first runs ORDER in one pytest process, stores
#                                                 its report log as a run (tracker ingest), then
#                                                 searches that run's order
#   one GPU only: run the script twice in one call, one lane each, DEADLINE halved (each run
#   empties the inductor cache and gives its lanes fresh Triton caches; the summary appends)
# WARM_FROM: a Triton cache folder each lane starts from a copy of (a warm night); without it
#   every lane starts cold. Triton keeps autotuning results there only with
#   TRITON_CACHE_AUTOTUNING=1 in the caller's environment (both lanes pass it to pytest); the
#   inductor cache starts empty, or from a copy of WARM_FROM.inductor where there is one
# IF_LOST=cold: where WARM_FROM is no folder (the lease ended between calls, and /tmp with it),
#   every lane runs cold instead of the script stopping, so the fresh machine's start is not
#   spent for nothing (calls BQ-BS lost 84 s so)
# KEEP: a folder the first lane's Triton cache is copied to after the lanes, its inductor
#   cache to KEEP.inductor and its tracker database to KEEP.db: a later call's WARM_FROM (in the
#   same lease), whose tracker lanes then plan with that night in their history, as a runner
#   would (call CA planned without BZ, the night that filled its cache, so it did not know which
#   tests BZ's limit had cut). The summary gets the caches' sizes, the Triton one also compressed:
#   whether a later lease could carry a warm cache in and skip the cold night
# WPD: pytest processes per GPU (xdist: -n WPD x GPUs); DEADLINE: seconds from the script's
# start at which every lane's tests are stopped (default 570: inside one 10-minute call, with
# room for the tracker to store its run after it, 6-10 s).
# Prints, per lane, the tests finished by each minute after the lane's launch.
set -u
t_script=$(date +%s)
here=$(pwd)
OUT=${OUT:-/tmp/out}
WPD=${WPD:-8}
DEADLINE=${DEADLINE:-570}
FILES=${FILES:-test/transformers}
mkdir -p "$OUT"
if [ -n "${WARM_FROM:-}" ] && [ ! -d "$WARM_FROM" ]; then
  # a lease that ended between calls takes /tmp with it: the night would run cold, labelled warm
  if [ "${IF_LOST:-}" != cold ]; then
    echo "WARM_FROM=$WARM_FROM is no folder (was the machine given back since?)" >&2; exit 2
  fi
  echo "WARM_FROM=$WARM_FROM is no folder (the lease ended since): every lane runs cold" |
    tee -a "$OUT/summary.txt" >&2
  WARM_FROM=
fi
inductor=/tmp/torchinductor_$(id -un)  # torch's default, shared by the lanes
rm -rf /tmp/torchinductor_*
if [ -n "${WARM_FROM:-}" ] && [ -d "$WARM_FROM.inductor" ]; then cp -a "$WARM_FROM.inductor" "$inductor"; fi
rm -rf /tmp/lane*  # a warm machine keeps an earlier call's lanes: their logs and Triton caches
python3 -m pip install -q --no-index --no-deps .device/whl/pytest_reportlog-*.whl
if python3 -m venv /tmp/tv 2>/dev/null && [ -x /tmp/tv/bin/pip ]; then
  /tmp/tv/bin/pip install -q --no-index --find-links .device/whl kernel-stability-tracker
  TRACKER=/tmp/tv/bin/tracker; TPY=/tmp/tv/bin/python
else  # no ensurepip: install beside, and keep it off the suite's path
  python3 -m pip install -q --no-index --find-links .device/whl --target /tmp/site kernel-stability-tracker
  TRACKER="env PYTHONPATH=/tmp/site python3 -m tracker.cli"; TPY="env PYTHONPATH=/tmp/site python3"
fi
nvidia-smi -L
args=$(for f in $FILES; do printf '"%s", ' "$f"; done)

tracker_lane() {  # tool work gpus runner
  local tool=$1 work=$2 gpus=$3 runner=$4 left
  left=$(( DEADLINE - ($(date +%s) - t_script) ))  # the same limit as xdist's; storing follows
  cat > "$work/tracker.toml" <<EOF
database_url = "sqlite:///$work/tracker.db"
data_dir = "$work/data"
[runner]
name = "$runner"
device = "cuda"
devices = [$gpus]
[[suites]]
name = "transformers"
path = "$here/.device/liger_kernel-0.8.5"
python = "python3"
args = [$args"-p", "no:cacheprovider"]
env = { PYTHONPATH = "", HF_HUB_OFFLINE = "1", TRANSFORMERS_OFFLINE = "1" }
test_timeout = 300
run_timeout = $left
reruns = 1
workers_per_device = $WPD
[analysis]
polluter_tries = ${TRIES:-3}
EOF
  local hist="$here/.device/hist/$runner.db"
  if [ ! -f "$hist" ] && [ -f "$hist.xz" ]; then  # carried compressed (a call carries 64 MiB)
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$hist.xz" "$work/hist.db" && hist=$work/hist.db
  fi
  [ -n "${WARM_FROM:-}" ] && [ -f "$WARM_FROM.db" ] && hist=$WARM_FROM.db  # the cache's night too
  [ -f "$hist" ] && cp "$hist" "$work/tracker.db"
  if [ "$tool" = polluter ]; then
    if [ -n "${ORDER:-}" ]; then
      local order; read -r -a order <<< "$ORDER"
      (cd "$here/.device/liger_kernel-0.8.5" && PYTHONPATH="" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       CUDA_VISIBLE_DEVICES=$gpus TRITON_CACHE_DIR="$work/data/cache/transformers/triton" \
       python3 -m pytest -p no:cacheprovider -q --report-log="$work/order.jsonl" "${order[@]}" 2>&1 | tail -3)
      (cd "$work" && $TRACKER ingest order.jsonl --suite transformers --runner "$runner" | tail -4)
    fi
    (cd "$work" && date +%s.%N > launch &&
     $TRACKER polluter "$POLLUTER" --suite transformers ${RUN_ID:+--run "$RUN_ID"} --json > polluter.json 2> progress.txt
     echo "exit $? after $(( $(date +%s) - t_script )) s" >> progress.txt
     cp tracker.db "$OUT/$(basename "$work")-$runner.db")
    return
  fi
  (cd "$work" && date +%s.%N > launch && $TRACKER run transformers --json > run.json 2> progress.txt
   echo "exit $?" >> progress.txt
   # the next night's plan, with the cache each lane starts from
   [ -f "$hist" ] && $TRACKER plan transformers --devices "$(echo "$gpus" | tr ',' '\n' | wc -l)" \
     "$([ -n "${WARM_FROM:-}" ] && echo --warm || echo --cold)" > plan.txt 2>&1
   cp tracker.db "$OUT/$(basename "$work")-$runner.db")
}

xdist_lane() {  # work gpus
  local work=$1 gpus=$2 n left
  n=$(( $(echo "$gpus" | tr ',' '\n' | wc -l) * WPD ))
  mkdir -p "$work/pin" && cat > "$work/pin/pin_gpu.py" <<PIN
import os
w = os.environ.get("PYTEST_XDIST_WORKER")
if w:
    gpus = "$gpus".split(",")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(w[2:]) % len(gpus)]
PIN
  left=$(( DEADLINE - ($(date +%s) - t_script) ))
  (cd "$here/.device/liger_kernel-0.8.5" && date +%s.%N > "$work/launch" &&
   PYTHONPATH="$work/pin" TRITON_CACHE_DIR="$work/triton" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
   timeout "$left" python3 -m pytest -p pin_gpu -p no:cacheprovider -n "$n" --dist worksteal \
     --timeout=300 -q --report-log="$work/xdist.jsonl" $FILES > "$work/xdist.txt" 2>&1
   echo "exit $? slots=$n" >> "$work/xdist.txt")
}

i=0
for lane in ${LANES:-tracker:0:h200-1gpu xdist:1}; do
  IFS=: read -r tool gpus runner <<< "$lane"
  work=/tmp/lane$i; mkdir -p "$work"; echo "$lane" > "$work/lane"
  if [ -n "${WARM_FROM:-}" ]; then  # where each tool keeps its Triton cache
    mkdir -p "$work/data/cache/transformers" && cp -r "$WARM_FROM" "$work/data/cache/transformers/triton"
    cp -r "$WARM_FROM" "$work/triton"
    # Triton names each kernel's files by absolute path: xdist's copy would read them from
    # wherever WARM_FROM was made, or miss (the tracker points its own copy back each run)
    $TPY -c 'import sys, pathlib; from tracker.runner.cache import relocate
print(relocate(pathlib.Path(sys.argv[1])), "kernels of", sys.argv[1], "pointed back")' "$work/triton"
  fi
  if [ "$tool" != xdist ]; then tracker_lane "$tool" "$work" "$gpus" "${runner:-h200}" &
  else xdist_lane "$work" "$gpus" & fi
  i=$((i + 1))
done
wait
echo "all lanes done $(( $(date +%s) - t_script )) s after the script's start"
if [ -n "${KEEP:-}" ]; then  # the first lane's caches, for a later call's WARM_FROM
  triton=/tmp/lane0/triton
  [ -d /tmp/lane0/data/cache/transformers/triton ] && triton=/tmp/lane0/data/cache/transformers/triton
  rm -rf "$KEEP" "$KEEP.inductor" "$KEEP.db" && cp -r "$triton" "$KEEP" && cp -a "$inductor" "$KEEP.inductor" &&
    echo "kept $(du -sh "$KEEP" | cut -f1) of Triton cache in $KEEP ($(tar -C "$KEEP" -cf - . |
      xz -T0 -1 | wc -c) bytes as .tar.xz: whether a later lease could carry it), the inductor" \
      "cache in $KEEP.inductor ($(du -sh "$KEEP.inductor" | cut -f1))" | tee -a "$OUT/summary.txt"
  [ -f /tmp/lane0/tracker.db ] && cp /tmp/lane0/tracker.db "$KEEP.db" && echo "and its night's database in $KEEP.db"
fi

for work in /tmp/lane*; do
  lane=$(cat "$work/lane"); launch=$(cat "$work/launch")
  echo "=== $lane"
  if [ -f "$work/polluter.json" ]; then
    tail -c 600 "$work/progress.txt"; cat "$work/polluter.json"; continue
  elif [ -f "$work/run.json" ]; then
    tail -c 600 "$work/progress.txt"
    logs=$(ls "$work"/data/runs/transformers/*/p*.reportlog.jsonl 2>/dev/null)
    cat "$work"/data/runs/transformers/*/phases.json 2>/dev/null; echo
    python3 - "$work/run.json" <<'EOF'
import collections, json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("no run JSON")
r = d["run"]
print({k: r.get(k) for k in ("status", "expected", "counts", "duration", "kernel_cache")})
print("environment:", {k: r["environment"].get(k) for k in ("device_model", "device_count", "torch", "triton")})
for t in d["results"]:
    if t["outcome"] not in ("passed", "skipped", "xfailed", "not_run"):
        print(" ", t["outcome"], t["nodeid"][:140], [(a["outcome"], (a["message"] or "")[:160]) for a in t["attempts"]])
EOF
    [ -f "$work/plan.txt" ] && head -c 2500 "$work/plan.txt" && echo  # the cut line ends here
  else
    logs=$work/xdist.jsonl
    tail -2 "$work/xdist.txt"
    gzip -c "$work/xdist.jsonl" > "$OUT/xdist-$(basename "$work").jsonl.gz"
  fi
  # shellcheck disable=SC2086
  python3 "$here/bench/finished_by.py" "$launch" $logs --until 540
done 2>&1 | tee -a "$OUT/summary.txt"  # appends: calls may run the script more than once
