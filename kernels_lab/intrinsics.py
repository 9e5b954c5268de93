"""Device operations numba does not offer, in one place: LLVM/PTX on a GPU, Python on the simulator.

  load4(a, v)             four float32 a[4v:4v+4] as ONE 16-byte load (ld.global.v4.f32)
  store4(a, v, x, y, z, w) four float32 as ONE 16-byte store (st.global.v4.f32)
  globaltimer()           the GPU's nanosecond clock (%globaltimer); host clock on the simulator
  grid_dependency_wait()  PDL: wait until the previous kernel in the stream has flushed (griddepcontrol.wait)
  launch_dependents()     PDL: let the next kernel in the stream launch now (griddepcontrol.launch_dependents)
  load_acquire_sys(a, i)  int32 a[i] with ld.acquire.sys: a poll the compiler cannot hoist and the caches
                          cannot answer from a stale line; later loads are ordered after it
  poll_relaxed_sys(a, i)  int32 a[i] with ld.relaxed.sys: a poll that is re-read every time but orders
                          nothing (a fence must follow before reading what it announces)
  load4_relaxed_sys(a, v) four float32 a[4v:4v+4] as ONE 16-byte ld.relaxed.sys (payloads over PCIe:
                          no memory clobber, so several can be in flight before the first is used)
  load_marked2_sys(a, v)  two int64 words a[2v], a[2v+1] as ONE 16-byte ld.relaxed.sys.v2.u64, each
                          split into (float32 in its low half, int32 mark in its high half): the
                          consumer's LL protocol, where every 8-byte word carries its own mark. Each
                          64-bit element is a single-copy-atomic access in the PTX memory model, so a
                          word whose mark is new holds the new value too (the pair is not atomic: it
                          need not be, each word is checked on its own)
  float_bits(x)           the int32 bit pattern of a float32 (to pack a value and a mark in one store)

Why 16-byte accesses: a memory-bound kernel is limited by the bytes it keeps in flight.
With 4-byte loads a full H200 SM holds 2048 threads x 4 B per array; Little's law wants
several times that to cover DRAM latency at 4.8 TB/s. One 16-byte load per thread
quadruples the bytes in flight for the same number of instructions.

The caller guarantees a 16-byte aligned base (every device allocation is) and 4v+3 < a.size.
On the simulator the same names are plain Python (kernels_lab/sim_device.py) that index the array
element by element, so its accesses are still traced (4 reads, 4 writes) and bounds-checked.
"""

from __future__ import annotations

from .runtime import ON_SIMULATOR

