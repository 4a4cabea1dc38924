#!/bin/sh
# In the guest: checkpoint_loop from its folder (its image path is relative).
cd /opt/vgpu/cuda && exec ./checkpoint_loop "$@"
