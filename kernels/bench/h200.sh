#!/bin/bash
# Builds kernels/ on the H200 device machine (NVIDIA OpenCL registered next to whatever ICDs are
# there) and runs gpu_bench.py with the given arguments; logs and JSON go to $OUT (or ./out).
#
#   bash kernels/bench/h200.sh --sections=gather --out=$OUT/gather.json
#   BASELINE=/tmp/cnn_base bash kernels/bench/h200.sh --sections=gather --baseline-cnn=/tmp/cnn_base
#   H200_EXEC='python3 kernels/bench/lstm_variants.py --device=gpu' bash kernels/bench/h200.sh
#
# H200_EXEC: a shell command run after the build instead of gpu_bench.py (the OpenCL library path
# and the kernel cache exported as for gpu_bench), e.g. several bench scripts in one call.
#
# The machine runs the session's checkout, not a helper's worktree: a helper copies its kernels/
# (without build/) into the checkout's ignored .gpu/ (`carry: [.gpu]`); this script overlays it
# first. BASELINE=PATH: before the overlay, build the checkout's own cnn and keep it at PATH (the
# gather section's --baseline-cnn runs it in the same rounds).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
mkdir -p /etc/OpenCL/vendors
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
{
    date -u
    uptime
    nproc
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    ls /etc/OpenCL/vendors
} 2>&1 | tee "$OUT/env.txt"

# The ICD loader: the system's, else the one CUDA ships.
LIBDIR=
for d in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -e "$d/libOpenCL.so" ]; then LIBDIR=$d; break; fi
done
if [ -z "$LIBDIR" ]; then
    so=$(find / -xdev -name 'libOpenCL.so.1*' 2>/dev/null | head -1)
    [ -n "$so" ] || { echo "no libOpenCL.so.1 on this machine" | tee -a "$OUT/env.txt"; exit 3; }
    mkdir -p /tmp/cl && ln -sf "$so" /tmp/cl/libOpenCL.so && LIBDIR=/tmp/cl
fi
echo "libOpenCL from $LIBDIR" | tee -a "$OUT/env.txt"
export LD_LIBRARY_PATH=$LIBDIR:${LD_LIBRARY_PATH:-}
if [ -n "${BASELINE:-}" ]; then
    CFLAGS="-O2 -I/usr/local/cuda/include" LDFLAGS="-L$LIBDIR" make -s -C kernels -j"$(nproc)" programs \
        >"$OUT/build-baseline.log" 2>&1 || { tail -30 "$OUT/build-baseline.log"; exit 5; }
    cp kernels/build/x86_64/cnn "$BASELINE"
fi
if [ -d .gpu/kernels ]; then
    cp -r .gpu/kernels/. kernels/
fi
CFLAGS="-O2 -I/usr/local/cuda/include" LDFLAGS="-L$LIBDIR" make -s -C kernels -j"$(nproc)" programs \
    >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 5; }
kernels/build/x86_64/gemm --list-devices 2>&1 | tee -a "$OUT/env.txt"
export FARM_CL_CACHE=/tmp/farm-cl-cache PYTHONUNBUFFERED=1
if [ -n "${H200_EXEC:-}" ]; then
    bash -c "$H200_EXEC"
    rc=$?
else
    python3 kernels/bench/gpu_bench.py "$@" 2>&1 | tee "$OUT/bench.log"
    rc=${PIPESTATUS[0]}
fi
uptime | tee -a "$OUT/env.txt"
exit "$rc"