if ON_SIMULATOR:  # the same names in Python, with the simulator's other missing features
    from .sim_device import (SIM_CALLS, float_bits, globaltimer, grid_dependency_wait,  # noqa: F401
                             launch_dependents, load4, load4_relaxed_sys, load_acquire_sys, load_marked2_sys,
                             poll_relaxed_sys, store4)

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    def _vector_pointer(context, builder, arrty, arr, v):
        data = cgutils.create_struct_proxy(arrty)(context, builder, value=arr).data
        f32x4 = ir.VectorType(ir.FloatType(), 4)
        start = builder.mul(v, ir.Constant(v.type, 4))
        return builder.bitcast(builder.gep(data, [start]), f32x4.as_pointer())

    def _require_vector(op: str, a, dtype, integers: str, *indices) -> None:
        """Typing: `op` takes a 1-D `dtype` array and integer indices; else a TypeError naming what it got."""
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == dtype):
            raise TypeError(f"{op} needs a 1-D {dtype} array, got {a}")
        if not all(isinstance(i, types.Integer) for i in indices):
            raise TypeError(f"{op} needs {integers}, got {', '.join(map(str, indices))}")

    def _check(arrty, index):
        if not (isinstance(arrty, types.Array) and arrty.dtype == types.float32):
            raise TypeError(f"load4/store4 need a float32 array, got {arrty}")
        if not isinstance(index, types.Integer):
            raise TypeError(f"load4/store4 need an integer vector index, got {index}")

    @intrinsic
    def load4(typingctx, a, v):
        _check(a, v)
        sig = types.UniTuple(types.float32, 4)(a, v)

        def codegen(context, builder, signature, args):
            arr, vi = args
            vec = builder.load(_vector_pointer(context, builder, signature.args[0], arr, vi), align=16)
            parts = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, parts)

        return sig, codegen

    @intrinsic
    def store4(typingctx, a, v, x, y, z, w):
        _check(a, v)
        sig = types.void(a, v, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, signature, args):
            arr, vi = args[:2]
            parts = [context.cast(builder, val, ty, types.float32)
                     for val, ty in zip(args[2:], signature.args[2:])]
            vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), ir.Undefined)
            for k, p in enumerate(parts):
                vec = builder.insert_element(vec, p, ir.Constant(ir.IntType(32), k))
            builder.store(vec, _vector_pointer(context, builder, signature.args[0], arr, vi), align=16)
            return context.get_dummy_value()

        return sig, codegen

    def _inline_asm(builder, ret_type, asm: str, constraints: str, args=()):
        fnty = ir.FunctionType(ret_type, [a.type for a in args])
        return builder.call(ir.InlineAsm(fnty, asm, constraints, side_effect=True), list(args))

    @intrinsic
    def globaltimer(typingctx):
        def codegen(context, builder, signature, args):
            return _inline_asm(builder, ir.IntType(64), "mov.u64 $0, %globaltimer;", "=l,~{memory}")
        return types.int64(), codegen

    def _instruction(asm: str):
        """An intrinsic that emits one side-effecting PTX instruction (a compiler barrier too)."""
        @intrinsic
        def emit(typingctx):
            def codegen(context, builder, signature, args):
                _inline_asm(builder, ir.VoidType(), asm, "~{memory}")
                return context.get_dummy_value()
            return types.void(), codegen
        return emit

    grid_dependency_wait = _instruction("griddepcontrol.wait;")
    launch_dependents = _instruction("griddepcontrol.launch_dependents;")

    def _element_pointer(context, builder, arrty, arr, i):
        data = cgutils.create_struct_proxy(arrty)(context, builder, value=arr).data
        return builder.gep(data, [i])

    def _scalar_load(op: str, nbtype, llty, constraint: str):
        @intrinsic
        def load(typingctx, a, i):
            _require_vector(op, a, nbtype, "an integer index", i)

            def codegen(context, builder, signature, args):
                ptr = _element_pointer(context, builder, signature.args[0], *args)
                return _inline_asm(builder, llty, f"{op} $0, [$1];", f"={constraint},l,~{{memory}}", (ptr,))
            return nbtype(a, i), codegen
        return load

    load_acquire_sys = _scalar_load("ld.acquire.sys.global.s32", types.int32, ir.IntType(32), "r")
    poll_relaxed_sys = _scalar_load("ld.relaxed.sys.global.s32", types.int32, ir.IntType(32), "r")

    @intrinsic
    def load4_relaxed_sys(typingctx, a, v):
        _check(a, v)
        sig = types.UniTuple(types.float32, 4)(a, v)

        def codegen(context, builder, signature, args):
            ptr = _vector_pointer(context, builder, signature.args[0], *args)
            f32 = ir.FloatType()
            # side effect (never merged or dropped) but no memory clobber: the loads of one
            # thread may all be in flight at once; the acquire poll before them still orders them.
            parts = _inline_asm(builder, ir.LiteralStructType([f32] * 4),
                                "ld.relaxed.sys.global.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,l", (ptr,))
            values = [builder.extract_value(parts, k) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, values)

        return sig, codegen

    @intrinsic
    def load_marked2_sys(typingctx, a, v):
        _require_vector("load_marked2_sys", a, types.int64, "an integer vector index", v)
        sig = types.Tuple((types.float32, types.int32, types.float32, types.int32))(a, v)

        def codegen(context, builder, signature, args):
            arr, vi = args
            i64, i32 = ir.IntType(64), ir.IntType(32)
            ptr = _element_pointer(context, builder, signature.args[0], arr, builder.mul(vi, ir.Constant(vi.type, 2)))
            # like load4_relaxed_sys: a side effect, no memory clobber (several in flight per thread)
            words = _inline_asm(builder, ir.LiteralStructType([i64, i64]),
                                "ld.relaxed.sys.global.v2.u64 {$0, $1}, [$2];", "=l,=l,l", (ptr,))
            parts = []
            for k in range(2):
                w = builder.extract_value(words, k)
                parts.append(builder.bitcast(builder.trunc(w, i32), ir.FloatType()))
                parts.append(builder.trunc(builder.lshr(w, ir.Constant(i64, 32)), i32))
            return context.make_tuple(builder, signature.return_type, parts)

        return sig, codegen

    @intrinsic
    def float_bits(typingctx, x):
        if x != types.float32:
            raise TypeError(f"float_bits needs a float32, got {x}")

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))
        return types.int32(x), codegen


# For the decode megakernel's counters (lesson 07), CUTLASS's arrive / wait pattern at GPU scope:
#   nanosleep(ns)             the pause between two polls of a bounded spin (nanosleep.u32, sm_70+; only a
#                             hint, it may return at once), so that waiting blocks leave the memory system to
#                             the ones doing work; on the simulator it hands the GIL over
#   load_acquire_gpu(a, i)    int32 a[i] with ld.acquire.gpu: a poll never hoisted; the loads after it (and,
#                             after a barrier, the block's) see what the writer stored before its release
#   add_release_gpu(a, i, v)  a[i] += v with red.release.gpu: the stores before it (the block's, after a
#                             barrier) are visible GPU-wide before the count is; one instruction, no fence
#   prefetch_l2(a, i)         prefetch.global.L2 of the line holding float32 a[i]: no register, no wait; the
#                             load that follows finds it in L2 (the simulator has no cache: nothing to do)
if ON_SIMULATOR:  # in Python, with the others (add_release_gpu under a lock: blocks may run side by side)
    from .sim_device import add_release_gpu, load_acquire_gpu, nanosleep, prefetch_l2  # noqa: F401
