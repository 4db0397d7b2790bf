"""flashtune for PyTorch users: a thin ctypes binding over libflashtune.

    import torch, flashtune
    o = flashtune.attention(q, k, v, causal=True)  # differentiable: o.backward() works
    ctx = flashtune.Context()                      # GPU 0, tuned kernels
    o, lse = ctx.forward(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = ctx.backward(q, k, v, o, lse, do, causal=True)
    flashtune.tune(database="tuning.db")           # `flashtune tune` from Python: its summary

q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim], all
fp16 or bf16 CUDA tensors whose last dimension is contiguous, 16-byte aligned, with the other
strides multiples of 8 elements. out=, when given, must be all that as well, shaped and typed
like q, and share no memory with q, k or v (nor with itself). The call runs on PyTorch's
current stream. The library is found through $FLASHTUNE_LIB, else in this package (pip install .),
else next to this package's repository checkout (build/libflashtune.so), else by the dynamic
loader.
"""
import ctypes
import importlib.util
import math
import os
from typing import Optional, Tuple

__all__ = ["Context", "FlashtuneError", "attention", "attention_with_kvcache", "varlen_attention", "check_tensors", "library_path", "version", "flops", "key",
           "backward_flops", "scaled_dot_product_attention"]

FT_OPTIONS_VERSION = 2
FT_ARGS_VERSION = 5
FT_BWD_ARGS_VERSION = 1
_DTYPES = {"float16": 0, "bfloat16": 1}


class FlashtuneError(RuntimeError):
    """A flashtune call failed; the message is the library's."""


class _Options(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_int),
        ("device", ctypes.c_int),
        ("cache_dir", ctypes.c_char_p),
        ("spec", ctypes.c_char_p),
        ("variant", ctypes.c_char_p),
        ("database", ctypes.c_char_p),
        # version 2
        ("pack", ctypes.c_char_p),
        ("kernels", ctypes.c_void_p),
    ]


class _Args(ctypes.Structure):
    """ft_attention_args, version 5 (include/flashtune.h)."""
    _fields_ = [
        ("version", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("heads_q", ctypes.c_int),
        ("heads_kv", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64 * 3),
        ("k_stride", ctypes.c_int64 * 3),
        ("v_stride", ctypes.c_int64 * 3),
        ("o_stride", ctypes.c_int64 * 3),
        ("causal", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        # version 3
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        # version 4
        ("seqused_k", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("page_size", ctypes.c_int),
        ("block_table_stride", ctypes.c_int),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_k", ctypes.c_void_p),
        # version 5
        ("total_q", ctypes.c_int),
        ("total_k", ctypes.c_int),
    ]


class _BwdArgs(ctypes.Structure):
    """ft_attention_bwd_args, version 1 (include/flashtune.h)."""
    _fields_ = [
        ("version", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("heads_q", ctypes.c_int),
        ("heads_kv", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("dout", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p),
        ("dk", ctypes.c_void_p),
        ("dv", ctypes.c_void_p),
    ] + [(name + "_stride", ctypes.c_int64 * 3) for name in ("q", "k", "v", "o", "dout", "dq", "dk", "dv")] + [
        ("causal", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("deterministic", ctypes.c_int),
    ]


def _locate(env, in_package, in_build, fallback):
    """$env, else in_package inside this package (where pip install . puts it), else in_build in
    the build/ of the repository checkout this package lies in, else fallback."""
    if os.environ.get(env):
        return os.environ[env]
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, in_package), os.path.join(here, "..", "..", "build", in_build)):
        if os.path.exists(path):
            return path
    return fallback


def library_path():
    """$FLASHTUNE_LIB, else the library a pip install put into this package, else the build/ of
    the repository checkout this package lies in, else libflashtune.so.0 for the dynamic loader."""
    return _locate("FLASHTUNE_LIB", "libflashtune.so", "libflashtune.so", "libflashtune.so.0")


_lib = None


def _nvrtc_from_wheel():
    """libnvrtc.so.N of NVIDIA's nvidia-cuda-nvrtc wheel (nvidia/<cu13, cuda_nvrtc, ...>/lib), the
    highest N where several are installed; None without one."""
    import glob
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    roots = spec.submodule_search_locations if spec is not None else None
    found = [p for root in roots or [] for p in glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.[0-9]*"))]
    return max(found, key=lambda p: int(p.rsplit(".", 1)[1])) if found else None


def _load():
    global _lib
    if _lib is None:
        # libflashtune loads NVRTC when it first compiles: from $FLASHTUNE_NVRTC, else the CUDA
        # toolkit. In a Python environment that has NVIDIA's NVRTC wheel, that one.
        if not os.environ.get("FLASHTUNE_NVRTC"):
            wheel = _nvrtc_from_wheel()
            if wheel is not None:
                os.environ["FLASHTUNE_NVRTC"] = wheel
        lib = ctypes.CDLL(library_path())
        lib.ft_context_options_init.argtypes = [ctypes.POINTER(_Options)]
        lib.ft_context_create.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(ctypes.c_void_p)]
        lib.ft_context_create.restype = ctypes.c_int
        lib.ft_context_destroy.argtypes = [ctypes.c_void_p]
        lib.ft_last_error.argtypes = [ctypes.c_void_p]
        lib.ft_last_error.restype = ctypes.c_char_p
        lib.ft_status_name.argtypes = [ctypes.c_int]
        lib.ft_status_name.restype = ctypes.c_char_p
        lib.ft_attention_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Args), ctypes.c_void_p]
        lib.ft_attention_forward.restype = ctypes.c_int
        lib.ft_attention_kernel.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Args), ctypes.c_char_p, ctypes.c_size_t]
        lib.ft_attention_kernel.restype = ctypes.c_int
        lib.ft_version.argtypes = []
        lib.ft_version.restype = ctypes.c_char_p
        lib.ft_attention_flops.argtypes = [ctypes.POINTER(_Args)]
        lib.ft_attention_flops.restype = ctypes.c_double
        lib.ft_attention_key.argtypes = [ctypes.POINTER(_Args), ctypes.c_char_p, ctypes.c_size_t]
        lib.ft_attention_key.restype = ctypes.c_int
        try:  # a library before version 3 of the arguments reads version 2 (no workspace)
            lib.ft_attention_forward_workspace_size.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Args),
                                                                ctypes.POINTER(ctypes.c_size_t)]
            lib.ft_attention_forward_workspace_size.restype = ctypes.c_int
            lib.flashtune_args_version = FT_ARGS_VERSION
        except AttributeError:
            lib.flashtune_args_version = 2
        bwd = ctypes.POINTER(_BwdArgs)
        try:  # a library older than the backward (0.1.0 before it) still runs the forward
            lib.ft_attention_backward.argtypes = [ctypes.c_void_p, bwd, ctypes.c_void_p, ctypes.c_size_t,
                                                  ctypes.c_void_p]
            lib.ft_attention_backward.restype = ctypes.c_int
            lib.ft_attention_backward_workspace_size.argtypes = [ctypes.c_void_p, bwd, ctypes.POINTER(ctypes.c_size_t)]
            lib.ft_attention_backward_workspace_size.restype = ctypes.c_int
            lib.ft_attention_backward_kernel.argtypes = [ctypes.c_void_p, bwd, ctypes.c_char_p, ctypes.c_size_t]
            lib.ft_attention_backward_kernel.restype = ctypes.c_int
            lib.ft_attention_backward_flops.argtypes = [bwd]
            lib.ft_attention_backward_flops.restype = ctypes.c_double
            lib.flashtune_has_backward = True
        except AttributeError:
            lib.flashtune_has_backward = False
        _route_logs(lib)
        _lib = lib
    return _lib


