#!/usr/bin/env bash
# The GPU workflow in one call: build convkit on a CUDA machine from this tree, run the whole test
# suite with CUDA, run the benchmark, and leave logs under $OUT (default ./gpu_logs).
#
#   bash ci/gpu_check.sh                 # build + tests + benchmark
#   bash ci/gpu_check.sh tests           # build + tests
#   BENCH_ARGS="--cases depthwise" bash ci/gpu_check.sh bench
#   PYTEST_ARGS="-m 'not large'" ...     # extra pytest arguments (PYTEST_TIMEOUT: seconds, default 3000)
#   PYTEST_SHARDS=2 ...                  # the tests in two pytest processes at once (tests/conftest.py)
#   BENCH2_ARGS="--cases depthwise --cuda-graph" ...   # a second benchmark run (bench2.json)
#   PROFILE_ARGS="--cases kb76_dense_s3d4 --dtypes bfloat16" bash ci/gpu_check.sh profile
#                                        # build, then Nsight Compute on one forward + backward per case
#                                        # (ci/profile_cases.py): $OUT/ncu.txt
#   bash ci/gpu_check.sh wgrad           # only the dense grad-weight harness (ci/dense_wgrad_check.cu: wgmma
#                                        # kernel against a reference and the mma.sync kernel) into wgrad.log
#   bash ci/gpu_check.sh tf32proto       # only the TF32 wgmma forward prototype (ci/tf32_wgmma_proto.cu: small
#                                        # shapes against float64, then suite shapes timed beside the package's
#                                        # window kernel; up to five builds, see below) into tf32proto.log;
#                                        # TF32PROTO_ARGS="--only NAME", TF32PROTO_NCU=1 (ncu.log)
#   bash ci/gpu_check.sh tma             # only the TMA-fed wgmma forward (kernels/conv1d_fwd_dense_tma.cu,
#                                        # ci/dense_mma_check.cu --tma: every case with x by TMA and by cp.async,
#                                        # w2v_k3s2 with other tile shapes (CONVKIT_TMA_SHAPE; TMA_ONLY picks other
#                                        # cases), then the package's kernels on the suite shapes (--wt)) into tma.log
#   bash ci/gpu_check.sh micro           # only the kernel micro-benchmark (ci/dw_micro.cu) into micro.log
#                                        # (parts MICRO_PARTS, default 1-8; MICRO_FLAGS, MICRO_FLAGS2 as below)
#   bash ci/gpu_check.sh tune            # first time the depthwise kernel variants (ci/dw_micro.cu), write
#                                        # the fastest correct ones into csrc/kernels/conv1d_depthwise_config.h
#                                        # (ci/pick_dw_config.py), then build + tests + benchmark with them
#   EXTRA_CMD='CONVKIT_DENSE_NARROW_OUT=1 python3 -m convkit.bench --cases w2v_first_k10s5' bash ci/gpu_check.sh all
#                                        # one more command (run in /tmp after the rest, $repo = this
#                                        # checkout) into extra.log
#   F32EXP="0 1 2 3 4" bash ci/gpu_check.sh all
#                                        # also the fp32 window forward's timing experiments (ci/f32_window_check.cu,
#                                        # one build per CONVKIT_F32_EXP), built beside the package, run at the end
#                                        # into f32exp.log
#   JUNIT=1 ...                          # also the tests' junit.xml
#   NO_BUILD=1 ...                       # no build where convkit with its CUDA extension is already installed (a warm
#                                        # machine: the package of the last call, not necessarily this tree's)
#   TESTS_DETACH=1 TESTS_WAIT=480 bash ci/gpu_check.sh tests
#                                        # the suite in its own process session, waited for up to TESTS_WAIT s; then
#   BENCH_ARGS=... bash ci/gpu_check.sh collect
#                                        # (the next call, warm, no build) waits for it and brings back its log and
#                                        # times, then the benchmark if BENCH_ARGS is set, then EXTRA_CMD
#   TESTS_WAIT=300 EXTRA_CMD='bash $repo/ci/ab_experiments.sh' bash ci/gpu_check.sh collect
#                                        # the open A/B timings (ci/ab_experiments.sh) once the tests have ended
#   MICRO_PARTS="5" MICRO_FLAGS=-DLONG_K bash ci/gpu_check.sh all
#                                        # also these parts of the micro-benchmark (ci/dw_micro.cu), compiled
#                                        # while the package builds and run after the rest, into micro.log
#                                        # (MICRO_FLAGS2="...": the same parts again with those flags)
#
# The device tool brings back at most 8 files from $OUT: this writes summary.txt (GPU, build, config,
# test counts), build.log, tests.log, test_times.txt (each test's seconds), bench.json / bench.log (bench2.* with
# BENCH2_ARGS), extra.log.
# Defaults suit the H200 device machine: MAX_JOBS=16, TORCH_CUDA_ARCH_LIST=9.0a (halves the build;
# the "a" keeps the sm_90a-only wgmma kernels).
set -uo pipefail
what=${1:-all}
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$repo/gpu_logs}
mkdir -p "$OUT"
export MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/summary.txt"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/summary.txt"

