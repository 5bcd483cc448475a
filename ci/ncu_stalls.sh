#!/usr/bin/env bash
# Warp stall breakdown (cycles per issued instruction, by reason) of convkit's kernels for suite cases,
# with Nsight Compute on an installed convkit: what a latency-bound kernel waits on.
#   bash ci/ncu_stalls.sh "--cases kb76_dense_s3d4 --dtypes bfloat16" [ncu kernel-count limit]
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
reasons="long_scoreboard short_scoreboard barrier mio_throttle math_pipe_throttle wait no_instruction lg_throttle not_selected selected dispatch_stall drain membar sleeping tex_throttle imc_miss branch_resolving misc"
metrics=$(for r in $reasons; do printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," "$r"; done)
metrics="${metrics}dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__warps_active.avg.per_cycle_active,gpu__time_duration.sum"
cd /tmp && ncu --clock-control none -k regex:conv1d -c "${2:-4}" --metrics "$metrics" \
  python3 "$repo/ci/profile_cases.py" $1
