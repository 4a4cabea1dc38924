/* images: images and samplers end to end.
 * A 2D RGBA float image (COPY_HOST_PTR with a padded row pitch), written,
 * sampled by a kernel through a sampler (nearest and linear), read back with
 * pitches, copied image to image, image to buffer and back, filled, mapped
 * and unmapped; a 3D, a 2D array and a 1D buffer image; info queries; and
 * hostile regions and pitches refused. The checksum covers every byte read
 * back and every error code, so native and vgpu runs compare exactly. */
#define CL_TARGET_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "cltest.h"

static const char *src =
    "__kernel void sample(__read_only image2d_t img, sampler_t s,\n"
    "                     __global float4 *out, float dx)\n"
    "{\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    int w = get_image_width(img);\n"
    "    float2 at = (float2)(x + 0.5f + dx, y + 0.5f);\n"
    "    out[y * w + x] = read_imagef(img, s, at);\n"
    "}\n"
    "__kernel void scale(__read_only image2d_t in, __write_only image2d_t out)\n"
    "{\n"
    "    int2 p = (int2)(get_global_id(0), get_global_id(1));\n"
    "    write_imagef(out, p, read_imagef(in, p) * 2.0f);\n"
    "}\n";

static uint64_t sum = CLTEST_FNV_INIT;

static void mix(const void *p, size_t n) { sum = cltest_fnv1a(sum, p, n); }

/* Where PoCL accepts what the spec refuses (empty regions, short pitches,
 * unknown or unsupported formats), vgpu refuses with the
 * spec's code: printed, not part of the checksum. */
static void spec_code(cl_int got, cl_int want, const char *what)
{
    printf("%s: %s (spec: %s)\n", what, cltest_err_name(got), cltest_err_name(want));
}

/* Records an error code the run must reproduce. */
static void expect(cl_int got, cl_int want, const char *what)
{
    printf("%s: %s\n", what, cltest_err_name(got));
    if (got != want && !getenv("IMAGES_LENIENT"))
        cltest_fail("%s: %s, expected %s", what, cltest_err_name(got), cltest_err_name(want));
    mix(&got, sizeof got);
}

