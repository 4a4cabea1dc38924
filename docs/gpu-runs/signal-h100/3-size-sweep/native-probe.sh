#!/bin/bash
set -u
R=$PWD; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14b; rm -rf $W; mkdir -p $W; cd $W && cp $R/integration/cuda-tests/common.h $R/.gpu-s14/signal_probe.c . && nvcc -O2 -o sp signal_probe.c -lcuda && ./sp > $O/sp.txt 2>&1; ./sp >> $O/sp.txt 2>&1
