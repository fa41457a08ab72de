#!/bin/bash
# Diagnosis of the 3x3 layers' time over gemm (kernels/bench/results-h200.md, "Where the 3x3
# layers' time over gemm goes"): variants of the window gather's B load, each built as its own
# cnn binary, timed run apart. Timing only: v1-v4 read the wrong elements. Run on the device machine
# after kernels/bench/h200.sh built kernels/ (LIBDIR: the directory of libOpenCL.so; OUT: outputs).
set -u
B=kernels/build/x86_64
F=kernels/cnn/conv_hooks.cl
cp $F /tmp/hooks.orig
cp $B/cnn /tmp/cnn_v0
python3 - <<'PY'
import re
s = open("/tmp/hooks.orig").read()
old = "return ((uint)ih < (uint)hin && (uint)iw < (uint)win) ? C_LD(in, pt.x + ts.x + kidx * (hin * win)) : 0.0f;"
assert old in s
open("/tmp/hooks.v1", "w").write(s.replace(old, "(void)ih; (void)iw; return C_LD(in, max(pt.x + ts.x + kidx * (hin * win), 0));"))
open("/tmp/hooks.v2", "w").write(s.replace(old, "(void)ih; (void)iw; (void)ts; return C_LD(in, (kidx & 15) * (hin * win) + pt.x + win + 1);"))
mac = "#define TILED_LOAD_B_TT(s, ts, k, n) im2col_window(B, (s), (ts), (k), hin, win)"
assert mac in s
open("/tmp/hooks.v3", "w").write(s.replace(mac, "#define TILED_LOAD_B_TT(s, ts, k, n) C_LD(B, ((k) & 7) * N + (n))"))
open("/tmp/hooks.v4", "w").write(s.replace(mac, "#define TILED_LOAD_B_TT(s, ts, k, n) C_LD(B, ((k) & 7) * ((N + 63) & ~63) + (n))"))
PY
for v in v1 v2 v3 v4; do
  cp /tmp/hooks.$v $F; touch $F
  CFLAGS="-O2 -I/usr/local/cuda/include" LDFLAGS="-L$LIBDIR" make -s -C kernels build/x86_64/cnn >/dev/null 2>&1 || echo "build $v failed"
  cp $B/cnn /tmp/cnn_$v
done
cp /tmp/hooks.orig $F
for r in 1 2 3; do for v in v0 v2 v3 v4; do for m in squeezenet1.0 squeezenet1.1; do
  /tmp/cnn_$v --cl-device=gpu --model=$m --fuse-expand=0 --iters=30 --tuned=ignore --cl-cache=/tmp/farm-cl-cache \
    | python3 -c "import json,sys; [print('$v $m', e['name'], e['time_ns']) for e in map(json.loads, sys.stdin) if e['event']=='layer' and ('3x3' in e['name'])]"
done; done; done > $OUT/diag.txt
python3 - <<'PY'
import collections, statistics, os
d = collections.defaultdict(list)
for line in open(os.environ["OUT"] + "/diag.txt"):
    v, m, name, ns = line.split()
    d[(m, name, v)].append(int(ns))
keys = sorted({(m, n) for m, n, _ in d})
print("model layer v0(real) v2(plain rows, state kept) v3(rows k%8*N+n, no state) v4(aligned rows) ms")
for m, n in keys:
    print(m, n, *[f"{statistics.median(d[(m, n, v)])/1e6:.4f}" for v in ("v0", "v2", "v3", "v4")])
PY
for m in squeezenet1.0 squeezenet1.1; do
  /tmp/cnn_v0 --cl-device=gpu --model=$m --fuse-expand=0 --iters=2 --tuned=ignore --cl-cache=/tmp/farm-cl-cache \
    | python3 -c "import json,sys; [print('$m', e['name'], e['gemm_params']) for e in map(json.loads, sys.stdin) if e['event']=='layer' and ('3x3' in e['name'])]"
done
for s in 64x3025x144 128x729x288 256x169x576; do IFS=x read m n k <<<"$s"
  kernels/build/x86_64/gemm --cl-device=gpu --m=$m --n=$n --k=$k --transfers=once --iters=5 --tuned=ignore --cl-cache=/tmp/farm-cl-cache | python3 -c "import json,sys; [print('gemm $s', {k: e[k] for k in ('tsm','tsn','tsk','wptm','wptn','lvw') if k in e}) for e in map(json.loads, sys.stdin) if e['event']=='info']"
done
