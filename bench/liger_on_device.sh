#!/usr/bin/env bash
# Runs Liger-Kernel 0.8.5's test/transformers through `tracker run` on a CUDA machine (the CUDA
# path of the suite stands in for the Ascend NPU). Expects, under .device/ (git-ignored):
#   whl/                      the tracker's wheel and its dependencies' wheels (Python 3.12)
#   liger_kernel-0.8.5/       the unpacked source archive (src/ and test/ are enough)
# Environment: FILES (default test/transformers), RUN_TIMEOUT (s), WPD (pytest processes per GPU),
# OUT (where the database and the JSON land), RUNNER (the runner's name; default h200-<n>gpu).
# A .device/tracker.db from an earlier call is the history the run plans with (copy it back
# from OUT); the plan reads the history of the runner of that name. XDIST_S=N: then plain `pytest -n <slots>
# --dist worksteal`, each worker pinned to GPU (worker % GPUs), for at most N seconds;
# XDIST_S=rest: for what is left of a 10-minute device call (575 s from the script's start).
# POLLUTER=<nodeid> [RUN_ID=N] [TRIES=N]: instead of a run, the polluter search for that test,
# replaying its process order in run N of the history database.
set -u
t_script=$(date +%s)
here=$(pwd)
work=/tmp/tracker-work
mkdir -p "$work" "${OUT:=/tmp/out}"
python3 -m pip install -q --no-index --no-deps .device/whl/pytest_reportlog-*.whl
if python3 -m venv /tmp/tv 2>/dev/null && [ -x /tmp/tv/bin/pip ]; then
  /tmp/tv/bin/pip install -q --no-index --find-links .device/whl kernel-stability-tracker
  TRACKER=/tmp/tv/bin/tracker
else  # no ensurepip: install beside, and keep it off the suite's path
  python3 -m pip install -q --no-index --find-links .device/whl --target /tmp/site kernel-stability-tracker
  TRACKER="env PYTHONPATH=/tmp/site python3 -m tracker.cli"
fi
nvidia-smi -L
cat > "$work/tracker.toml" <<EOF
database_url = "sqlite:///$work/tracker.db"
data_dir = "$work/data"
[runner]
name = "${RUNNER:-h200-$(nvidia-smi -L | wc -l)gpu}"
device = "cuda"
[[suites]]
name = "transformers"
path = "$here/.device/liger_kernel-0.8.5"
python = "python3"
args = [$(for f in ${FILES:-test/transformers}; do printf '"%s", ' "$f"; done)"-p", "no:cacheprovider"]
env = { PYTHONPATH = "", HF_HUB_OFFLINE = "1", TRANSFORMERS_OFFLINE = "1" }
test_timeout = 300
run_timeout = ${RUN_TIMEOUT:-500}
reruns = 1
workers_per_device = ${WPD:-4}
[analysis]
polluter_tries = ${TRIES:-3}
EOF
cat "$work/tracker.toml"
[ -f .device/tracker.db ] && cp .device/tracker.db "$work/tracker.db" && echo "history: .device/tracker.db"
cd "$work"
if [ -n "${POLLUTER:-}" ]; then
  start=$(date +%s)
  $TRACKER polluter "$POLLUTER" --suite transformers ${RUN_ID:+--run "$RUN_ID"} --json > "$OUT/polluter.json"
  echo "polluter exit=$? wall=$(( $(date +%s) - start ))s"; cat "$OUT/polluter.json"
  cp "$work/tracker.db" "$OUT/"; tar czf "$OUT/investigation.tgz" -C "$work" data 2>/dev/null
  exit 0
fi
start=$(date +%s)
$TRACKER run transformers --json > "$OUT/run.json" 2> "$OUT/progress.txt"
echo "tracker exit=$? wall=$(( $(date +%s) - start ))s"
tail -c 3000 "$OUT/progress.txt"
python3 - "$OUT/run.json" <<'EOF'
import json, sys, collections
d = json.load(open(sys.argv[1]))
r = d["run"]
print({k: r[k] for k in ("status", "expected", "counts", "duration", "message")})
print("environment:", r["environment"])
by_kernel = collections.defaultdict(collections.Counter)
for t in d["results"]:
    by_kernel[t["kernel"]][t["outcome"]] += 1
for k, c in sorted(by_kernel.items()):
    print(f"  {k:40s} {dict(c)}")
for t in d["results"]:
    if t["outcome"] not in ("passed", "skipped", "xfailed", "not_run"):
        print(t["outcome"], t["nodeid"][:150], [(a["outcome"], (a["message"] or "")[:150]) for a in t["attempts"]])
EOF
cp "$work/tracker.db" "$OUT/" 2>/dev/null
[ "${XDIST_S:-}" = rest ] && XDIST_S=$(( 575 - ($(date +%s) - t_script) ))
if [ -n "${XDIST_S:-}" ]; then  # the field's tool, side by side, same arguments and pinning
  gpus=$(nvidia-smi -L | wc -l); slots=$(( gpus * ${WPD:-4} ))
  mkdir -p /tmp/pin && cat > /tmp/pin/pin_gpu.py <<PIN
import os
w = os.environ.get("PYTEST_XDIST_WORKER")
if w:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(int(w[2:]) % $gpus)
PIN
  cd "$here/.device/liger_kernel-0.8.5"
  start=$(date +%s)
  PYTHONPATH=/tmp/pin HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 timeout "$XDIST_S" python3 -m pytest \
    -p pin_gpu -p no:cacheprovider -n "$slots" --dist worksteal --timeout=300 -q \
    --report-log="$OUT/xdist.jsonl" ${FILES:-test/transformers} > "$OUT/xdist.txt" 2>&1
  echo "xdist exit=$? wall=$(( $(date +%s) - start ))s slots=$slots"
  python3 - "$OUT/xdist.jsonl" <<'PY'
import json, sys, collections
done, stops, first = collections.Counter(), [], None
for line in open(sys.argv[1]):
    r = json.loads(line) if line.strip() else {}
    if r.get("$report_type") == "TestReport":
        first = min(first or r["start"], r["start"])
        if r["when"] == "teardown":
            done[r["outcome"]] += 1
            stops.append(r["stop"])
print("xdist tests finished:", sum(done.values()), dict(done))
print("xdist finished by s after its first test:",
      {t: sum(s - first <= t for s in stops) for t in (60, 120, 180, 240, 300, 360, 420)})
PY
  tail -3 "$OUT/xdist.txt"
fi
tar czf "$OUT/artifacts.tgz" -C "$work" data 2>/dev/null
ls -la "$OUT"
