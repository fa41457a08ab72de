// Storage and arithmetic types of common/gemm_tiled.cl (see there): a program's source is
// tiled_types.cl, then its own hooks (which may use these types), then gemm_tiled.cl (once per
// kernel variant; each inclusion defines one kernel named TILED_NAME).

#ifdef FARM_FP16
#ifdef FARM_HALF_ARITH
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half tacc_t;
#define T_LD(p, i) ((tacc_t)(p)[(i)])
#define T_ST(v, i, p) ((p)[(i)] = (v))
#define T_VT CAT_T(half, VW)
#else
typedef float tacc_t;
#define T_LD(p, i) vload_half((i), (p))
#define T_ST(v, i, p) vstore_half((v), (i), (p))
#define T_VT CAT_T(float, VW)
#endif
typedef half tstore_t;
#else
typedef float tacc_t;
typedef float tstore_t;
#define T_LD(p, i) ((p)[(i)])
#define T_ST(v, i, p) ((p)[(i)] = (v))
#define T_VT CAT_T(float, VW)
#endif

#define CAT_T_(a, b) a##b
#define CAT_T(a, b) CAT_T_(a, b)

#ifndef VW
#define VW 4
#endif
#if VW == 1
typedef tacc_t tvec_t;
#define UNPACK(dst, base, v) (dst)[(base)] = (v);
#else
typedef T_VT tvec_t;
#if VW == 2
#define UNPACK(dst, base, v) (dst)[(base)] = (v).s0; (dst)[(base) + 1] = (v).s1;
#else
#define UNPACK(dst, base, v) \
    (dst)[(base)] = (v).s0; (dst)[(base) + 1] = (v).s1; (dst)[(base) + 2] = (v).s2; (dst)[(base) + 3] = (v).s3;
#endif
#endif

