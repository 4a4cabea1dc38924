/* cuDeviceGetAttribute for ids 0..255: result and value, one line each. */
#include <stdio.h>
#include <cuda.h>
int main(void)
{
	CUdevice d;
	if (cuInit(0) || cuDeviceGet(&d, 0))
		return 1;
	for (int a = 0; a < 256; a++) {
		int v = -12345;
		CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, d);
		printf("%d %d %d\n", a, (int)r, r ? -12345 : v);
	}
	return 0;
}
