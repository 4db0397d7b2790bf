#include "session.h"

#include <stdio.h>
#include <string.h>

#include "generator/emit.h"
#include "generator/family.h"
#include "generator/variant.h"

ft_status ft__session_open(int device, const char *cache_dir, int with_reference, ft_session *s,
                           ft_err *err)
{
    ft_status rc;

    memset(s, 0, sizeof *s);
    s->device = device;
    rc = ft__cuda_load(&s->cu, err);
    if (rc != FT_OK)
        return rc;
    rc = ft__cuda_device_arch(s->cu, device, &s->arch, err);
    if (rc != FT_OK)
        return rc;
    rc = ft__cuda_use_device(s->cu, device, &s->ctx, err);
    if (rc != FT_OK)
        return rc;
    if (cache_dir == NULL || cache_dir[0] != '\0') {
        rc = ft__cache_open(cache_dir, &s->cache, err);
        if (rc != FT_OK)
            goto fail;
    }
    if (with_reference) {
        rc = ft__verifier_init(s->cu, &s->arch, s->cache, &s->verifier, err);
        if (rc != FT_OK)
            goto fail;
    }
    return FT_OK;
fail:
    ft__session_close(s);
    return rc;
}

void ft__session_close(ft_session *s)
{
    if (s->cu == NULL)
        return;
    if (s->verifier.module != NULL)
        ft__verifier_free(&s->verifier);
    ft__cache_close(s->cache);
    s->cache = NULL;
    if (s->ctx != NULL)
        ft__cuda_release(s->cu, s->device);
    s->ctx = NULL;
    s->cu = NULL;
}

void ft__session_fingerprint(const ft_session *s, ft_db_device *dev)
{
    CUdevice d;
    int l2 = 0, major = 0, minor = 0;

    memset(dev, 0, sizeof *dev);
    s->cu->p_cuDeviceGet(&d, s->device);
    s->cu->p_cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d);
    snprintf(dev->name, sizeof dev->name, "%s", s->arch.device_name);
    dev->cc = s->arch.cc;
    dev->sms = s->arch.sms;
    dev->smem_per_block = s->arch.smem_per_block;
    dev->smem_per_sm = s->arch.smem_per_sm;
    dev->l2_bytes = l2;
    dev->driver_version = s->cu->driver_version;
    ft__nvrtc_version(&major, &minor, NULL);
    snprintf(dev->nvrtc_version, sizeof dev->nvrtc_version, "%d.%d", major, minor);
}

void ft__variant_problem(const ft_spec *spec, const ft_variant *v, ft_problem *p)
{
    const char *dtype = ft__variant_str(spec, v, "dtype");
    p->head_dim = (int)ft__variant_int(spec, v, "d", 0);
    p->causal = (int)ft__variant_int(spec, v, "causal", 0);
    p->deterministic = (int)ft__variant_int(spec, v, "det", 0);
    p->bf16 = dtype != NULL && strcmp(dtype, "bf16") == 0;
}

ft_status ft__session_load(ft_session *s, ft_spec *spec, const ft_variant *v, const void *cubin,
                           const char *entry, long long smem_dynamic, int threads, ft_kernel *out, ft_err *err)
{
    const ft_family *fam = ft__spec_family(spec, err);
    char text[FT_VARIANT_STR_MAX];
    ft_launch_facts facts;

    if (fam == NULL)
        return FT_ERR_SPEC;
    ft__variant_format(spec, v, text, sizeof text);
    ft__family_launch(fam, text, threads, smem_dynamic, &facts);
    return ft__kernel_load_family(s->cu, fam, cubin, entry, &facts, &s->arch, out, err);
}

ft_status ft__session_build(ft_session *s, ft_spec *spec, const ft_variant *v, ft_kernel *out,
                            ft_resource_report *report, ft_err *err)
{
    ft_status rc;
    const ft_family *fam = ft__spec_family(spec, err);
    ft_kernel_source src;
    ft_compiled c;
    char why[256];
    char name[300];
    char target[32];

    memset(&src, 0, sizeof src);
    memset(&c, 0, sizeof c);
    if (fam == NULL)
        return FT_ERR_SPEC;
    if (!ft__family_supports_arch(fam, &s->arch, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s (the GPU is %s, %s)", why, s->arch.device_name, s->arch.name);
    rc = ft__emit(spec, fam, v, &s->arch, &src, err);
    if (rc != FT_OK)
        goto out;
    snprintf(name, sizeof name, "%s.cu", src.entry);
    ft__family_target(fam, &s->arch, target, sizeof target);
    rc = ft__compile(src.text, name, target, s->cache, &c, err);
    if (rc != FT_OK)
        goto out;
    if (report != NULL)
        *report = c.report;
    rc = ft__session_load(s, spec, v, c.cubin, src.entry, src.smem_dynamic, src.threads, out, err);
out:
    ft__compiled_free(&c);
    ft__kernel_source_free(&src);
    return rc;
}