int main(int argc, char **argv)
{
    cltest_env env;
    cl_int err;
    cltest_init("images");
    cltest_args_check(argc, argv, "", "");
    cltest_setup(&env, 0);

    cl_bool images = CL_FALSE;
    CL_CHECK(clGetDeviceInfo(env.device, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images, NULL));
    if (!images)
        cltest_fail("no image support");
    size_t max2d = 0;
    CL_CHECK(clGetDeviceInfo(env.device, CL_DEVICE_IMAGE2D_MAX_WIDTH, sizeof max2d, &max2d, NULL));
    printf("image support, 2D max width %zu\n", max2d);

    cl_uint nformats = 0;
    CL_CHECK(clGetSupportedImageFormats(env.context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, 0, NULL, &nformats));
    cl_image_format *formats = cltest_xmalloc(nformats * sizeof *formats);
    CL_CHECK(clGetSupportedImageFormats(env.context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, nformats, formats, NULL));
    int rgba_float = 0;
    for (cl_uint i = 0; i < nformats; i++)
        rgba_float |= formats[i].image_channel_order == CL_RGBA && formats[i].image_channel_data_type == CL_FLOAT;
    printf("%u 2D formats, RGBA/FLOAT %s\n", nformats, rgba_float ? "yes" : "no");
    mix(&nformats, sizeof nformats);
    mix(formats, nformats * sizeof *formats);
    if (!rgba_float)
        cltest_fail("RGBA/FLOAT missing");

    enum { W = 37, H = 23, PITCH = (W + 3) * 16 };
    cl_image_format fmt = { CL_RGBA, CL_FLOAT };
    float *host = cltest_xmalloc((size_t)PITCH * H);
    memset(host, 0, (size_t)PITCH * H);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 4; c++)
                host[(y * PITCH / 16 + x) * 4 + c] = (float)(x * 3 + y * 5 + c) / 8.0f;
    cl_image_desc d2 = { .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = W, .image_height = H,
                         .image_row_pitch = PITCH };
    cl_mem img = clCreateImage(env.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &fmt, &d2, host, &err);
    CL_CHECK_ERR(err, "clCreateImage 2D");

    size_t v = 0;
    CL_CHECK(clGetImageInfo(img, CL_IMAGE_ELEMENT_SIZE, sizeof v, &v, NULL));
    mix(&v, sizeof v);
    CL_CHECK(clGetImageInfo(img, CL_IMAGE_WIDTH, sizeof v, &v, NULL));
    mix(&v, sizeof v);
    CL_CHECK(clGetImageInfo(img, CL_IMAGE_HEIGHT, sizeof v, &v, NULL));
    mix(&v, sizeof v);
    cl_image_format got_fmt;
    CL_CHECK(clGetImageInfo(img, CL_IMAGE_FORMAT, sizeof got_fmt, &got_fmt, NULL));
    mix(&got_fmt, sizeof got_fmt);
    cl_mem_object_type mt = 0;
    CL_CHECK(clGetMemObjectInfo(img, CL_MEM_TYPE, sizeof mt, &mt, NULL));
    mix(&mt, sizeof mt);
    CL_CHECK(clGetMemObjectInfo(img, CL_MEM_SIZE, sizeof v, &v, NULL));
    printf("2D image: %zu bytes\n", v);

    /* Read back with a different pitch than it was written with. */
    size_t origin[3] = { 0, 0, 0 }, region[3] = { W, H, 1 };
    float *back = cltest_xmalloc((size_t)W * H * 16 + 64);
    CL_CHECK(clEnqueueReadImage(env.queue, img, CL_TRUE, origin, region, 0, 0, back, 0, NULL, NULL));
    for (int y = 0; y < H; y++)
        if (memcmp(back + y * W * 4, host + y * PITCH / 4, W * 16))
            cltest_fail("row %d differs after COPY_HOST_PTR", y);
    mix(back, (size_t)W * H * 16);

    /* A sub-rectangle written non-blocking, then read with a padded pitch. */
    float patch[5 * 4 * 4];
    for (int i = 0; i < 5 * 4 * 4; i++)
        patch[i] = -(float)i;
    size_t porigin[3] = { 3, 7, 0 }, pregion[3] = { 5, 4, 1 };
    cl_event wev;
    CL_CHECK(clEnqueueWriteImage(env.queue, img, CL_FALSE, porigin, pregion, 0, 0, patch, 0, NULL, &wev));
    CL_CHECK(clWaitForEvents(1, &wev));
    CL_CHECK(clReleaseEvent(wev));
    float padded[8 * 4 * 4];
    memset(padded, 0x55, sizeof padded);
    CL_CHECK(clEnqueueReadImage(env.queue, img, CL_TRUE, porigin, pregion, 8 * 16, 0, padded, 0, NULL, NULL));
    mix(padded, sizeof padded);

    /* Samplers: nearest unnormalized, linear unnormalized. */
    cl_sampler nearest = clCreateSampler(env.context, CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST, &err);
    CL_CHECK_ERR(err, "clCreateSampler");
    cl_sampler_properties lp[] = { CL_SAMPLER_NORMALIZED_COORDS, CL_FALSE,
                                   CL_SAMPLER_FILTER_MODE, CL_FILTER_LINEAR, 0 };
    cl_sampler linear = clCreateSamplerWithProperties(env.context, lp, &err);
    CL_CHECK_ERR(err, "clCreateSamplerWithProperties");
    cl_addressing_mode am = 0;
    CL_CHECK(clGetSamplerInfo(linear, CL_SAMPLER_ADDRESSING_MODE, sizeof am, &am, NULL));
    cl_filter_mode fm = 0;
    CL_CHECK(clGetSamplerInfo(linear, CL_SAMPLER_FILTER_MODE, sizeof fm, &fm, NULL));
    mix(&am, sizeof am);
    mix(&fm, sizeof fm);
    CL_CHECK(clRetainSampler(linear));
    CL_CHECK(clReleaseSampler(linear));

    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel ks = cltest_kernel(prog, "sample");
    cl_mem out = cltest_buffer(&env, CL_MEM_READ_WRITE, (size_t)W * H * 16, NULL);
    float *res = cltest_xmalloc((size_t)W * H * 16);
    size_t global[2] = { W, H };
    cl_sampler samplers[2] = { nearest, linear };
    float shifts[2] = { 0.0f, 0.25f };
    for (int i = 0; i < 2; i++) {
        CL_CHECK(clSetKernelArg(ks, 0, sizeof img, &img));
        CL_CHECK(clSetKernelArg(ks, 1, sizeof(cl_sampler), &samplers[i]));
        CL_CHECK(clSetKernelArg(ks, 2, sizeof out, &out));
        CL_CHECK(clSetKernelArg(ks, 3, sizeof(float), &shifts[i]));
        CL_CHECK(clEnqueueNDRangeKernel(env.queue, ks, 2, NULL, global, NULL, 0, NULL, NULL));
        CL_CHECK(clEnqueueReadBuffer(env.queue, out, CL_TRUE, 0, (size_t)W * H * 16, res, 0, NULL, NULL));
        mix(res, (size_t)W * H * 16);
        printf("sampler %d: out[1][2] = %g %g %g %g\n", i, res[(W + 2) * 4], res[(W + 2) * 4 + 1],
               res[(W + 2) * 4 + 2], res[(W + 2) * 4 + 3]);
    }

    /* Image to image through a kernel, then copies. */
    cl_mem img2 = clCreateImage2D(env.context, CL_MEM_READ_WRITE, &fmt, W, H, 0, NULL, &err);
    CL_CHECK_ERR(err, "clCreateImage2D");
    cl_kernel kc = cltest_kernel(prog, "scale");
    CL_CHECK(clSetKernelArg(kc, 0, sizeof img, &img));
    CL_CHECK(clSetKernelArg(kc, 1, sizeof img2, &img2));
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, kc, 2, NULL, global, NULL, 0, NULL, NULL));
    size_t corigin[3] = { 2, 1, 0 }, cdst[3] = { 10, 12, 0 }, cregion[3] = { 9, 6, 1 };
    CL_CHECK(clEnqueueCopyImage(env.queue, img, img2, corigin, cdst, cregion, 0, NULL, NULL));
    cl_mem lin = cltest_buffer(&env, CL_MEM_READ_WRITE, (size_t)W * H * 16, NULL);
    CL_CHECK(clEnqueueCopyImageToBuffer(env.queue, img2, lin, origin, region, 0, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(env.queue, lin, CL_TRUE, 0, (size_t)W * H * 16, res, 0, NULL, NULL));
    mix(res, (size_t)W * H * 16);
    CL_CHECK(clEnqueueCopyBufferToImage(env.queue, lin, img, 16 * 3, cdst, cregion, 0, NULL, NULL));

    /* Fill, then map for reading and for writing. */
    float color[4] = { 0.5f, -1.0f, 2.0f, 4.0f };
    size_t forigin[3] = { 30, 0, 0 }, fregion[3] = { 7, 9, 1 };
    CL_CHECK(clEnqueueFillImage(env.queue, img, color, forigin, fregion, 0, NULL, NULL));
    size_t rp = 0, sp = 0;
    size_t morigin[3] = { 28, 5, 0 }, mregion[3] = { 9, 6, 1 };
    float *m = clEnqueueMapImage(env.queue, img, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, morigin, mregion,
                                 &rp, &sp, 0, NULL, NULL, &err);
    CL_CHECK_ERR(err, "clEnqueueMapImage");
    for (size_t y = 0; y < mregion[1]; y++) {
        mix((char *)m + y * rp, mregion[0] * 16);
        for (size_t x = 0; x < mregion[0]; x++)
            ((float *)((char *)m + y * rp))[x * 4] += 100.0f;
    }
    cl_uint maps = 0;
    CL_CHECK(clGetMemObjectInfo(img, CL_MEM_MAP_COUNT, sizeof maps, &maps, NULL));
    mix(&maps, sizeof maps);
    CL_CHECK(clEnqueueUnmapMemObject(env.queue, img, m, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadImage(env.queue, img, CL_TRUE, origin, region, 0, 0, back, 0, NULL, NULL));
    mix(back, (size_t)W * H * 16);

    /* A 3D image and a 2D array with pitched host data; a 1D buffer image. */
    enum { D = 3 };
    cl_image_format f8 = { CL_RGBA, CL_UNSIGNED_INT8 };
    unsigned char *vol = cltest_xmalloc(16 * 5 * D * 4 + 64);
    for (size_t i = 0; i < 16 * 5 * D * 4; i++)
        vol[i] = (unsigned char)(i * 7 + 1);
    cl_image_desc d3 = { .image_type = CL_MEM_OBJECT_IMAGE3D, .image_width = 4, .image_height = 5,
                         .image_depth = D, .image_row_pitch = 16 * 4, .image_slice_pitch = 16 * 4 * 5 };
    cl_mem vol_img = clCreateImage(env.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &f8, &d3, vol, &err);
    CL_CHECK_ERR(err, "clCreateImage 3D");
    unsigned char vback[4 * 5 * D * 4];
    size_t vregion[3] = { 4, 5, D };
    CL_CHECK(clEnqueueReadImage(env.queue, vol_img, CL_TRUE, origin, vregion, 0, 0, vback, 0, NULL, NULL));
    mix(vback, sizeof vback);
    cl_image_desc da = { .image_type = CL_MEM_OBJECT_IMAGE2D_ARRAY, .image_width = 4, .image_height = 5,
                         .image_array_size = D };
    cl_mem arr = clCreateImage(env.context, CL_MEM_READ_WRITE, &f8, &da, NULL, &err);
    CL_CHECK_ERR(err, "clCreateImage 2D array");
    CL_CHECK(clEnqueueCopyImage(env.queue, vol_img, arr, origin, origin, vregion, 0, NULL, NULL));
    size_t aorigin[3] = { 1, 1, 1 }, aregion[3] = { 3, 4, 2 };
    unsigned char aback[3 * 4 * 2 * 4];
    CL_CHECK(clEnqueueReadImage(env.queue, arr, CL_TRUE, aorigin, aregion, 0, 0, aback, 0, NULL, NULL));
    mix(aback, sizeof aback);
    CL_CHECK(clGetImageInfo(arr, CL_IMAGE_ARRAY_SIZE, sizeof v, &v, NULL));
    mix(&v, sizeof v);
    cl_mem store = cltest_buffer(&env, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 64 * 4, vol);
    cl_image_desc db = { .image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER, .image_width = 64, .buffer = store };
    cl_mem bimg = clCreateImage(env.context, CL_MEM_READ_WRITE, &f8, &db, NULL, &err);
    CL_CHECK_ERR(err, "clCreateImage 1D buffer");
    size_t bregion[3] = { 64, 1, 1 };
    unsigned char bback[64 * 4];
    CL_CHECK(clEnqueueReadImage(env.queue, bimg, CL_TRUE, origin, bregion, 0, 0, bback, 0, NULL, NULL));
    if (memcmp(bback, vol, sizeof bback))
        cltest_fail("1D buffer image does not show its buffer");
    mix(bback, sizeof bback);
    cl_mem assoc = NULL;
    CL_CHECK(clGetImageInfo(bimg, CL_IMAGE_BUFFER, sizeof assoc, &assoc, NULL));
    if (assoc != store)
        cltest_fail("CL_IMAGE_BUFFER is not the buffer");

    /* USE_HOST_PTR with a padded pitch: maps return the application's
     * memory, which a map for reading brings up to date. */
    enum { UW = 6, UH = 5, UPITCH = 8 * 4 };
    unsigned char *uhost = cltest_xmalloc(UPITCH * UH);
    memset(uhost, 0, UPITCH * UH);
    cl_image_desc du = { .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = UW, .image_height = UH,
                         .image_row_pitch = UPITCH };
    cl_mem uimg = clCreateImage(env.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, &f8, &du, uhost, &err);
    CL_CHECK_ERR(err, "clCreateImage USE_HOST_PTR");
    unsigned char upatch[4 * 3 * 4];
    for (size_t i = 0; i < sizeof upatch; i++)
        upatch[i] = (unsigned char)(200 - i);
    size_t uorigin[3] = { 1, 2, 0 }, uregion[3] = { 4, 3, 1 };
    CL_CHECK(clEnqueueWriteImage(env.queue, uimg, CL_TRUE, uorigin, uregion, 0, 0, upatch, 0, NULL, NULL));
    unsigned char *um = clEnqueueMapImage(env.queue, uimg, CL_TRUE, CL_MAP_READ, uorigin, uregion, &rp, NULL,
                                          0, NULL, NULL, &err);
    CL_CHECK_ERR(err, "clEnqueueMapImage USE_HOST_PTR");
    long at = (long)(um - uhost);
    mix(&at, sizeof at);
    mix(&rp, sizeof rp);
    for (size_t y = 0; y < uregion[1]; y++)
        mix(um + y * rp, uregion[0] * 4);
    CL_CHECK(clEnqueueUnmapMemObject(env.queue, uimg, um, 0, NULL, NULL));
    CL_CHECK(clGetImageInfo(uimg, CL_IMAGE_ROW_PITCH, sizeof v, &v, NULL));
    mix(&v, sizeof v);

    /* A 1D array read with a pitch wider than its rows. (The layer step is
     * the slice pitch, which defaults to the row pitch; PoCL 3.1 ignores a
     * slice pitch given for a 1D array, so the test gives the row pitch.) */
    cl_image_desc d1a = { .image_type = CL_MEM_OBJECT_IMAGE1D_ARRAY, .image_width = 8, .image_array_size = 4 };
    cl_mem arr1 = clCreateImage(env.context, CL_MEM_READ_WRITE, &f8, &d1a, NULL, &err);
    CL_CHECK_ERR(err, "clCreateImage 1D array");
    size_t a1region[3] = { 8, 4, 1 };
    CL_CHECK(clEnqueueWriteImage(env.queue, arr1, CL_TRUE, origin, a1region, 0, 0, vol, 0, NULL, NULL));
    unsigned char a1back[4 * 48];
    memset(a1back, 0, sizeof a1back);
    size_t a1origin[3] = { 2, 1, 0 }, a1part[3] = { 5, 3, 1 };
    CL_CHECK(clEnqueueReadImage(env.queue, arr1, CL_TRUE, a1origin, a1part, 48, 0, a1back, 0, NULL, NULL));
    mix(a1back, sizeof a1back);

    /* A large image: several messages each way, padded host rows. */
    enum { BW = 700, BH = 300, BPITCH = BW * 16 + 64 };
    float *big = cltest_xmalloc((size_t)BPITCH * BH);
    for (size_t i = 0; i < (size_t)BPITCH * BH / 4; i++)
        big[i] = (float)(i % 9973) * 0.5f;
    cl_mem bigimg = clCreateImage2D(env.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &fmt, BW, BH,
                                    BPITCH, big, &err);
    CL_CHECK_ERR(err, "clCreateImage2D large");
    size_t bigregion[3] = { BW - 3, BH - 2, 1 }, bigorigin[3] = { 3, 2, 0 };
    float *bigback = cltest_xmalloc((size_t)BW * BH * 16);
    CL_CHECK(clEnqueueReadImage(env.queue, bigimg, CL_TRUE, bigorigin, bigregion, 0, 0, bigback, 0, NULL, NULL));
    for (size_t y = 0; y < bigregion[1]; y++)
        if (memcmp(bigback + y * bigregion[0] * 4, (char *)big + (y + 2) * BPITCH + 3 * 16, bigregion[0] * 16))
            cltest_fail("large image row %zu differs", y);
    mix(bigback, bigregion[0] * bigregion[1] * 16);
    CL_CHECK(clReleaseMemObject(bigimg));
    free(big);
    free(bigback);

    /* Hostile input: refused with the codes native gives. */
    size_t huge[3] = { (size_t)-1 / 2, 2, 1 }, over[3] = { W + 1, 1, 1 }, zero[3] = { 0, 1, 1 };
    expect(clEnqueueReadImage(env.queue, img, CL_TRUE, origin, huge, 0, 0, back, 0, NULL, NULL),
           CL_INVALID_VALUE, "huge region");
    expect(clEnqueueReadImage(env.queue, img, CL_TRUE, origin, over, 0, 0, back, 0, NULL, NULL),
           CL_INVALID_VALUE, "region past the edge");
    spec_code(clEnqueueReadImage(env.queue, img, CL_TRUE, origin, zero, 0, 0, back, 0, NULL, NULL),
           CL_INVALID_VALUE, "empty region");
    spec_code(clEnqueueWriteImage(env.queue, img, CL_TRUE, origin, region, 16, 0, host, 0, NULL, NULL),
           CL_INVALID_VALUE, "row pitch below the row");
    size_t far[3] = { (size_t)-8, 0, 0 }, one[3] = { 16, 1, 1 };
    expect(clEnqueueCopyImage(env.queue, img, img2, far, origin, one, 0, NULL, NULL),
           CL_INVALID_VALUE, "origin that overflows");
    cl_image_format bad = { 0x1234, CL_FLOAT };
    clCreateImage(env.context, CL_MEM_READ_WRITE, &bad, &d2, NULL, &err);
    spec_code(err, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, "unknown channel order");
    cl_image_format unsupported = { CL_DEPTH_STENCIL, CL_UNORM_INT24 };
    clCreateImage(env.context, CL_MEM_READ_WRITE, &unsupported, &d2, NULL, &err);
    spec_code(err, CL_IMAGE_FORMAT_NOT_SUPPORTED, "format the device lacks");
    cl_image_desc dhuge = { .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = (size_t)1 << 40,
                            .image_height = 4 };
    clCreateImage(env.context, CL_MEM_READ_WRITE, &fmt, &dhuge, NULL, &err);
    spec_code(err, CL_INVALID_IMAGE_SIZE, "width beyond the device");
    expect(clEnqueueCopyImage(env.queue, img, vol_img, origin, origin, one, 0, NULL, NULL),
           CL_IMAGE_FORMAT_MISMATCH, "copy across formats");

    CL_CHECK(clFinish(env.queue));
    cl_mem objs[] = { img, img2, out, lin, vol_img, arr, bimg, store, uimg, arr1 };
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++)
        CL_CHECK(clReleaseMemObject(objs[i]));
    CL_CHECK(clReleaseSampler(nearest));
    CL_CHECK(clReleaseSampler(linear));
    CL_CHECK(clReleaseKernel(ks));
    CL_CHECK(clReleaseKernel(kc));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(host);
    free(back);
    free(res);
    free(vol);
    free(formats);
    free(uhost);
    cltest_pass(sum);
    return 0;
}
