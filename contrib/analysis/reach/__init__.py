"""What a piece of code reaches: the functions its calls lead to, at any depth in the tree.

A gate's class comes from what stands behind it: a flashinfer test's
``skipif(cc[0] != 10)`` guards ``fused_moe.cutlass_fused_moe(...)``, which calls
``get_cutlass_fused_moe_module``, which builds ``gen_cutlass_fused_moe_sm100_module``
three files away.  Calls are resolved by the arch evaluator's bindings (the
callee's definition in the tree, imports followed; a class's ``__init__`` and
``__call__``), breadth first, each function once (by identity), so a deep JIT
module is reached however many helpers stand between.

Two answers: ``calls``, the chains of call names as written (``a>b>get_x_module``,
a Triton kernel as ``triton:name``; the first :data:`~.walk.MAX_CALLS`, for the reader),
and ``endpoints``, what can class a gate, by identity, whatever its depth:

* ``jit``: a tree function that builds CUDA units (it names ``.cu`` sources or
  holds a ``supported_major_versions`` list), with the majors the literal nvcc
  flags along its chain name (``compute_100a``: 10), if any;
* ``triton``: a ``@triton.jit`` kernel;
* ``cutile``: a cuTile Python kernel (``@ct.kernel``, ``ct`` being ``cuda.tile``), with
  the majors the toolkit's Tile IR compiles for (:data:`~.endpoints.CUTILE_MAJORS`);
* ``cute``: a class holding ``admissible_archs`` (CuTe DSL), with its archs; a
  ``@cute.kernel``/``@cute.jit`` function, with the archs of the arch-specific CuTe
  namespaces its module uses (``tcgen05``: 10, 11; ``warpgroup``: 9; none: generic);
* ``aot``: an ahead-of-time built op, ``torch.ops.NS.op`` (its C++ is read by the judge);
* ``lib``: a call into a vendor library that brings kernels of its own for every
  architecture its release supports (:data:`~.endpoints.VENDOR_LIBRARIES`: cuDNN's Python
  frontend; ``triton_kernels``, Triton kernels compiled for the GPU they run on): no
  kernel of the tree does that work;
* ``checks``: the code behind the gate only checks (asserts, raises, log lines).

A name handed on as a value (``server_args.attention_backend = "trtllm_mha"``,
``return {"attention_backend": "triton"}``) leads to what a decorator registers
under it anywhere in the tree (``@register_attention_backend("trtllm_mha")`` on
the factory), and to the methods of the class that factory returns: what the
backend runs once chosen (:class:`~.backends.Registry`, shared with the stack's walk).
Strings passed by keyword to another library (``graph.tensor(name="bias")``) are
its words, not leads.  What is handed on runs too: a tree function passed by name
(``Runner(forward_impl=_impl)``), and the methods of an object returned
(``return Mxfp4MoEMethod(...)``: :func:`~.objects.object_methods`).  A function met at
module level (a test, a method of a test class) is read in its own frame.

A walk may also follow one backend of a registry (``key``): flashinfer's
``@backend_requirement({"cudnn": _cudnn_requirement, "cutlass": ...})`` checks
each backend's archs, and the function it decorates tests the backend's name
(``if backend == "cudnn"``, ``if "cutlass" in runner_names``); a test against the
registry's names is decided by the backend followed.

What a walk ends at is an :class:`~contrib.analysis.reach.endpoints.Endpoint`; the audit's
JSON writes one as ``kind|path|qualified name|majors|chain``.

The package, by seam:

* :mod:`~contrib.analysis.reach.walk`: the walk itself (:func:`~.walk.reach`);
* :mod:`~contrib.analysis.reach.graph`: the call graph it walks, as one GPU runs it
  (:class:`~.graph.Graph`: what each call resolves to, the branches taken);
* :mod:`~contrib.analysis.reach.endpoints`: what a walk ends at (:class:`~.endpoints.Endpoint`)
  and what a tree function is (JIT builder, Triton or CuTe kernel);
* :mod:`~contrib.analysis.reach.objects`: classes, objects and methods;
* :mod:`~contrib.analysis.reach.ops`: ops registered with torch in Python;
* :mod:`~contrib.analysis.reach.backends`: registries and backends chosen by name;
* :mod:`~contrib.analysis.reach.tables`: registries written as dicts, keyed by a
  setting's values (sglang's ``QUANTIZATION_METHODS``);
* :mod:`~contrib.analysis.reach.names`: a callee's name, and which names are followed;
* :mod:`~contrib.analysis.reach.tree`: :class:`~.tree.PyTree`, the evaluator with the
  indexes the walks keep for a tree.

When a branch refuses is not the walk's own question: its one vocabulary of refusing
calls is :mod:`contrib.analysis.refusal`, shared with the gate parser.
"""
