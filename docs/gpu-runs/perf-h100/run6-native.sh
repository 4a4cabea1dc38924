#!/bin/bash
# Native: is DMA to and from registered memfd memory itself slower?
set -u
export PATH=$PATH:/usr/local/cuda/bin
cd /tmp && nvcc -O2 -o pinned_kinds $OLDPWD/.gpu-perf/pinned_kinds.c -lcuda && ./pinned_kinds && ./pinned_kinds
