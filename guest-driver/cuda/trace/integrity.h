/* See integrity.c. */
#include <stddef.h>
#include <stdint.h>

#define CUTRACE_MAX_DEVICES 16

struct cutrace_integrity_in {
	uint32_t driver_version, version, process, thread;
	const void *cudart_table, *integrity_table, *check_fn;
	uint64_t seconds;
};

struct cutrace_device_info {
	unsigned char uuid[16];
	int32_t pci_domain, pci_bus, pci_device;
};

void cutrace_md2(const unsigned char *msg, size_t n, unsigned char out[16]);
void cutrace_hmac_md2(const unsigned char key[16], const unsigned char *msg, size_t n, unsigned char out[16]);
void cutrace_integrity_hash(const struct cutrace_integrity_in *in, const struct cutrace_device_info *devices,
			    int ndevices, uint64_t out[2]);
