/*
 * procdump: what the real driver's cuGetProcAddress answers, for every name
 * in NAMES (one a line), every CUDA version from 0 to 13200 in steps of
 * 10 and the flags 0 (DEFAULT), 1 (LEGACY_STREAM) and 2
 * (PER_THREAD_DEFAULT_STREAM). The reference vgpu's table is built from.
 *
 * usage: procdump /abs/path/libcuda.so.1 NAMES >dump.txt
 *        procdump /abs/path/libcuda.so.1 --null   (NULL symbol and pfn)
 *
 * Output: "probe ..." lines (edge cases), then one line per (name, flags):
 *   name flags version:answer version:answer ...
 * listing the first version and each version where the answer changes.
 * An answer is the exported symbol the returned pointer is (dladdr, exact),
 * "sym+0xN" when it is inside one, or "!R/S" for result R, symbolStatus S.
 * "v1diff" lines list where cuGetProcAddress (v1) answers otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef CUresult (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_t)(const char *, void **, int, unsigned long long, int *);
static gpa1_t gpa1;
static gpa2_t gpa2;

static void answer(CUresult r, int st, void *p, char *out, size_t n)
{
	Dl_info di;
	if (r != 0 || !p) {
		snprintf(out, n, "!%d/%d", r, st);
	} else if (dladdr(p, &di) && di.dli_sname) {
		if (di.dli_saddr == p)
			snprintf(out, n, "%s", di.dli_sname);
		else
			snprintf(out, n, "%s+0x%lx", di.dli_sname, (unsigned long)((char *)p - (char *)di.dli_saddr));
	} else {
		snprintf(out, n, "?%p", p);
	}
}

static void probe(const char *what, const char *sym, int version, unsigned long long flags, int use_pfn,
		  int use_status)
{
	void *pfn = (void *)0xdeadbeefUL;
	int st = 77;
	CUresult r = gpa2(sym, use_pfn ? &pfn : NULL, version, flags, use_status ? &st : NULL);
	char a[128];
	answer(r, st, r == 0 ? pfn : NULL, a, sizeof a);
	printf("probe v2 %s sym=%s version=%d flags=%llu -> result=%d status=%d pfn=%s %s\n", what,
	       sym ? sym : "(null)", version, flags, r, st,
	       pfn == (void *)0xdeadbeefUL ? "untouched" : pfn ? "set" : "NULL", r == 0 ? a : "");
	pfn = (void *)0xdeadbeefUL;
	r = gpa1(sym, use_pfn ? &pfn : NULL, version, flags);
	printf("probe v1 %s sym=%s version=%d flags=%llu -> result=%d pfn=%s\n", what, sym ? sym : "(null)",
	       version, flags, r, pfn == (void *)0xdeadbeefUL ? "untouched" : pfn ? "set" : "NULL");
}

/* cuGetExportTable: an unknown UUID, a known one, NULL arguments are not tried. */
static void export_probes(void *h)
{
	CUresult (*get)(const void **, const unsigned char *) =
		(CUresult(*)(const void **, const unsigned char *))dlsym(h, "cuGetExportTable");
	static const unsigned char unknown[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
						  0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00};
	static const unsigned char known[16] = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
						0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};
	const void *t = (const void *)0xdeadbeefUL;
	CUresult r = get(&t, unknown);
	printf("probe exporttable unknown-uuid -> result=%d table=%s\n", r,
	       t == (const void *)0xdeadbeefUL ? "untouched" : t ? "set" : "NULL");
	t = (const void *)0xdeadbeefUL;
	r = get(&t, known);
	printf("probe exporttable f8cff951 -> result=%d table=%s\n", r,
	       t == (const void *)0xdeadbeefUL ? "untouched" : t ? "set" : "NULL");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: procdump REAL_LIBCUDA NAMES\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "procdump: %s\n", dlerror());
		return 1;
	}
	gpa1 = (gpa1_t)dlsym(h, "cuGetProcAddress");
	gpa2 = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
	CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
	CUresult (*drv)(int *) = (CUresult(*)(int *))dlsym(h, "cuDriverGetVersion");
	if (!gpa1 || !gpa2 || !init || !drv)
		return 1;
	probe("before-cuInit", "cuMemAlloc", 13000, 0, 1, 1);
	probe("before-cuInit-missing", "cuNoSuchSymbol", 13000, 0, 1, 1);
	int dv = 0;
	printf("probe cuInit -> %d\n", init(0));
	drv(&dv);
	printf("probe driver-version %d\n", dv);
	probe("missing", "cuNoSuchSymbol", 13000, 0, 1, 1);
	probe("missing-old-version", "cuNoSuchSymbol", 11000, 0, 1, 1);
	probe("missing-ptds", "cuNoSuchSymbol", 13000, 2, 1, 1);
	probe("missing-no-status", "cuNoSuchSymbol", 13000, 0, 1, 0);
	probe("empty-name", "", 13000, 0, 1, 1);
	if (!strcmp(argv[2], "--null")) {
		/* In a process of its own: a driver may crash on these. */
		fflush(stdout);
		probe("null-symbol", NULL, 13000, 0, 1, 1);
		fflush(stdout);
		probe("null-pfn", "cuMemAlloc", 13000, 0, 0, 1);
		return 0;
	}
	probe("bad-flags", "cuMemAlloc", 13000, 4, 1, 1);
	probe("bad-flags-3", "cuMemAlloc", 13000, 3, 1, 1);
	probe("version-0", "cuMemAlloc", 0, 0, 1, 1);
	probe("version-negative", "cuMemAlloc", -1, 0, 1, 1);
	probe("version-too-low", "cuCtxCreate_v4", 11000, 0, 1, 1);
	probe("version-too-low-base", "cuMemAllocAsync", 11000, 0, 1, 1);
	probe("version-future", "cuMemAlloc", 99999, 0, 1, 1);
	probe("versioned-name", "cuMemAlloc_v2", 13000, 0, 1, 1);
	probe("getexporttable", "cuGetExportTable", 13000, 0, 1, 1);
	probe("getprocaddress", "cuGetProcAddress", 13000, 0, 1, 1);
	probe("version-negative-ctxcreate", "cuCtxCreate", -1, 0, 1, 1);
	probe("version-negative-ctxsync", "cuCtxSynchronize", -1, 0, 1, 1);
	probe("version-min-int", "cuCtxSynchronize", -2147483647 - 1, 0, 1, 1);
	probe("version-between", "cuCtxSynchronize", 12999, 0, 1, 1);
	probe("version-between-2", "cuCtxSynchronize", 13005, 0, 1, 1);
	probe("version-driver-max", "cuCtxSynchronize", 13009, 0, 1, 1);
	export_probes(h);

	FILE *nf = fopen(argv[2], "r");
	if (!nf)
		return 1;
	char name[256], a[160], prev[160], diffs[64];
	while (fgets(name, sizeof name, nf)) {
		name[strcspn(name, "\r\n")] = 0;
		if (!*name)
			continue;
		for (unsigned long long flags = 0; flags <= 2; flags++) {
			printf("%s %llu", name, flags);
			prev[0] = 0;
			int ndiff = 0;
			for (int v = 0; v <= 13200; v += 10) {
				void *pfn = NULL;
				int st = -1;
				CUresult r = gpa2(name, &pfn, v, flags, &st);
				answer(r, st, pfn, a, sizeof a);
				if (strcmp(a, prev)) {
					printf(" %d:%s", v, a);
					strcpy(prev, a);
				}
				void *pfn1 = NULL;
				CUresult r1 = gpa1(name, &pfn1, v, flags);
				if ((r1 != r || pfn1 != (r == 0 ? pfn : pfn1)) && ndiff < 1) {
					snprintf(diffs, sizeof diffs, "%d:%d", v, r1);
					ndiff++;
				}
			}
			printf("\n");
			if (ndiff)
				printf("v1diff %s %llu first-at %s\n", name, flags, diffs);
		}
	}
	return 0;
}