else:
    @intrinsic
    def nanosleep(typingctx, ns):
        if not isinstance(ns, types.Integer):
            raise TypeError(f"nanosleep needs an integer number of nanoseconds, got {ns}")

        def codegen(context, builder, signature, args):
            t = context.cast(builder, args[0], signature.args[0], types.uint32)
            _inline_asm(builder, ir.VoidType(), "nanosleep.u32 $0;", "r,~{memory}", (t,))
            return context.get_dummy_value()
        return types.void(ns), codegen

    load_acquire_gpu = _scalar_load("ld.acquire.gpu.global.s32", types.int32, ir.IntType(32), "r")

    @intrinsic
    def add_release_gpu(typingctx, a, i, v):
        _require_vector("add_release_gpu", a, types.int32, "an integer index and value", i, v)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            val = context.cast(builder, args[2], signature.args[2], types.int32)
            _inline_asm(builder, ir.VoidType(), "red.release.gpu.global.add.s32 [$0], $1;", "l,r,~{memory}",
                        (ptr, val))
            return context.get_dummy_value()
        return types.void(a, i, v), codegen

    @intrinsic
    def prefetch_l2(typingctx, a, i):
        _require_vector("prefetch_l2", a, types.float32, "an integer index", i)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], *args)
            _inline_asm(builder, ir.VoidType(), "prefetch.global.L2 [$0];", "l", (ptr,))
            return context.get_dummy_value()
        return types.void(a, i), codegen


# For the staged cluster kernels (softmax's and layernorm's, lesson 08): copies from global to shared memory that
# hold no register while in flight (cp.async, sm_80+; the bulk copies of TMA are not needed at 16 bytes a thread):
#   copy16_async(dst, d, src, s, n)  shared float32 dst[4d:4d+4] = src[4s:4s+n] (n of 1..4 floats, zeros after
#                                    them: cp.async.cg, 16 bytes, src-size 4n), started now, done at a wait
#   async_commit()                   close this thread's copies started since the last commit into one group
#   async_wait_group(n)              wait until every group but the newest n is done (cp.async.wait_group n; n a
#                                    compile-time constant; 0: all): the oldest rows' copies are in, the newest
#                                    in flight
# A thread waits for its own copies only: a kernel that reads what another thread copied needs a barrier too.
# On the simulator a copy is made when the thread waits for its group, and its destination is NaN until then: a
# read before the wait, or a copy started over data still to be read, computes a wrong answer there too.
if ON_SIMULATOR:
    from .sim_device import async_commit, async_wait_group, copy16_async  # noqa: F401
else:
    @intrinsic
    def copy16_async(typingctx, dst, d, src, s, n):
        _require_vector("copy16_async", dst, types.float32, "integer vector indices and a float count", d, s, n)
        _require_vector("copy16_async", src, types.float32, "integer vector indices and a float count", d, s, n)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            to = builder.ptrtoint(_vector_pointer(context, builder, signature.args[0], args[0], args[1]), i64)
            start = builder.ptrtoint(_vector_pointer(context, builder, signature.args[2], args[2], args[3]), i64)
            count = context.cast(builder, args[4], signature.args[4], types.uint32)
            nbytes = builder.mul(count, ir.Constant(ir.IntType(32), 4))
            asm = ("{\n\t.reg .u64 %kl_d, %kl_g;\n\t.reg .u32 %kl_s;\n\t"
                   "cvta.to.shared.u64 %kl_d, $0;\n\tcvt.u32.u64 %kl_s, %kl_d;\n\t"
                   "cvta.to.global.u64 %kl_g, $1;\n\t"
                   "cp.async.cg.shared.global [%kl_s], [%kl_g], 16, $2;\n\t}")
            _inline_asm(builder, ir.VoidType(), asm, "l,l,r,~{memory}", (to, start, nbytes))
            return context.get_dummy_value()
        return types.void(dst, d, src, s, n), codegen

    async_commit = _instruction("cp.async.commit_group;")

    @intrinsic
    def async_wait_group(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None  # numba then retries with the literal value of a constant
        if not 0 <= n.literal_value <= 7:
            raise TypeError(f"async_wait_group(n) needs a constant n of 0 to 7, got {n.literal_value}")

        def codegen(context, builder, signature, args):
            _inline_asm(builder, ir.VoidType(), f"cp.async.wait_group {n.literal_value};", "~{memory}")
            return context.get_dummy_value()
        return types.void(n), codegen
