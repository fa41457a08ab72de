// farm gpuload kernels: short, size-tunable bursts of work (the host picks `work` so that one
// launch takes about --kernel-ms). The result is stored so the compiler cannot drop the loop.

__kernel void load_compute(__global float *out, const int work)
{
    const int gid = get_global_id(0);
    float4 a = (float4)(gid * 1e-7f, 0.5f, 0.25f, 0.125f), b = (float4)(0.999f), c = (float4)(1e-4f);
    for (int i = 0; i < work; i++) {
        a = mad(a, b, c);
        b = mad(b, a, c);
        a = mad(a, b, c);
        b = mad(b, a, c);
    }
    out[gid] = a.x + a.y + a.z + a.w + b.x;
}

// Streams `work` passes over a buffer of n float4 (read + write): bandwidth, not arithmetic.
__kernel void load_memory(__global const float4 *src, __global float4 *dst, const int n, const int work)
{
    const int gid = get_global_id(0), gsize = get_global_size(0);
    for (int r = 0; r < work; r++)
        for (int i = gid; i < n; i += gsize)
            dst[i] = src[i] * 0.5f + (float4)(r);
}
