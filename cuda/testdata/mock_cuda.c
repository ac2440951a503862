// mock_cuda.c: a stand-in for libcuda.so.1 for the tests of package cuda.
//
// Built by cuda_test.go with
//
//	gcc -shared -fPIC -o $TMP/libcuda.so.1 testdata/mock_cuda.c
//
// It exports every driver function the package binds, under the names the
// real driver exports, with simple host-memory semantics: device memory is
// malloc'd host memory, a module is a copy of its PTX text, a function's
// parameter list is read from the PTX .entry, cuLaunchKernel records its
// arguments (copying each parameter value by its PTX size, as the driver does)
// and runs one emulated kernel, mock_axpy. Like the driver, calls that need a
// context fail with CUDA_ERROR_INVALID_CONTEXT unless one is current on the
// calling thread. Functions named mock_* exist only here and let the tests see
// what the mock received.
//
// Build with -DMOCK_OMIT_LAUNCH to leave out cuLaunchKernel (the
// missing-symbol test), with -DMOCK_OMIT_TENSORMAP to leave out the optional
// cuTensorMapEncodeTiled.

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
};

enum {
	CU_JIT_INFO_LOG_BUFFER = 3,
	CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

enum {
	CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
	CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

#define MOCK_OPTIN_SHARED 232448 /* 227 KiB, as on an H100/H200 */
#define MOCK_DEFAULT_DYN_SHARED 49152
#define MOCK_NUM_REGS 40
#define MOCK_LOCAL_BYTES 8
#define MOCK_ELAPSED_MS 1.5f
#define MAX_PARAMS 64

/* ---- state ---- */

static int g_inited;
static int g_retains;
static struct { int unused; } g_ctx;
static __thread void *g_current; /* the context current on this thread */
static long g_live_allocs, g_live_events, g_live_modules;
static const char *g_fail_fn; /* mock_fail_next */
static CUresult g_fail_code;

struct mock_launch {
	uint64_t func;
	uint64_t stream;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared;
	uint32_t nparams;
	uint32_t sizes[MAX_PARAMS];
	uint64_t values[MAX_PARAMS];
};
_Static_assert(sizeof(struct mock_launch) == 816, "Go mirrors this layout");

static struct mock_launch g_last;
static int g_launches;
static int g_last_attr = -1, g_last_attr_value;

struct module {
	char *text;
};

struct function {
	struct module *mod;
	char name[128];
	uint32_t nparams;
	uint32_t sizes[MAX_PARAMS];
	int max_dyn_shared;
};

struct event {
	int recorded;
};

/* ---- mock-only exports ---- */

int mock_last_launch(struct mock_launch *out) {
	*out = g_last;
	return g_launches;
}

void mock_last_func_attribute(int *attr, int *value) {
	*attr = g_last_attr;
	*value = g_last_attr_value;
}

int mock_context_retains(void) { return g_retains; }
long mock_live_allocations(void) { return g_live_allocs; }
long mock_live_events(void) { return g_live_events; }
long mock_live_modules(void) { return g_live_modules; }

/* mock_fail_next makes the next call of driver function fn (one of those
   that use INJECT) return code. The name is copied. */
void mock_fail_next(const char *fn, int code) {
	static char name[64];
	snprintf(name, sizeof name, "%s", fn);
	g_fail_fn = name;
	g_fail_code = code;
}

#define INJECT(fn)                                                \
	do {                                                          \
		if (g_fail_fn != NULL && strcmp(g_fail_fn, fn) == 0) {    \
			g_fail_fn = NULL;                                     \
			return g_fail_code;                                   \
		}                                                         \
	} while (0)

#define NEED_INIT()                                               \
	do {                                                          \
		if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED;         \
	} while (0)

#define NEED_CTX()                                                \
	do {                                                          \
		NEED_INIT();                                              \
		if (g_current == NULL) return CUDA_ERROR_INVALID_CONTEXT; \
	} while (0)

/* ---- errors ---- */

static const struct {
	CUresult code;
	const char *name, *desc;
} errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
};

CUresult cuGetErrorName(CUresult r, const char **p) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == r) {
			*p = errors[i].name;
			return CUDA_SUCCESS;
		}
	}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **p) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == r) {
			*p = errors[i].desc;
			return CUDA_SUCCESS;
		}
	}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- initialization, devices ---- */

