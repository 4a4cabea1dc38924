/*
 * slotaddr: where the real driver's export-table slots lie in its file, so
 * that a slot's code can be read with objdump (what arguments it takes, what
 * it writes) when the traces leave its meaning open.
 *
 * usage: slotaddr /abs/path/libcuda.so.1 UUID32HEX:SLOT[,SLOT...] ...
 * prints "UUID[SLOT] 0xVADDR" per slot (the address relative to the
 * library's load base, as objdump --start-address wants it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_t)(unsigned);
typedef int (*get_t)(const void **, const unsigned char *);

static int parse_uuid(const char *text, unsigned char out[16])
{
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(text + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (unsigned char)v;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s LIBCUDA UUID:SLOT[,SLOT...] ...\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	init_t init = (init_t)dlsym(lib, "cuInit");
	get_t get = (get_t)dlsym(lib, "cuGetExportTable");
	if (!init || !get || init(0) != 0) {
		fprintf(stderr, "cuInit failed\n");
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		unsigned char id[16];
		const char *colon = strchr(argv[i], ':');
		if (!colon || parse_uuid(argv[i], id)) {
			fprintf(stderr, "bad argument %s\n", argv[i]);
			return 2;
		}
		const void **table = NULL;
		int r = get((const void **)&table, id);
		if (r || !table) {
			printf("%.32s: cuGetExportTable %d\n", argv[i], r);
			continue;
		}
		for (const char *p = colon + 1; *p;) {
			char *end;
			long slot = strtol(p, &end, 10);
			Dl_info di;
			const void *fn = table[slot];
			if (dladdr(fn, &di))
				printf("%.32s[%ld] 0x%llx\n", argv[i], slot,
				       (unsigned long long)((uintptr_t)fn - (uintptr_t)di.dli_fbase));
			else
				printf("%.32s[%ld] %p (data)\n", argv[i], slot, fn);
			p = *end == ',' ? end + 1 : end;
			if (end == p && *p != ',')
				break;
		}
	}
	return 0;
}