_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
_log_callback = None  # kept for as long as the library may call it


def _env_on(name):
    """Whether a switch of the environment is on, as the library reads it (common/text.h)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "off", "false")


def _route_logs(lib):
    """The library's diagnostic lines go to the logging module's "flashtune" logger (its kernel
    choices at DEBUG, what failed without failing a call at WARNING) unless FLASHTUNE_DEBUG asks
    for them on stderr, where C programs see them."""
    global _log_callback
    if _env_on("FLASHTUNE_DEBUG") or not hasattr(lib, "ft_set_log_handler"):
        return
    import logging
    logger = logging.getLogger("flashtune")

    def emit(_user, level, line):
        logger.log(logging.WARNING if level == 1 else logging.DEBUG, "%s", line.decode(errors="replace"))

    _log_callback = _LOG_FN(emit)
    lib.ft_set_log_handler.argtypes = [_LOG_FN, ctypes.c_void_p]
    lib.ft_set_log_handler.restype = None
    lib.ft_set_log_handler(_log_callback, None)


def _enc(s):
    return None if s is None else s.encode()


def _span(t):
    """The bytes [first, last) that tensor t's elements can touch; None when it has none."""
    if t.numel() == 0:
        return None
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    first = t.data_ptr()
    return first, first + (last + 1) * t.element_size()


def _overlaps_itself(t):
    """Whether two elements of t can share memory (an expanded or otherwise aliased view): its
    dimensions of more than one element, by increasing stride, must each step past all that
    the smaller ones reach."""
    reach = 0
    for st, n in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def _check_layout(name, t):
    """What the kernels need of every tensor: 4 dimensions, a contiguous head dimension, the
    other strides non-negative multiples of 8 elements, a 16-byte aligned start."""
    if t.dim() != 4:
        raise ValueError("%s must be [batch, seqlen, heads, head_dim], not %d-dimensional" % (name, t.dim()))
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError("%s's last dimension must be contiguous (its stride is %d)" % (name, t.stride(3)))
    strides = t.stride()[:3]
    if any(st < 0 or st % 8 != 0 for st in strides):
        raise ValueError("%s's strides %s must be non-negative multiples of 8 elements" % (name, tuple(strides)))
    if t.data_ptr() % 16 != 0:
        raise ValueError("%s is not 16-byte aligned (address 0x%x)" % (name, t.data_ptr()))


def check_tensors(q, k, v, out=None, device=None, paged=False):
    """Checks q, k, v and out (None: allocated by forward) as forward() needs them, before
    anything runs: ValueError (TypeError for what is no tensor) saying which tensor and what is
    wrong. device: the CUDA device index every tensor must be on; None checks only that they are
    all on q's device (so that the checks run on CPU tensors, without a GPU). paged: k and v are
    pools of pages [num_pages, page_size, heads_kv, head_dim], not one row of keys per sequence."""
    import torch

    tensors = (("q", q), ("k", k), ("v", v)) + ((("out", out),) if out is not None else ())
    for name, t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError("q must be float16 or bfloat16, not %s" % q.dtype)
    for name, t in tensors[1:]:
        if t.dtype != q.dtype:
            raise ValueError("%s must be %s like q, not %s" % (name, q.dtype, t.dtype))
    for name, t in tensors:
        if device is not None and (not t.is_cuda or t.device.index != device):
            raise ValueError("%s must be on cuda:%d, not %s" % (name, device, t.device))
        if t.device != q.device:
            raise ValueError("%s must be on q's device %s, not %s" % (name, q.device, t.device))
    for name, t in tensors:
        _check_layout(name, t)
    b, sq, hq, d = q.shape
    if paged:
        if k.shape[3] != d or tuple(v.shape) != tuple(k.shape):
            raise ValueError("k_cache and v_cache must be [num_pages, page_size, heads_kv, head_dim] with q's head_dim "
                             "%d, not %s and %s" % (d, tuple(k.shape), tuple(v.shape)))
    elif k.shape[0] != b or k.shape[3] != d or tuple(v.shape) != tuple(k.shape):
        raise ValueError("k and v must be [batch, seqlen_k, heads_kv, head_dim] matching q %s, not %s and %s"
                         % (tuple(q.shape), tuple(k.shape), tuple(v.shape)))
    if out is None:
        return
    want = (b, sq, hq, v.shape[3])
    if tuple(out.shape) != want:
        raise ValueError("out must be [batch, seqlen_q, heads_q, head_dim] = %s, not %s" % (want, tuple(out.shape)))
    if _overlaps_itself(out):
        raise ValueError("out's elements overlap each other (strides %s): it must not be an expanded view"
                         % (tuple(out.stride()),))
    mine = _span(out)
    for name, t in tensors[:3]:
        theirs = _span(t)
        if mine is not None and theirs is not None and mine[0] < theirs[1] and theirs[0] < mine[1]:
            raise ValueError("out shares memory with %s: the kernel would overwrite its input" % name)


