#!/usr/bin/env bash
# Headline Nsight Compute counters of convkit's kernels for suite cases (installed convkit): tensor-pipe, DRAM,
# L2 and shared-memory load, issue activity and the warp stall breakdown, one block per kernel launch.
#   bash ci/ncu_metrics.sh "--cases tcn_k3_d8 --dtypes bfloat16" [kernel regex, default conv1d] [launch count]
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
m="sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
m="$m,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
m="$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
m="$m,smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.per_cycle_active"
for r in long_scoreboard barrier wait sleeping math_pipe_throttle mio_throttle lg_throttle short_scoreboard \
         no_instruction branch_resolving dispatch_stall membar; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
cd /tmp && ncu --clock-control none -k "regex:${2:-conv1d}" -c "${3:-6}" --metrics "$m" \
  python3 "$repo/ci/profile_cases.py" $1 2>&1 | grep -vE "^    -+|Metric Name|Warning: Data collection|^==PROF==" |
  sed -e 's/  */ /g'