CUresult cuInit(unsigned int flags) {
	const char *env = getenv("MOCK_CUDA_INIT_RESULT");
	if (env != NULL && atoi(env) != 0) return atoi(env);
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	g_inited = 1;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
	*v = 13000;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
	NEED_INIT();
	*n = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
	NEED_INIT();
	if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
	NEED_INIT();
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "Mock NVIDIA H200");
	return CUDA_SUCCESS;
}

/* The compute capability times ten: 90 (an H200), or MOCK_CUDA_CC (e.g.
   80) to pose as another device. */
static int mock_cc(void) {
	const char *env = getenv("MOCK_CUDA_CC");
	if (env != NULL && atoi(env) >= 10) return atoi(env);
	return 90;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
	NEED_INIT();
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	switch (attr) {
	case 1: *v = 1024; break;              /* MAX_THREADS_PER_BLOCK */
	case 8: *v = 49152; break;             /* MAX_SHARED_MEMORY_PER_BLOCK */
	case 10: *v = 32; break;               /* WARP_SIZE */
	case 12: *v = 65536; break;            /* MAX_REGISTERS_PER_BLOCK */
	case 16: *v = 132; break;              /* MULTIPROCESSOR_COUNT */
	case 75: *v = mock_cc() / 10; break;   /* COMPUTE_CAPABILITY_MAJOR */
	case 76: *v = mock_cc() % 10; break;   /* COMPUTE_CAPABILITY_MINOR */
	case 81: *v = 233472; break;           /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
	case 97: *v = MOCK_OPTIN_SHARED; break; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- contexts ---- */

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice dev) {
	NEED_INIT();
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	g_retains++;
	*ctx = &g_ctx;
	return CUDA_SUCCESS;
}

/* Only the _v2 name is exported, as the binding tries it first. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
	NEED_INIT();
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	if (g_retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
	g_retains--;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(void *ctx) {
	NEED_INIT();
	if (ctx != NULL && (ctx != (void *)&g_ctx || g_retains == 0)) return CUDA_ERROR_INVALID_CONTEXT;
	g_current = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
	NEED_CTX();
	INJECT("cuCtxSynchronize");
	return CUDA_SUCCESS;
}

/* ---- modules and functions ---- */

static void put_log(char *buf, unsigned size, const char *text, void **size_slot) {
	if (buf == NULL || size == 0) return;
	snprintf(buf, size, "%s", text);
	if (size_slot != NULL) *size_slot = (void *)(uintptr_t)(strlen(buf) + 1);
}

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, const int *opts, void **vals) {
	NEED_CTX();
	char *errbuf = NULL, *infobuf = NULL;
	unsigned errsize = 0, infosize = 0;
	void **errsize_slot = NULL, **infosize_slot = NULL;
	for (unsigned i = 0; i < n; i++) {
		switch (opts[i]) {
		case CU_JIT_INFO_LOG_BUFFER: infobuf = vals[i]; break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: infosize = (unsigned)(uintptr_t)vals[i]; infosize_slot = &vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER: errbuf = vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: errsize = (unsigned)(uintptr_t)vals[i]; errsize_slot = &vals[i]; break;
		default: return CUDA_ERROR_INVALID_VALUE;
		}
	}
	const char *text = image;
	if (strstr(text, "BAD") != NULL) {
		put_log(errbuf, errsize,
		        "ptxas application ptx input, line 3; error   : Unknown symbol 'BAD'\n"
		        "ptxas fatal   : Ptx assembly aborted due to errors",
		        errsize_slot);
		return CUDA_ERROR_INVALID_PTX;
	}
	if (strstr(text, ".version") == NULL) return CUDA_ERROR_INVALID_IMAGE;
	struct module *m = calloc(1, sizeof *m);
	m->text = strdup(text);
	g_live_modules++;
	put_log(infobuf, infosize, "ptxas info    : mock compile done", infosize_slot);
	*mod = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(void *mod) {
	NEED_CTX();
	struct module *m = mod;
	if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
	free(m->text);
	free(m);
	g_live_modules--;
	return CUDA_SUCCESS;
}

static int is_ident(char c) {
	return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* cuModuleGetFunction finds ".entry NAME(" and reads the parameter sizes
   from the ".param .TYPE" declarations up to the closing parenthesis. */
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
	NEED_CTX();
	struct module *m = mod;
	if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
	size_t nl = strlen(name);
	for (const char *p = strstr(m->text, ".entry"); p != NULL; p = strstr(p + 1, ".entry")) {
		const char *q = p + 6;
		while (*q == ' ' || *q == '\t') q++;
		if (strncmp(q, name, nl) != 0 || is_ident(q[nl])) continue;
		q += nl;
		while (*q == ' ' || *q == '\t' || *q == '\n') q++;
		struct function *f = calloc(1, sizeof *f);
		f->mod = m;
		snprintf(f->name, sizeof f->name, "%s", name);
		f->max_dyn_shared = MOCK_DEFAULT_DYN_SHARED;
		if (*q == '(') {
			const char *end = strchr(q, ')');
			for (const char *r = strstr(q, ".param"); r != NULL && r < end; r = strstr(r + 1, ".param")) {
				const char *t = r + 6;
				while (*t == ' ' || *t == '\t') t++;
				if (*t != '.' || f->nparams == MAX_PARAMS) {
					free(f);
					return CUDA_ERROR_INVALID_IMAGE;
				}
				int bits = atoi(t + 2); /* .u64, .f32, .b16, .s8 */
				f->sizes[f->nparams++] = (uint32_t)(bits / 8);
			}
		}
		*fn = f;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int value) {
	NEED_CTX();
	struct function *f = fn;
	if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
	if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
	if (value < 0 || value > MOCK_OPTIN_SHARED) return CUDA_ERROR_INVALID_VALUE;
	f->max_dyn_shared = value;
	g_last_attr = attr;
	g_last_attr_value = value;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *v, int attr, void *fn) {
	NEED_CTX();
	struct function *f = fn;
	if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
	switch (attr) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = MOCK_LOCAL_BYTES; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = MOCK_NUM_REGS; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dyn_shared; break;
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

/* ---- memory ---- */

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX();
	INJECT("cuMemAlloc_v2");
	if (n == 0) return CUDA_ERROR_INVALID_VALUE;
	void *m = malloc(n);
	if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
	g_live_allocs++;
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CTX();
	if (p == 0) return CUDA_ERROR_INVALID_VALUE;
	free((void *)(uintptr_t)p);
	g_live_allocs--;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	NEED_CTX();
	if (dst == 0 || src == NULL) return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	NEED_CTX();
	if (dst == NULL || src == 0) return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
	NEED_CTX();
	if (dst == 0) return CUDA_ERROR_INVALID_VALUE;
	memset((void *)(uintptr_t)dst, v, n);
	return CUDA_SUCCESS;
}

/* ---- launches ---- */

#ifndef MOCK_OMIT_LAUNCH
/* mock_axpy(.u64 x, .u64 y, .f32 a, .u32 n): y[i] += a*x[i] for each thread
   i = blockIdx.x*blockDim.x + threadIdx.x below n. */
static void run_axpy(const struct mock_launch *l) {
	const float *x = (const float *)(uintptr_t)l->values[0];
	float *y = (float *)(uintptr_t)l->values[1];
	float a;
	memcpy(&a, &l->values[2], sizeof a);
	uint32_t n = (uint32_t)l->values[3];
	uint64_t threads = (uint64_t)l->grid[0] * l->block[0];
	for (uint64_t i = 0; i < threads && i < n; i++) y[i] += a * x[i];
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
	NEED_CTX();
	INJECT("cuLaunchKernel");
	struct function *f = fn;
	if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
	if ((uint64_t)bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
	if ((int)shared > f->max_dyn_shared) return CUDA_ERROR_INVALID_VALUE;
	if (extra != NULL) return CUDA_ERROR_INVALID_VALUE;
	if (f->nparams > 0 && params == NULL) return CUDA_ERROR_INVALID_VALUE;
	struct mock_launch l;
	memset(&l, 0, sizeof l);
	l.func = (uint64_t)(uintptr_t)fn;
	l.stream = (uint64_t)(uintptr_t)stream;
	l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
	l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
	l.shared = shared;
	l.nparams = f->nparams;
	for (uint32_t i = 0; i < f->nparams; i++) {
		if (params[i] == NULL) return CUDA_ERROR_INVALID_VALUE;
		l.sizes[i] = f->sizes[i];
		memcpy(&l.values[i], params[i], f->sizes[i]);
	}
	g_last = l;
	g_launches++;
	if (strcmp(f->name, "mock_axpy") == 0 && l.nparams == 4) run_axpy(&l);
	return CUDA_SUCCESS;
}
#endif

/* ---- tensor maps ---- */

/* What the last cuTensorMapEncodeTiled received; the encoded map holds
   the global address and the dimensions (then zeros), so a test can also
   check that the map came back. */
struct mock_tensormap {
	uint64_t global;
	uint64_t dims[5];
	uint64_t strides[5];
	uint32_t box[5];
	uint32_t elem_strides[5];
	int32_t dtype;
	uint32_t rank;
	int32_t interleave, swizzle, l2, oob;
	uint64_t calls;
};

static struct mock_tensormap g_tmap;

int mock_last_tensormap(struct mock_tensormap *out) {
	*out = g_tmap;
	return (int)g_tmap.calls;
}

#ifndef MOCK_OMIT_TENSORMAP
CUresult cuTensorMapEncodeTiled(void *tmap, int dtype, uint32_t rank, void *global, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *elem_strides,
                                int interleave, int swizzle, int l2, int oob) {
	NEED_CTX();
	INJECT("cuTensorMapEncodeTiled");
	if (tmap == NULL || (uintptr_t)tmap % 64 != 0) return CUDA_ERROR_INVALID_VALUE;
	if (rank < 1 || rank > 5 || dims == NULL || box == NULL || elem_strides == NULL) return CUDA_ERROR_INVALID_VALUE;
	if (rank > 1 && strides == NULL) return CUDA_ERROR_INVALID_VALUE;
	struct mock_tensormap m;
	memset(&m, 0, sizeof m);
	m.global = (uint64_t)(uintptr_t)global;
	for (uint32_t i = 0; i < rank; i++) {
		m.dims[i] = dims[i];
		m.box[i] = box[i];
		m.elem_strides[i] = elem_strides[i];
		if (i + 1 < rank) m.strides[i] = strides[i];
	}
	m.dtype = dtype, m.rank = rank;
	m.interleave = interleave, m.swizzle = swizzle, m.l2 = l2, m.oob = oob;
	m.calls = g_tmap.calls + 1;
	g_tmap = m;
	memset(tmap, 0, 128);
	memcpy(tmap, &m, offsetof(struct mock_tensormap, strides));
	return CUDA_SUCCESS;
}
#endif

/* ---- events ---- */

CUresult cuEventCreate(void **ev, unsigned flags) {
	NEED_CTX();
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	*ev = calloc(1, sizeof(struct event));
	g_live_events++;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(void *ev, void *stream) {
	NEED_CTX();
	if (ev == NULL || stream != NULL) return CUDA_ERROR_INVALID_HANDLE;
	((struct event *)ev)->recorded = 1;
	return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(void *ev) {
	NEED_CTX();
	if (ev == NULL) return CUDA_ERROR_INVALID_HANDLE;
	return CUDA_SUCCESS;
}

/* Only the plain name is exported: the binding falls back to it from
   cuEventElapsedTime_v2. */
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
	NEED_CTX();
	struct event *a = start, *b = end;
	if (a == NULL || b == NULL) return CUDA_ERROR_INVALID_HANDLE;
	if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
	*ms = MOCK_ELAPSED_MS;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(void *ev) {
	NEED_CTX();
	if (ev == NULL) return CUDA_ERROR_INVALID_HANDLE;
	free(ev);
	g_live_events--;
	return CUDA_SUCCESS;
}