class Context:
    """One GPU's kernels: the tuned winners of the database (default: $FLASHTUNE_DB or
    ~/.local/share/flashtune/tuning.db; "" for none), else built-in defaults. variant forces one
    variant of the spec for every call (benchmarks); it may leave out d, causal and dtype. pack
    takes the winners from a kernel pack (`flashtune export`) instead of a database."""

    def __init__(self, device=None, variant=None, spec=None, cache_dir=None, database=None, pack=None):
        import torch

        lib = _load()
        self._lib = lib
        self._handle = None
        self._workspace_sizes = {}
        opts = _Options()
        lib.ft_context_options_init(ctypes.byref(opts))
        opts.device = torch.cuda.current_device() if device is None else int(device)
        self._keep = [_enc(cache_dir), _enc(spec), _enc(variant), _enc(database),
                      _enc(None if pack is None else os.fspath(pack))]
        opts.cache_dir, opts.spec, opts.variant, opts.database, opts.pack = self._keep
        if pack is not None:
            # The exported ft_context_options_init fills a version-1 structure (all that older
            # libraries know); a pack needs version 2.
            opts.version = FT_OPTIONS_VERSION
        self.device = opts.device
        handle = ctypes.c_void_p()
        torch.cuda.init()  # the primary context PyTorch uses must exist first
        with torch.cuda.device(self.device):
            torch.empty(1, device="cuda")
            rc = lib.ft_context_create(ctypes.byref(opts), ctypes.byref(handle))
        if rc != 0:
            raise FlashtuneError(self._message(None, rc))
        self._handle = handle

    def _message(self, handle, rc):
        name = self._lib.ft_status_name(rc).decode()
        return "%s: %s" % (name, self._lib.ft_last_error(handle).decode())

    def close(self):
        if self._handle is not None:
            self._lib.ft_context_destroy(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _args(self, q, k, v, o, lse, causal, scale, checked=False):
        """The ft_attention_args of a call, after checking the tensors (check_tensors; checked:
        the caller did). o None: no output (kernel() only chooses), q stands in for it."""
        if not checked:
            check_tensors(q, k, v, o, self.device)
        if o is None:
            o = q
        b, sq, hq, d = q.shape
        sk, hkv = k.shape[1], k.shape[2]
        a = _Args()
        a.version = self._lib.flashtune_args_version
        a.dtype = _DTYPES[str(q.dtype).split(".")[1]]
        a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim = b, hq, hkv, sq, sk, d
        a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        a.lse = lse.data_ptr() if lse is not None else None
        for field, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", o)):
            getattr(a, field)[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.causal = 1 if causal else 0
        a.softmax_scale = 0.0 if scale is None else float(scale)
        return a

    def forward(self, q, k, v, causal=False, scale=None, return_lse=False, out=None, stream=None,
                cache_seqlens=None, block_table=None):
        """O (and with return_lse the fp32 [batch, heads_q, seqlen_q] LSE) of q [batch, seqlen_q,
        heads_q, d] against k, v [batch, seqlen_k, heads_kv, d]. A KV cache: cache_seqlens (int32
        [batch] on the GPU) the keys each sequence uses, its first ones; block_table (int32
        [batch, max_pages]) makes k, v pools of pages [num_pages, page_size, heads_kv, d] (page_size
        a multiple of 16), key j of sequence b at row j % page_size of page block_table[b, j //
        page_size]. Either runs the split-key kernels."""
        import torch

        # out and stream are checked before anything is allocated or launched
        check_tensors(q, k, v, out, self.device, paged=block_table is not None)
        _check_cache_index("cache_seqlens", cache_seqlens, (q.shape[0],), q.device)
        _check_cache_index("block_table", block_table, (q.shape[0], None), q.device)
        if block_table is not None and k.shape[1] % 16 != 0:
            raise ValueError("the pages of k_cache and v_cache must hold a multiple of 16 keys, not %d" % k.shape[1])
        if stream is not None:
            if not isinstance(stream, torch.cuda.Stream):
                raise TypeError("stream must be a torch.cuda.Stream, not %s" % type(stream).__name__)
            if stream.device != q.device:
                raise ValueError("stream must be on q's device %s, not %s" % (q.device, stream.device))
        o = torch.empty_like(q, memory_format=torch.contiguous_format) if out is None else out
        lse = None
        if return_lse:
            lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
        a = self._args(q, k, v, o, lse, causal, scale, checked=True)
        if cache_seqlens is not None or block_table is not None:
            if a.version < 4:
                raise FlashtuneError("this libflashtune reads no KV cache (version %d arguments)" % a.version)
            if cache_seqlens is not None:
                a.seqused_k = cache_seqlens.data_ptr()
            if block_table is not None:
                a.block_table = block_table.data_ptr()
                a.page_size, a.block_table_stride = k.shape[1], block_table.stride(0)
                a.seqlen_k = block_table.shape[1] * k.shape[1]
        self._launch(a, q.device, stream, ("cache", cache_seqlens is not None, a.page_size))
        return (o, lse) if return_lse else o

    def _launch(self, a, device, stream, extra):
        """Runs the forward of arguments a on stream (None: the current one) with the workspace
        it can use. extra: what besides the sizes makes the call another kind (its kernel)."""
        import torch

        ws = None
        if a.version >= 3:
            # Few queries against many keys split the keys and keep partial results here, from
            # PyTorch's allocator (stream-ordered); the size is asked once per kind of call.
            kind = ("fwd", a.dtype, a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal) + extra
            size = self._workspace_size(kind, self._lib.ft_attention_forward_workspace_size, a)
            if size > 0:
                ws = torch.empty(size, dtype=torch.uint8, device=device)
                a.workspace, a.workspace_bytes = ws.data_ptr(), size
        s = torch.cuda.current_stream(device) if stream is None else stream
        rc = self._lib.ft_attention_forward(self._handle, ctypes.byref(a), ctypes.c_void_p(s.cuda_stream))
        if rc != 0:
            raise FlashtuneError(self._message(self._handle, rc))

    def varlen_forward(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                       scale=None, return_lse=False, seqused_k=None, stream=None):
        """A variable-length batch: q [total_q, heads_q, d], k, v [total_k, heads_kv, d], the
        sequences' rows one after another, sequence b's at cu_seqlens_q[b] .. cu_seqlens_q[b + 1]
        (int32 [batch + 1] on the GPU; likewise cu_seqlens_k), max_seqlen_q and max_seqlen_k the
        longest sequences (ints). causal: each sequence's last query aligned with its last key.
        Returns O [total_q, heads_q, d] (and with return_lse the fp32 [heads_q, total_q] LSE).
        Without seqused_k, prefill-length batches run the sm_90a forward where there is one (the
        tensors' rows are passed as the library's total_q and total_k), else the split-key kernels."""
        import torch

        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3:
                raise ValueError("%s must be a [total, heads, head_dim] tensor, not %s" % (
                    name, tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__))
        check_tensors(q[None], k[None], v[None], None, self.device)
        batch = cu_seqlens_q.shape[0] - 1 if isinstance(cu_seqlens_q, torch.Tensor) and cu_seqlens_q.dim() == 1 else -1
        _check_cache_index("cu_seqlens_q", cu_seqlens_q, (max(batch, 0) + 1,), q.device, "[batch + 1]")
        _check_cache_index("cu_seqlens_k", cu_seqlens_k, (max(batch, 0) + 1,), q.device, "[batch + 1]")
        _check_cache_index("seqused_k", seqused_k, (max(batch, 0),), q.device)
        if batch < 1:
            raise ValueError("cu_seqlens_q must hold batch + 1 >= 2 offsets")
        if int(max_seqlen_q) < 1 or int(max_seqlen_k) < 1:
            raise ValueError("max_seqlen_q and max_seqlen_k must be positive, not %s and %s" % (max_seqlen_q,
                                                                                               max_seqlen_k))
        o = torch.empty_like(q, memory_format=torch.contiguous_format)
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device) if return_lse else None
        a = self._args(q[None], k[None], v[None], o[None], lse, causal, scale, checked=True)
        if a.version < 4:
            raise FlashtuneError("this libflashtune reads no variable-length batch (version %d arguments)" % a.version)
        a.batch, a.seqlen_q, a.seqlen_k = batch, int(max_seqlen_q), int(max_seqlen_k)
        a.cu_seqlens_q, a.cu_seqlens_k = cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr()
        if a.version >= 5:
            a.total_q, a.total_k = q.shape[0], k.shape[0]
        if seqused_k is not None:
            a.seqused_k = seqused_k.data_ptr()
        self._launch(a, q.device, stream, ("varlen", seqused_k is not None))
        return (o, lse) if return_lse else o

    def _workspace_size(self, kind, query, a):
        """The workspace bytes of a kind of call (sizes, dtype, causality...: the context keeps one
        kernel per kind), asked of the library (query: its *_workspace_size) once per kind."""
        size = self._workspace_sizes.get(kind)
        if size is None:
            c_size = ctypes.c_size_t()
            rc = query(self._handle, ctypes.byref(a), ctypes.byref(c_size))
            if rc != 0:
                raise FlashtuneError(self._message(self._handle, rc))
            size = self._workspace_sizes[kind] = c_size.value
        return size

    def kernel(self, q, k, v, causal=False, scale=None):
        """Which kernel forward() runs for these tensors and how it was chosen, e.g.
        "tuned for this bucket: d=128,bm=128,bn=176,...". Builds it on the first call of its kind."""
        a = self._args(q, k, v, None, None, causal, scale)
        buf = ctypes.create_string_buffer(1024)
        rc = self._lib.ft_attention_kernel(self._handle, ctypes.byref(a), buf, len(buf))
        if rc != 0:
            raise FlashtuneError(self._message(self._handle, rc))
        return buf.value.decode()


    def _bwd_args(self, q, k, v, o, lse, dout, dq, dk, dv, causal, scale, deterministic):
        b, sq, hq, d = q.shape
        sk, hkv = k.shape[1], k.shape[2]
        a = _BwdArgs()
        a.version = FT_BWD_ARGS_VERSION
        a.dtype = _DTYPES[str(q.dtype).split(".")[1]]
        a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim = b, hq, hkv, sq, sk, d
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("dout", dout), ("dq", dq), ("dk", dk), ("dv", dv)):
            setattr(a, name, t.data_ptr())
            getattr(a, name + "_stride")[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.lse = lse.data_ptr()
        a.causal = 1 if causal else 0
        a.softmax_scale = 0.0 if scale is None else float(scale)
        a.deterministic = 1 if deterministic else 0
        return a

    def backward(self, q, k, v, o, lse, dout, causal=False, scale=None, deterministic=False, dq=None, dk=None,
                 dv=None, stream=None):
        """dQ, dK, dV of o = forward(q, k, v, causal, scale) for the loss gradient dout, from the
        forward's o and lse (return_lse=True): recomputes the scores, stores none. dk and dv are
        shaped like k and v (with grouped-query heads, summed over each group's query heads).
        deterministic: the same bits on every run (slower). dq, dk, dv: tensors to write (laid
        out as forward's out=), else new ones. The workspace comes from PyTorch's allocator."""
        import torch

        _need_backward(self._lib)
        check_tensors(q, k, v, None, self.device)
        for name, t, like in (("o", o, q), ("dout", dout, q)):
            _check_grad(name, t, like, self.device)
        if not isinstance(lse, torch.Tensor) or lse.dtype != torch.float32 or not lse.is_contiguous() or \
                tuple(lse.shape) != (q.shape[0], q.shape[2], q.shape[1]) or lse.device != q.device:
            raise ValueError("lse must be the forward's: a contiguous float32 [batch, heads_q, seqlen_q] tensor on %s"
                             % q.device)
        outs = []
        for name, t, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
            if t is None:
                t = torch.empty_like(like, memory_format=torch.contiguous_format)
            else:
                _check_grad(name, t, like, self.device)
                if _overlaps_itself(t):
                    raise ValueError("%s's elements overlap each other: it must not be an expanded view" % name)
            outs.append(t)
        dq, dk, dv = outs
        a = self._bwd_args(q, k, v, o, lse, dout, dq, dk, dv, causal, scale, deterministic)
        # The size depends only on the sizes, dtype, causality and determinism (the context keeps
        # one kernel per kind of call): asked once per kind, not on every call.
        kind = ("bwd", a.dtype, a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal,
                a.deterministic)
        size = self._workspace_size(kind, self._lib.ft_attention_backward_workspace_size, a)
        ws = torch.empty(max(size, 1), dtype=torch.uint8, device=q.device)
        s = torch.cuda.current_stream(q.device) if stream is None else stream
        rc = self._lib.ft_attention_backward(self._handle, ctypes.byref(a), ctypes.c_void_p(ws.data_ptr()),
                                             size, ctypes.c_void_p(s.cuda_stream))
        if rc != 0:
            raise FlashtuneError(self._message(self._handle, rc))
        return dq, dk, dv

    def backward_kernel(self, q, k, v, causal=False, scale=None, deterministic=False):
        """Which kernel backward() runs for these tensors and how it was chosen."""
        import torch

        _need_backward(self._lib)
        check_tensors(q, k, v, None, self.device)
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        dq = torch.empty_like(q)
        a = self._bwd_args(q, k, v, q, lse, q, dq, dk, dv, causal, scale, deterministic)
        buf = ctypes.create_string_buffer(1024)
        rc = self._lib.ft_attention_backward_kernel(self._handle, ctypes.byref(a), buf, len(buf))
        if rc != 0:
            raise FlashtuneError(self._message(self._handle, rc))
        return buf.value.decode()


def _need_backward(lib):
    if not lib.flashtune_has_backward:
        raise FlashtuneError("the loaded libflashtune (%s, %s) has no backward pass: rebuild it" %
                             (lib.ft_version().decode(), library_path()))


def _check_grad(name, t, like, device):
    """A tensor of the backward (o, dout, dq, dk, dv) must be shaped, typed and placed like the
    tensor it goes with, laid out as the kernels need."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
        raise ValueError("%s must be %s %s, not %s %s" % (name, like.dtype, tuple(like.shape), t.dtype,
                                                          tuple(t.shape)))
    if not t.is_cuda or t.device.index != device:
        raise ValueError("%s must be on cuda:%d, not %s" % (name, device, t.device))
    _check_layout(name, t)


def _check_cache_index(name, t, shape, device, what=None):
    """cache_seqlens, block_table, cu_seqlens_*: None, or contiguous-row int32 tensors of this
    shape (None: any size) on device; what: the shape in words for the message."""
    import torch

    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if t.dtype != torch.int32 or t.device != device or t.dim() != len(shape) or t.stride(-1) != 1 or \
            any(want is not None and got != want for got, want in zip(t.shape, shape)):
        raise ValueError("%s must be an int32 %s tensor on %s with contiguous rows, not %s %s on %s" % (
            name, what or ("[batch]" if len(shape) == 1 else "[batch, max_pages]"), device, t.dtype, tuple(t.shape),
            t.device))


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, block_table=None,
                           softmax_scale=None, causal=False, return_softmax_lse=False, context=None):
    """Attention of new queries against a KV cache, with flash_attn_with_kvcache's arguments:
    q [batch, seqlen_q, heads_q, d]; k_cache, v_cache [batch, seqlen_cache, heads_kv, d], or with
    block_table (int32 [batch, max_pages]) pools of pages [num_pages, page_size, heads_kv, d]
    (page_size a multiple of 16; pages in any order, shared or not). cache_seqlens (an int or an
    int32 [batch] tensor): the keys each sequence has in the cache (None: all of it). k, v
    [batch, seqlen_new, heads_kv, d]: new tokens, written into the cache after each sequence's
    cache_seqlens keys (which must leave room) before the attention, which then sees
    cache_seqlens + seqlen_new keys; the write is a PyTorch index_put on the cache's stream,
    the attention one flashtune call. causal: bottom-right aligned to each sequence's keys.
    Returns O, or (O, LSE) with return_softmax_lse (fp32 [batch, heads_q, seqlen_q]). Not
    differentiable (inference). Without a context it calls the operator flashtune::kvcache_fwd,
    which torch.compile(fullgraph=True) keeps in its graph (the append too, as PyTorch ops)."""
    import torch

    b = q.shape[0]
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
    if (k is None) != (v is None):
        raise ValueError("k and v (the new tokens) come together")
    if k is not None:
        if cache_seqlens is None:
            raise ValueError("appending k and v needs cache_seqlens: where each sequence's new tokens go")
        if k.dim() != 4 or k.shape[0] != b or tuple(v.shape) != tuple(k.shape) or k.shape[2:] != k_cache.shape[2:]:
            raise ValueError("k and v must be [batch, seqlen_new, heads_kv, head_dim] = [%d, *, %s], not %s and %s"
                             % (b, ", ".join(str(n) for n in k_cache.shape[2:]), tuple(k.shape), tuple(v.shape)))
        _check_cache_index("cache_seqlens", cache_seqlens, (b,), q.device)
        with torch.no_grad():
            pos = cache_seqlens.long()[:, None] + torch.arange(k.shape[1], device=q.device)[None, :]
            if block_table is None:
                rows = torch.arange(b, device=q.device)[:, None].expand_as(pos)
                k_cache[rows, pos] = k
                v_cache[rows, pos] = v
            else:
                page_size = k_cache.shape[1]
                pages = torch.gather(block_table.long(), 1, pos // page_size)
                k_cache[pages, pos % page_size] = k
                v_cache[pages, pos % page_size] = v
        cache_seqlens = cache_seqlens + k.shape[1]
    with torch.no_grad():
        if context is None and _ops_registered():
            o, lse = torch.ops.flashtune.kvcache_fwd(q, k_cache, v_cache, cache_seqlens, block_table, bool(causal),
                                                     softmax_scale)
            return (o, lse) if return_softmax_lse else o
        ctx = context if context is not None else _context(q.device.index)
        return ctx.forward(q, k_cache, v_cache, causal=causal, scale=softmax_scale, return_lse=return_softmax_lse,
                           cache_seqlens=cache_seqlens, block_table=block_table)


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                     causal=False, return_softmax_lse=False, seqused_k=None, context=None):
    """Attention over a variable-length batch with flash_attn_varlen_func's arguments: q
    [total_q, heads_q, d], k, v [total_k, heads_kv, d] packed without padding, cu_seqlens_q and
    cu_seqlens_k int32 [batch + 1] offsets on the GPU (sequences of length 0 allowed),
    max_seqlen_q and max_seqlen_k the longest lengths; causal aligned to each sequence's last
    key (bottom-right). Returns O [total_q, heads_q, d], or (O, LSE fp32 [heads_q, total_q]) with
    return_softmax_lse. Runs the split-key kernels (fast for short queries; prefill-length
    sequences correct, not yet fast). Not differentiable (inference). Without a context it calls the
    operator flashtune::varlen_fwd (torch.compile keeps it in the graph)."""
    import torch

    with torch.no_grad():
        if context is None and _ops_registered():
            o, lse = torch.ops.flashtune.varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                                    int(max_seqlen_k), bool(causal), softmax_scale, seqused_k)
            return (o, lse) if return_softmax_lse else o
        ctx = context if context is not None else _context(q.device.index)
        return ctx.varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                  scale=softmax_scale, return_lse=return_softmax_lse, seqused_k=seqused_k)


def _kernel_layout(t):
    """t itself when the kernels can read it, else a contiguous copy (autograd hands the backward
    expanded or otherwise strided gradients)."""
    ok = t.dim() == 4 and (t.shape[3] <= 1 or t.stride(3) == 1) and t.data_ptr() % 16 == 0 and \
        all(st >= 0 and st % 8 == 0 for st in t.stride()[:3])
    return t if ok else t.contiguous()


_contexts = {}


def _context(device):
    """The module's own context of a device, made at its first use (tuned kernels as Context())."""
    ctx = _contexts.get(device)
    if ctx is None:
        ctx = _contexts[device] = Context(device=device)
    return ctx


def _autograd():
    import torch

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(fctx, q, k, v, causal, softmax_scale, deterministic, context):
            q, k, v = _kernel_layout(q), _kernel_layout(k), _kernel_layout(v)
            ctx = context if context is not None else _context(q.device.index)
            o, lse = ctx.forward(q, k, v, causal=causal, scale=softmax_scale, return_lse=True)
            fctx.save_for_backward(q, k, v, o, lse)
            fctx.flashtune = (ctx, causal, softmax_scale, deterministic)
            fctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(fctx, do, dlse):
            q, k, v, o, lse = fctx.saved_tensors
            ctx, causal, softmax_scale, deterministic = fctx.flashtune
            dq, dk, dv = ctx.backward(q, k, v, o, lse, _kernel_layout(do), causal=causal, scale=softmax_scale,
                                      deterministic=deterministic)
            return dq, dk, dv, None, None, None, None

    return Attention


_Attention = None


def _register_ops():
    """The custom operators torch.compile and CUDA graphs see (torch.library, PyTorch 2.4 and
    later): flashtune::attention_fwd (O and the LSE) and flashtune::attention_bwd (dQ, dK, dV),
    each with a fake implementation giving its outputs' shapes, strides and dtypes without running,
    the backward registered as the forward's autograd formula; and for serving (no autograd)
    flashtune::kvcache_fwd and flashtune::varlen_fwd (O and the LSE of attention_with_kvcache's and
    varlen_attention's calls). They run on the module's context of the tensors' device. Returns
    False when this PyTorch has no torch.library.custom_op."""
    import torch

    if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_fake"):
        return False

    @torch.library.custom_op("flashtune::attention_fwd", mutates_args=(), device_types="cuda")
    def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                      softmax_scale: Optional[float], deterministic: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        q, k, v = _kernel_layout(q), _kernel_layout(k), _kernel_layout(v)
        return _context(q.device.index).forward(q, k, v, causal=causal, scale=softmax_scale, return_lse=True)

    @attention_fwd.register_fake
    def _(q, k, v, causal, softmax_scale, deterministic):
        o = torch.empty_like(q, memory_format=torch.contiguous_format)
        return o, q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)

    @torch.library.custom_op("flashtune::attention_bwd", mutates_args=(), device_types="cuda")
    def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                      lse: torch.Tensor, causal: bool, softmax_scale: Optional[float],
                      deterministic: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = _kernel_layout(q), _kernel_layout(k), _kernel_layout(v)
        return _context(q.device.index).backward(q, k, v, o, lse, _kernel_layout(dout), causal=causal,
                                                 scale=softmax_scale, deterministic=deterministic)

    @attention_bwd.register_fake
    def _(dout, q, k, v, o, lse, causal, softmax_scale, deterministic):
        return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))

    def setup_context(ctx, inputs, output):
        q, k, v, causal, softmax_scale, deterministic = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.flashtune = (causal, softmax_scale, deterministic)
        ctx.mark_non_differentiable(lse)

    def backward(ctx, dout, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        causal, softmax_scale, deterministic = ctx.flashtune
        dq, dk, dv = torch.ops.flashtune.attention_bwd(dout, q, k, v, o, lse, causal, softmax_scale, deterministic)
        return dq, dk, dv, None, None, None

    attention_fwd.register_autograd(backward, setup_context=setup_context)

    # The serving paths (no autograd): a KV cache and a variable-length batch.
    @torch.library.custom_op("flashtune::kvcache_fwd", mutates_args=(), device_types="cuda")
    def kvcache_fwd(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    cache_seqlens: Optional[torch.Tensor], block_table: Optional[torch.Tensor], causal: bool,
                    softmax_scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
        return _context(q.device.index).forward(q, k_cache, v_cache, causal=causal, scale=softmax_scale,
                                                return_lse=True, cache_seqlens=cache_seqlens, block_table=block_table)

    @kvcache_fwd.register_fake
    def _(q, k_cache, v_cache, cache_seqlens, block_table, causal, softmax_scale):
        o = torch.empty_like(q, memory_format=torch.contiguous_format)
        return o, q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)

    @torch.library.custom_op("flashtune::varlen_fwd", mutates_args=(), device_types="cuda")
    def varlen_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                   softmax_scale: Optional[float], seqused_k: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        return _context(q.device.index).varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                       max_seqlen_k, causal=causal, scale=softmax_scale,
                                                       return_lse=True, seqused_k=seqused_k)

    @varlen_fwd.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale, seqused_k):
        o = torch.empty_like(q, memory_format=torch.contiguous_format)
        return o, q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)

    return True


