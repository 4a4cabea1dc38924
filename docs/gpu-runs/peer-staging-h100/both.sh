#!/bin/bash
# run.sh (bench.c, bandwidth, the suite), then the probe's per-copy times.
R=$PWD; O=${OUT:-/tmp/out}
bash $R/.gpu-s9/run.sh > $O/run-all.txt 2>&1
mkdir -p $O/p; OUT=$O/p bash $R/.gpu-s9/probe.sh > /dev/null 2>&1; cp $O/p/probe.txt $O/probe.txt
python3 $R/.gpu-s9/summary.py $O | grep pageable; cat $O/opencl-medians.txt | grep -v "t1\|t6"; grep -E "passed|FAIL" $O/suite-peer.txt; grep -il panic /tmp/gd/*.log
paste - - - - - < $O/probe.txt
