export MOETUNE_CACHE_DIR=/tmp/mc; o=$OUT/ncu; mkdir -p $o
for v in new prev; do b=.devbin/$v/moetune; [ $v = new ] && b=.devbin/moetune
  timeout 200 ncu --clock-control none --kernel-name-base demangled -k 'regex:moe_gemm_wgmma<(\(int\))?0,' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    -f -o $o/$v $b profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8 --config bench/tables/fp8_up_n256/n256w4s3.json > $o/$v.log 2>&1
  echo "$v exit $?"
  ncu --import $o/$v.ncu-rep --page details --print-units base > $o/$v.txt 2>&1
  grep -E "moe_gemm|^ *Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|Issued Ipc|Block Size|Grid Size|Dynamic Shared" $o/$v.txt | head -40
done
