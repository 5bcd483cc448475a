#!/usr/bin/env bash
# One kernel launch under Nsight Compute with source counters: the stall / memory / occupancy sections
# as text, then the SASS instruction mix and the instructions with the most stall samples
# (ci/ncu_source_top.py). Needs an installed convkit built with -lineinfo (setup.py does).
#   bash ci/ncu_source.sh "--cases kb67_dense_k3 --dtypes bfloat16" conv1d_fwd_dense_mma [launch-skip]
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rep=/tmp/ncu_source_$$
cd /tmp && ncu --clock-control none -k "regex:$2" -s "${3:-0}" -c 1 --import-source yes \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
  -o "$rep" -f python3 "$repo/ci/profile_cases.py" $1 > /dev/null
ncu -i "$rep.ncu-rep" --print-details all 2>&1 | grep -v "^    ---" | sed -e 's/  */ /g' |
  grep -E "^ void|Duration|Throughput|Registers|Achieved Occupancy|Warp Cycles Per|Issue Slots|Ipc|Block Limit|Dynamic Shared|Waves" | head -40
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.csv" 2>&1
python3 "$repo/ci/ncu_source_top.py" "$rep.csv"