if [ "$what" = wgrad ]; then
  (cd "$repo" && nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -lineinfo -I csrc ci/dense_wgrad_check.cu \
     csrc/kernels/conv1d_bwd_weight_dense_wgmma.cu csrc/kernels/conv1d_bwd_weight_dense_mma.cu -o /tmp/wgrad) \
    && timeout 300 /tmp/wgrad > "$OUT/wgrad.log" 2>&1
  rc=$?
  grep -E "TIME|FAIL|cases" "$OUT/wgrad.log"
  exit $rc
fi
if [ "$what" = tf32proto ]; then  # only the TF32 wgmma forward prototype (ci/tf32_wgmma_proto.cu) into tf32proto.log
  # builds: v0 the prototype, e1..e4 the same with one part left out (PROTO_EXP, timings only; TF32PROTO_EXP=""
  # builds v0 alone). TF32PROTO_NCU=1: then Nsight Compute source
  # counters of the kernels TF32PROTO_NCU_KERNELS (regexes; default the prototype's, f32_window_kernel = the
  # package's) on TF32PROTO_NCU_CASES (default kb76_dense_s3d4 w2v_k3s2), into ncu.log.
  builds="v0 ${TF32PROTO_EXP-e1 e2 e3 e4}"
  for v in $builds; do
    case $v in e*) def=-DPROTO_EXP=${v#e} ;; *) def= ;; esac
    (cd "$repo" && nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A $def -lineinfo -I csrc \
       ci/tf32_wgmma_proto.cu csrc/kernels/conv1d_fwd_dense_f32.cu csrc/kernels/conv1d_dense_f32.cu \
       -o /tmp/tf32wg$v > /tmp/tf32wg$v.build 2>&1) &
  done
  wait
  rc=0
  for v in $builds; do
    echo "== build $v"
    if [ -x /tmp/tf32wg$v ]; then timeout 200 /tmp/tf32wg$v ${TF32PROTO_ARGS:-}; echo "exit $?"
    else cat /tmp/tf32wg$v.build; echo "build failed"; fi
  done > "$OUT/tf32proto.log" 2>&1
  grep -q "exit 0" "$OUT/tf32proto.log" || rc=1
  grep -E "^== |exit|TIME|FAIL|err|passed|not supported|build failed" "$OUT/tf32proto.log"
  if [ "${TF32PROTO_NCU:-0}" = 1 ]; then
    for k in ${TF32PROTO_NCU_KERNELS:-^fwd_kernel$}; do for c in ${TF32PROTO_NCU_CASES:-kb76_dense_s3d4 w2v_k3s2}; do
      echo "== ncu $k $c"; n=$(echo "$k$c" | tr -cd 'a-z0-9_')
      ncu --clock-control none -k "regex:$k" -c 1 --import-source yes --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section SourceCounters \
        --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis -o /tmp/tf32ncu_$n -f \
        /tmp/tf32wgv0 --only $c > /dev/null 2>&1
      ncu -i /tmp/tf32ncu_$n.ncu-rep --print-details all 2>&1 | grep -v "^    ---" | sed -e 's/  */ /g' |
        grep -E "^ |Duration|Throughput|Registers|Achieved Occupancy|Warp Cycles Per|Issue Slots|Ipc|Bank|Waves" |
        head -40
      ncu -i /tmp/tf32ncu_$n.ncu-rep --page source --csv --print-source sass > /tmp/tf32ncu_$n.csv 2>&1
      python3 "$repo/ci/ncu_source_top.py" /tmp/tf32ncu_$n.csv 30
    done; done > "$OUT/ncu.log" 2>&1
    grep -E "^== |Duration|Warp Cycles Per|stall samples by" "$OUT/ncu.log"
  fi
  exit $rc
fi
if [ "$what" = tma ]; then
  # two builds: x by TMA (default) and x by cp.async (CONVKIT_TMA_X_CPASYNC=1); weights by bulk copy in both
  B="nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DDC_TMA -lineinfo -diag-suppress 177 -I csrc ci/dense_mma_check.cu
     csrc/kernels/conv1d_fwd_dense_mma.cu csrc/kernels/conv1d_fwd_dense_wgmma.cu csrc/kernels/conv1d_fwd_dense_tma.cu"
  (cd "$repo" && $B -o /tmp/dc_tma > "$OUT/tma_build.log" 2>&1) &
  (cd "$repo" && $B -DCONVKIT_TMA_X_CPASYNC=1 -DCONVKIT_TMA_SW32=0 -DCONVKIT_TMA_PRODUCER_WARP=0 -o /tmp/dc_tma_cp > "$OUT/tma_build_cp.log" 2>&1) &
  wait
  [ -x /tmp/dc_tma ] && [ -x /tmp/dc_tma_cp ] || { tail -30 "$OUT"/tma_build*.log; exit 1; }
  {
    echo "== TMA kernel (x by TMA), every case"; timeout 200 /tmp/dc_tma --tma; rc=$?; echo "exit $rc"
    echo "== TMA kernel (x by cp.async), every case"; timeout 200 /tmp/dc_tma_cp --tma; rc2=$?; echo "exit $rc2"
    for shape in ${TMA_SHAPES:-2,1,16 1,2,16 1,1,16 1,1,32}; do
      echo "== x by TMA, CONVKIT_TMA_SHAPE=$shape"
      CONVKIT_TMA_SHAPE=$shape timeout 60 /tmp/dc_tma --tma --only ${TMA_ONLY:-w2v_k3s2}
      echo "== x by cp.async, CONVKIT_TMA_SHAPE=$shape"
      CONVKIT_TMA_SHAPE=$shape timeout 60 /tmp/dc_tma_cp --tma --only ${TMA_ONLY:-w2v_k3s2}
    done
    echo "== package wgmma / mma.sync kernels (--wt), suite shapes"; timeout 120 /tmp/dc_tma --wt --only _
  } > "$OUT/tma.log" 2>&1
  grep -E "^(== |exit )|TIME|TRANSPOSE|FAIL|not supported|cases run|launch returned" "$OUT/tma.log"
  [ "$rc" = 0 ] && [ "$rc2" = 0 ]
  exit $?
fi
if [ "$what" = micro ]; then  # the micro-benchmark only (MICRO_FLAGS=-DQUICK: current choices vs streaming)
  MICRO_PARTS=${MICRO_PARTS:-1 2 3 4 5 6 7 8}
fi

if [ "$what" = tune ]; then
  for n in 1 2 3 4 5 6 7 8; do
    nvcc -O3 -std=c++17 -arch=sm_90a -I "$repo/csrc" -DPART=$n "$repo/ci/dw_micro.cu" -o /tmp/dw_micro$n &
  done
  wait
  for n in 1 2 3 4 5 6 7 8; do timeout 120 /tmp/dw_micro$n; done > "$OUT/micro.log" 2>&1
  $PY "$repo/ci/pick_dw_config.py" "$OUT/micro.log" "$repo/csrc/kernels/conv1d_depthwise_config.h" | tee "$OUT/picked.txt"
  what=all
fi

if [ -n "${MICRO_PARTS:-}" ]; then  # compiled beside the package build, run at the end (GPU otherwise idle)
  for n in $MICRO_PARTS; do
    nvcc -O3 -std=c++17 -arch=sm_90a -I "$repo/csrc" -DPART=$n ${MICRO_FLAGS:-} "$repo/ci/dw_micro.cu" \
      -o /tmp/dw_micro$n > /tmp/dw_micro$n.log 2>&1 &
    if [ -n "${MICRO_FLAGS2:-}" ]; then  # the same parts with other flags (e.g. a register cap), run after
      nvcc -O3 -std=c++17 -arch=sm_90a -I "$repo/csrc" -DPART=$n ${MICRO_FLAGS2} "$repo/ci/dw_micro.cu" \
        -o /tmp/dw_micro${n}b > /tmp/dw_micro${n}b.log 2>&1 &
    fi
  done
fi

if [ -n "${F32EXP:-}" ]; then  # the fp32 window forward's timing experiments (ci/f32_window_check.cu), built beside
  for e in ${F32EXP}; do        # the package, run at the end into f32exp.log (F32EXP="0 1 2 3 4": all of them)
    (cd "$repo" && nvcc -O3 -std=c++17 -arch=sm_90a -DCONVKIT_SM90A -DCONVKIT_F32_EXP=$e -I csrc ci/f32_window_check.cu \
       csrc/kernels/conv1d_fwd_dense_f32.cu csrc/kernels/conv1d_dense_f32.cu -o /tmp/f32w$e > /tmp/f32w$e.log 2>&1) &
  done
fi

# Build a wheel from the tree, install that wheel, and test the installed package (not the tree).
t0=$(date +%s)
[ "$what" = micro ] && what=micro_only
[ "$what" = collect ] && NO_BUILD=1  # (a build would reinstall the package under the running tests)
if [ -n "${NO_BUILD:-}" ] && (cd /tmp && $PY -c "import convkit, sys; sys.exit(not convkit.cuda_built())"); then
  # a warm machine (a call within its idle time) still has the package an earlier call installed
  echo "build: skipped (NO_BUILD: the installed convkit)" | tee -a "$OUT/summary.txt"
  (cd /tmp && $PY -m convkit --info) | tee -a "$OUT/summary.txt"
elif [ "$what" != micro_only ]; then
wheels=$(mktemp -d)
if ! (cd "$repo" && $PY -m pip wheel --no-build-isolation --no-deps -v -w "$wheels" . >"$OUT/build.log" 2>&1 \
      && $PY -m pip install --no-deps --force-reinstall "$wheels"/convkit-*.whl >>"$OUT/build.log" 2>&1); then
  grep -E "error|Error" "$OUT/build.log" | head -40
  echo "BUILD FAILED (log: $OUT/build.log)"
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s (MAX_JOBS=$MAX_JOBS, TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST), wheel $(basename "$wheels"/convkit-*.whl)" | tee -a "$OUT/summary.txt"
(cd /tmp && $PY -m convkit --info) | tee -a "$OUT/summary.txt"
fi

# Run from outside the source tree so the installed package, not python/, is what gets tested.
cd /tmp
# TESTS_DETACH=1: the suite runs in its own process session (setsid), from a copy of the tree in /tmp, so that it
# outlives this call; this waits up to TESTS_WAIT seconds (default 480) for it, then goes on. A next call within the
# machine's idle time (30 s) with `bash ci/gpu_check.sh collect` waits again (TESTS_WAIT) and brings back
# its log and times: the whole suite (~500 s on one process) plus a build no longer has to fit one 600 s call.
# (Several pytest processes on one GPU were slower than one in session 38: 572 tests in 240 s in 3 shares, against
# ~1700 in 470 s in one process in session 35; kernels of different processes do not overlap without MPS.)
# The summary of a finished test run whose output is in $OUT/tests.log and whose times are in $OUT/test_times.txt;
# $1: its exit status.
report_tests() {
  grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -40
  echo "slowest tests (seconds outcome phase id; all in test_times.txt):"; sort -rn "$OUT/test_times.txt" | head -15
  echo "tests: $(tail -1 "$OUT/tests.log") (exit $1)" | tee -a "$OUT/summary.txt"
  [ "$1" = 0 ] || status=1
}
detached_wait() {
  local t=0
  while [ ! -f /tmp/convkit_tests/done ] && [ $t -lt "${TESTS_WAIT:-480}" ]; do sleep 5; t=$((t + 5)); done
  cp /tmp/convkit_tests/tests.log "$OUT/tests.log" 2>/dev/null
  cp /tmp/convkit_tests/test_times.txt "$OUT/test_times.txt" 2>/dev/null
  if [ -f /tmp/convkit_tests/done ]; then
    report_tests "$(cat /tmp/convkit_tests/done)"
  else
    echo "tests: still running after ${TESTS_WAIT:-480} s; $(wc -l < /tmp/convkit_tests/test_times.txt 2>/dev/null) phases logged" \
      "(collect them with: bash ci/gpu_check.sh collect); no benchmark or EXTRA_CMD beside them" | tee -a "$OUT/summary.txt"
    what=none EXTRA_CMD=""  # (timings beside the tests would be wrong, and both need GPU memory)
  fi
}
if [ "$what" = collect ]; then  # then the benchmark where BENCH_ARGS is set, and EXTRA_CMD
  [ -d /tmp/convkit_tests ] || { echo "collect: no detached test run on this machine"; exit 1; }
  what=none
  [ -n "${BENCH_ARGS:-}" ] && what=bench
  detached_wait
fi
if { [ "$what" = all ] || [ "$what" = tests ]; } && [ -n "${TESTS_DETACH:-}" ]; then
  rm -rf /tmp/convkit_tests && mkdir -p /tmp/convkit_tests/tree
  (cd "$repo" && tar --exclude=./build --exclude=./dist --exclude=./gpu_logs --exclude=./.git -cf - .) |
    tar -xf - -C /tmp/convkit_tests/tree
  (cd /tmp && CONVKIT_TEST_TIMES=/tmp/convkit_tests/test_times.txt setsid nohup bash -c \
     "timeout ${PYTEST_TIMEOUT:-3000} $PY -m pytest /tmp/convkit_tests/tree/tests -q -rs -p no:cacheprovider \
      --durations=20 ${PYTEST_ARGS:-} > /tmp/convkit_tests/tests.log 2>&1; echo \$? > /tmp/convkit_tests/done" \
     > /dev/null 2>&1 < /dev/null &)
  detached_wait
elif [ "$what" = all ] || [ "$what" = tests ]; then
  junit=""
  [ -n "${JUNIT:-}" ] && junit="--junitxml='$OUT/junit.xml'"
  shards=${PYTEST_SHARDS:-1}
  export CONVKIT_TEST_TIMES="$OUT/test_times.txt"  # every test's time as it ends (tests/conftest.py)
  rm -f "$CONVKIT_TEST_TIMES"
  if [ "$shards" -le 1 ]; then
    eval "timeout ${PYTEST_TIMEOUT:-3000} $PY -m pytest '$repo/tests' -q -rs -p no:cacheprovider --durations=20 $junit ${PYTEST_ARGS:-}" \
      >"$OUT/tests.log" 2>&1
    rc=$?
  else  # PYTEST_SHARDS=n: n pytest processes at once on the GPU (tests/conftest.py, CONVKIT_TEST_SHARD), one log
    pids=""
    for i in $(seq 0 $((shards - 1))); do
      eval "CONVKIT_TEST_SHARD=$i/$shards timeout ${PYTEST_TIMEOUT:-3000} $PY -m pytest '$repo/tests' -q -rs \
        -p no:cacheprovider --durations=10 ${PYTEST_ARGS:-}" > "/tmp/tests.$i.log" 2>&1 &
      pids="$pids $!"
    done
    rc=0
    for pid in $pids; do wait "$pid" || rc=1; done
    for i in $(seq 0 $((shards - 1))); do echo "== share $i of $shards"; cat "/tmp/tests.$i.log"; done > "$OUT/tests.log"
    # one summary line, the shares' counts added
    for i in $(seq 0 $((shards - 1))); do tail -1 "/tmp/tests.$i.log"; done |
      $PY -c "import re, sys; c = {}
for line in sys.stdin:
    for n, what in re.findall(r'(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)', line):
        c[what] = c.get(what, 0) + int(n)
print(', '.join(f'{n} {w}' for w, n in c.items()) + ' ($shards shares)')" >> "$OUT/tests.log"
  fi
  report_tests $rc
fi
if [ "$what" = profile ]; then
  # --clock-control none: leave the clocks alone (device METHOD.md); kernels of convkit only.
  ncu --clock-control none -k regex:conv1d --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis \
      $PY "$repo/ci/profile_cases.py" ${PROFILE_ARGS:---cases kb76_dense_s3d4 --dtypes bfloat16} \
      > "$OUT/ncu.txt" 2>&1 || status=1
  grep -E "conv1d|Duration|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy" \
      "$OUT/ncu.txt" | head -80
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  eval "timeout ${BENCH_TIMEOUT:-900} $PY -m convkit.bench --json '$OUT/bench.json' ${BENCH_ARGS:-}" 2>&1 | tee "$OUT/bench.log"
  [ ${PIPESTATUS[0]} -eq 0 ] || status=1
  if [ -n "${BENCH2_ARGS:-}" ]; then  # a second run, e.g. other cases with --cuda-graph
    eval "timeout ${BENCH_TIMEOUT:-900} $PY -m convkit.bench --json '$OUT/bench2.json' $BENCH2_ARGS" 2>&1 | tee "$OUT/bench2.log"
    [ ${PIPESTATUS[0]} -eq 0 ] || status=1
  fi
fi
if [ -n "${EXTRA_CMD:-}" ]; then
  (cd /tmp && eval "$EXTRA_CMD") > "$OUT/extra.log" 2>&1 || status=1
  tail -40 "$OUT/extra.log"
fi
if [ -n "${MICRO_PARTS:-}" ]; then
  wait
  for n in $MICRO_PARTS; do
    echo "== part $n: ${MICRO_FLAGS:-}"; cat /tmp/dw_micro$n.log; timeout 120 /tmp/dw_micro$n
    if [ -n "${MICRO_FLAGS2:-}" ]; then
      echo "== part $n: $MICRO_FLAGS2"; cat /tmp/dw_micro${n}b.log; timeout 120 /tmp/dw_micro${n}b
    fi
  done > "$OUT/micro.log" 2>&1 || status=1
  grep -E "WRONG|error" "$OUT/micro.log" | head -20
fi
if [ -n "${F32EXP:-}" ]; then
  wait
  for e in ${F32EXP}; do cat /tmp/f32w$e.log; timeout 120 /tmp/f32w$e; done > "$OUT/f32exp.log" 2>&1 || status=1
  grep -E "TIME|FAIL|error" "$OUT/f32exp.log"
fi
grep -E "^(build|tests):" "$OUT/summary.txt"
exit $status