def _ops_registered():
    """Whether flashtune's torch.library operators exist (registered at import where PyTorch is)."""
    try:
        import torch
        return hasattr(torch.ops, "flashtune") and hasattr(torch.ops.flashtune, "attention_fwd")
    except Exception:  # noqa: BLE001 - no PyTorch
        return False


def attention(q, k, v, causal=False, softmax_scale=None, deterministic=False, context=None, return_lse=False):
    """softmax(softmax_scale·q·kᵀ)·v, differentiable: autograd runs flashtune's backward, which
    recomputes the scores from q, k, v and the saved log-sum-exp (O(seqlen) memory, no
    seqlen_q × seqlen_k matrix is kept). q is [batch, seqlen_q, heads_q, head_dim], k and v
    [batch, seqlen_k, heads_kv, head_dim] (heads_q a multiple of heads_kv), fp16 or bf16 on one
    GPU; causal is bottom-right aligned (row i sees key j iff j <= i + seqlen_k - seqlen_q; a row
    that sees none gives 0). softmax_scale None: 1/sqrt(head_dim). deterministic: the backward
    gives the same bits on every run (slower). context: a Context to run on (default: one per
    device with the tuned kernels). Tensors the kernels cannot read in place (a non-contiguous
    head dim, strides not multiples of 8) are copied first. return_lse: (O, LSE), the LSE fp32
    [batch, heads_q, seqlen_q] in natural log (+inf for a row that sees no key), as
    flash_attn_func's return_lse; it is not differentiable (no gradient flows through it).

    Without a context it calls the operator torch.ops.flashtune.attention_fwd (its backward
    flashtune::attention_bwd), which torch.compile(fullgraph=True) keeps in one graph and CUDA
    graphs capture (after a first call of the shape has built its kernel); with a context, a
    torch.autograd.Function (eager only)."""
    global _Attention
    if context is None and _ops_registered():
        import torch
        o, lse = torch.ops.flashtune.attention_fwd(q, k, v, bool(causal), softmax_scale, bool(deterministic))
    else:
        if _Attention is None:
            _Attention = _autograd()
        o, lse = _Attention.apply(q, k, v, bool(causal), softmax_scale, bool(deterministic), context)
    return (o, lse) if return_lse else o


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention's call for [batch, heads, seqlen, head_dim]
    tensors, run by flashtune.attention on [batch, seqlen, heads, head_dim] views of them (no copy
    where the kernels can read the view) and differentiable like it. Where it differs from SDPA:
    is_causal aligns SDPA's mask to the top left (row i sees keys j <= i) and flashtune's to the
    bottom right (j <= i + seqlen_k - seqlen_q); the two agree when seqlen_q == seqlen_k, and a
    causal call of other lengths is refused (flashtune.attention(..., causal=True) is the
    bottom-right one). attn_mask and dropout are not offered (ValueError); fewer key heads than
    query heads need enable_gqa=True, as in SDPA. Returns [batch, heads, seqlen_q, head_dim] (a
    view of a [batch, seqlen_q, heads, head_dim] tensor)."""
    import torch

    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError("%s must be a [batch, heads, seqlen, head_dim] tensor, not %s" % (
                name, tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__))
    if attn_mask is not None:
        raise ValueError("attn_mask is not supported: flashtune computes full or causal attention (is_causal)")
    if dropout_p:
        raise ValueError("dropout_p must be 0: flashtune has no attention dropout")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise ValueError("query has %d heads and key %d: grouped-query heads need enable_gqa=True (as in SDPA)" % (
            query.shape[1], key.shape[1]))
    if is_causal and query.shape[2] != key.shape[2]:
        raise ValueError("is_causal with seqlen_q (%d) != seqlen_k (%d): SDPA aligns its mask to the top left, "
                         "flashtune to the bottom right; flashtune.attention(q, k, v, causal=True) on [batch, "
                         "seqlen, heads, head_dim] tensors is the bottom-right one" % (query.shape[2], key.shape[2]))
    o = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=bool(is_causal),
                  softmax_scale=scale)
    return o.transpose(1, 2)


def command_path():
    """The flashtune command: $FLASHTUNE_CMD, else the one a pip install put into this package,
    else the build/ of the repository checkout this package lies in, else `flashtune` on PATH."""
    return _locate("FLASHTUNE_CMD", os.path.join("bin", "flashtune"), "flashtune", "flashtune")


def tune(specs=(), database=None, only=None, device=None, misses=False, jobs=None, budget_ms=None, quiet=True,
         search=None, one_shape=False):
    """Tunes this machine's GPU as `flashtune tune` does (the command is command_path()): every
    variant of the specs (default: the built-in ones for the GPU) on every workload bucket they
    name, or with misses=True the buckets applications ran without a tuned winner; the results go
    to database (default: $FLASHTUNE_DB, else ~/.local/share/flashtune/tuning.db), where Context
    finds them. only filters the variants ("d=128,causal=1"); device is an ordinal, a part of a
    GPU's name or "all"; jobs the parallel compilations; budget_ms the timing budget per
    measurement; search "ranked" (the command's default: halving over each group's candidates,
    chosen and compiled by a ranking: `flashtune tune --help`), "halving" (every variant screened
    at a quarter of the budget, the fastest quarter of each bucket's measured again) or
    "exhaustive" (every variant at the whole budget: the oracle). one_shape=True decides near-ties on each bucket's own shape only (no second shape
    of the bucket: a shorter tune). quiet=False shows the command's progress on stderr. Returns the tune's summary
    (the command's --json line) as a dict; raises FlashtuneError with the command's message when
    it fails. Without a GPU the command runs a compile-only plan instead: then the dict is the
    plan's summary with "compile_only": True and the reason there is no GPU in "no_gpu"."""
    import json
    import subprocess

    cmd = [command_path(), "tune"] + [os.fspath(x) for x in ([specs] if isinstance(specs, (str, os.PathLike))
                                                          else list(specs))]
    for flag, value in (("--db", database), ("--only", only), ("--device", device), ("-j", jobs),
                        ("--budget", budget_ms), ("--search", search)):
        if value is not None:
            cmd += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    cmd += ["--json"] + (["--misses"] if misses else []) + (["--one-shape"] if one_shape else []) + (["-q"] if quiet else [])
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE if quiet else None, text=True)
    except OSError as e:
        raise FlashtuneError("cannot run %s: %s (set FLASHTUNE_CMD to the flashtune command)" % (cmd[0], e))
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0:
        why = (done.stderr or "").strip() if quiet else ""
        raise FlashtuneError("flashtune tune failed (exit status %d)%s" % (done.returncode, ": " + why if why else ""))
    if not lines:
        raise FlashtuneError("flashtune tune printed no summary: %s" % done.stdout.strip()[-300:])
    first, summary = json.loads(lines[0]), json.loads(lines[-1])
    if first.get("kind") == "tune" and first.get("gpu") is False:
        summary.update(compile_only=True, no_gpu=first.get("reason"))
    return summary


