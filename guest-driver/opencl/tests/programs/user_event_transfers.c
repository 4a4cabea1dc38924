/* Non-blocking read, map, large write and image read (into memory with a
 * padded row pitch) that wait on a user event which
 * a second thread sets later: each enqueue must return at once, and the
 * data must be there when the application's wait returns.
 *
 * Prints "enqueued <what>: <status> <gate>" (gate: 1 if the user event was
 * already set when the enqueue returned, i.e. the enqueue waited), then
 * after the wait "<what>: ok ..." or "<what>: FAIL ...". An alarm ends a
 * deadlocked run. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N (1 << 20) /* bytes: beyond what a batch carries */

static cl_event gate;
static volatile int opened;

static void *open_gate(void *arg) {
    (void)arg;
    usleep(300 * 1000);
    opened = 1;
    __sync_synchronize();
    clSetUserEventStatus(gate, CL_COMPLETE);
    return NULL;
}

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    char name[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(60);
    clGetPlatformIDs(1, &platform, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", name);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, NULL, &err);
    unsigned char *pattern = malloc(N), *back = malloc(N), *fresh = malloc(N);
    for (int i = 0; i < N; i++) {
        pattern[i] = (unsigned char)(i * 7 + 1);
        fresh[i] = (unsigned char)(i * 13 + 5);
    }
    cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N, pattern, &err);
    cl_mem other = clCreateBuffer(context, CL_MEM_READ_WRITE, N, NULL, &err);

    /* read, gated */
    gate = clCreateUserEvent(context, &err);
    opened = 0;
    pthread_t thread;
    pthread_create(&thread, NULL, open_gate, NULL);
    cl_event done;
    memset(back, 0, N);
    err = clEnqueueReadBuffer(queue, buffer, CL_FALSE, 0, N, back, 1, &gate, &done);
    printf("enqueued read: %d %d\n", err, opened);
    err = clWaitForEvents(1, &done);
    pthread_join(thread, NULL);
    printf("read: %s %d\n", err == 0 && memcmp(back, pattern, N) == 0 ? "ok" : "FAIL", err);
    clReleaseEvent(done);
    clReleaseEvent(gate);

    /* write of 1 MiB, gated, then a blocking read of it */
    gate = clCreateUserEvent(context, &err);
    opened = 0;
    pthread_create(&thread, NULL, open_gate, NULL);
    err = clEnqueueWriteBuffer(queue, other, CL_FALSE, 0, N, fresh, 1, &gate, NULL);
    printf("enqueued write: %d %d\n", err, opened);
    err = clFinish(queue);
    pthread_join(thread, NULL);
    memset(back, 0, N);
    cl_int read = clEnqueueReadBuffer(queue, other, CL_TRUE, 0, N, back, 0, NULL, NULL);
    printf("write: %s %d %d\n", err == 0 && read == 0 && memcmp(back, fresh, N) == 0 ? "ok" : "FAIL", err, read);
    clReleaseEvent(gate);

    /* map, gated, without an event: clFinish is the wait */
    gate = clCreateUserEvent(context, &err);
    opened = 0;
    pthread_create(&thread, NULL, open_gate, NULL);
    unsigned char *mapped = clEnqueueMapBuffer(queue, buffer, CL_FALSE, CL_MAP_READ, 0, N, 1, &gate, NULL, &err);
    printf("enqueued map: %d %d\n", err, opened);
    cl_int finished = clFinish(queue);
    pthread_join(thread, NULL);
    printf("map: %s %d %d\n", err == 0 && finished == 0 && memcmp(mapped, pattern, N) == 0 ? "ok" : "FAIL", err, finished);
    clEnqueueUnmapMemObject(queue, buffer, mapped, 0, NULL, NULL);
    clFinish(queue);

    /* image read, gated, rows padded: 64x32 RGBA8 into rows of 300 bytes */
    enum { W = 64, H = 32, PITCH = 300 };
    cl_image_format format = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_image_desc desc = {0};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = W;
    desc.image_height = H;
    cl_mem image = clCreateImage(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &format, &desc, pattern, &err);
    gate = clCreateUserEvent(context, &err);
    opened = 0;
    pthread_create(&thread, NULL, open_gate, NULL);
    memset(back, 0xEE, N);
    size_t origin[3] = {0, 0, 0}, region[3] = {W, H, 1};
    err = clEnqueueReadImage(queue, image, CL_FALSE, origin, region, PITCH, 0, back, 1, &gate, &done);
    printf("enqueued image: %d %d\n", err, opened);
    err = clWaitForEvents(1, &done);
    pthread_join(thread, NULL);
    int same = 1;
    for (int y = 0; y < H; y++) {
        same &= memcmp(back + y * PITCH, pattern + y * W * 4, W * 4) == 0;
        same &= back[y * PITCH + W * 4] == 0xEE; /* the padding is untouched */
    }
    printf("image: %s %d\n", err == 0 && same ? "ok" : "FAIL", err);
    clReleaseEvent(done);
    clReleaseEvent(gate);
    clReleaseMemObject(image);
    return 0;
}