def version():
    """The version of the loaded libflashtune ("0.1.0")."""
    return _load().ft_version().decode()


def _package_version():
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("flashtune")
    except PackageNotFoundError:
        return None


# The installed distribution's version (pip install .: CMakeLists.txt's, as the library's and the
# command's); None when this package runs from a checkout.
__version__ = _package_version()


def _sizes(batch, heads, seqlen_q, seqlen_k, head_dim, causal, heads_kv=None, dtype="float16"):
    a = _Args()
    a.version = _load().flashtune_args_version
    a.dtype = _DTYPES[dtype] if dtype in _DTYPES else {"f16": 0, "bf16": 1}[dtype]
    a.batch, a.heads_q, a.seqlen_q, a.seqlen_k, a.head_dim = batch, heads, seqlen_q, seqlen_k, head_dim
    a.heads_kv = heads if heads_kv is None else heads_kv
    a.causal = 1 if causal else 0
    return a


def flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal):
    """Forward FLOPs as the FlashAttention papers count them, from the library (the one formula
    the tuner, the database and the reports use)."""
    return _load().ft_attention_flops(ctypes.byref(_sizes(batch, heads, seqlen_q, seqlen_k, head_dim, causal)))


def key(dtype, batch, heads, seqlen_q, seqlen_k, head_dim, causal, heads_kv=None):
    """The key a forward call is dispatched by, from the library, as a dict:
    {"dtype": "bf16", "d": 128, "causal": 0, "group": 8, "sq": 1, "seqlen": 8192, "bh": 1024}
    (a decode step: heads_q / heads_kv, seqlen_q, max(seqlen_q, seqlen_k) and batch·heads each
    rounded up to a power of two). dtype: "f16", "bf16", "float16" or "bfloat16"."""
    import json

    buf = ctypes.create_string_buffer(256)
    a = _sizes(batch, heads, seqlen_q, seqlen_k, head_dim, causal, heads_kv, dtype)
    rc = _load().ft_attention_key(ctypes.byref(a), buf, len(buf))
    if rc != 0:
        raise ValueError("no key for sizes b=%r h=%r sq=%r sk=%r d=%r" % (batch, heads, seqlen_q, seqlen_k, head_dim))
    return json.loads(buf.value.decode())


def backward_flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal):
    """Backward FLOPs as the FlashAttention papers count them (2.5 times the forward's)."""
    _need_backward(_load())
    a = _BwdArgs()
    a.version = FT_BWD_ARGS_VERSION
    a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim = batch, heads, heads, seqlen_q, seqlen_k, head_dim
    a.causal = 1 if causal else 0
    return _load().ft_attention_backward_flops(ctypes.byref(a))


def default_scale(head_dim):
    return 1.0 / math.sqrt(head_dim)


# `import flashtune` registers the operators where PyTorch is installed (a machine without it still
# has the rest: tune(), key(), the command's lookups).
if importlib.util.find_spec("torch") is not None:
    _register_ops()
