"""Latency of the trtllm allreduce paths this patchset touches, for `contrib validate`'s bench stage.

Run from a flashinfer checkout (the bench stage runs it in the base and in the
patched tree, interleaved): ``python bench_allreduce.py --json``.  World size 2
(the GPUs that CUDA_VISIBLE_DEVICES shows), the sizes sglang runs: hidden 4096 and
7168, 1 to 128 tokens.  One metric per path, in microseconds: the geometric mean
over its sizes of the median of CUDA-event timings:

- ``lamport_us``: trtllm_custom_all_reduce, one-shot + RESIDUAL_RMS_NORM, <= 16
  tokens (lamport_style_one_shot_all_reduce_norm_kernel);
- ``oneshot_us``: one-shot, no fusion (oneShotAllReduceKernel);
- ``twoshot_us``: two-shot, no fusion, 128 tokens (twoShotAllReduceKernel);
- ``fusion_us``: trtllm_allreduce_fusion, allreduce + residual + RMSNorm
  (trtllm_allreduce_fusion.cu), what sglang's fused path calls.

Each path runs in fresh worker processes with a deadline: a path that crashes
(plain v0.6.16 faults on the lamport path: illegal memory access) prints null
for its metric and the reason under ``errors``, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import queue
import socket
import statistics
import sys
import traceback

WORLD = 2
HIDDEN = (4096, 7168)
TOKENS = {"lamport": (1, 4, 16), "oneshot": (1, 16, 64, 128), "twoshot": (128,),
          "fusion": (1, 16, 64, 128)}
MAX_TOKENS = 128
WARMUP, ITERS = 5, 30
DEADLINE_S = 900  # includes the first JIT build of trtllm_comm


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(torch, fn) -> float:
    """Median microseconds of ``fn`` over ITERS launches, after WARMUP."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def _custom(torch, comm, dist, rank: int, path: str) -> list[float]:
    """trtllm_custom_all_reduce timings for the lamport, one-shot or two-shot path."""
    found = []
    strategy = comm.AllReduceStrategyType.TWOSHOT if path == "twoshot" else comm.AllReduceStrategyType.ONESHOT
    fusion = comm.AllReduceFusionOp.RESIDUAL_RMS_NORM if path == "lamport" else comm.AllReduceFusionOp.NONE
    for hidden in HIDDEN:
        ws = comm.trtllm_create_ipc_workspace_for_all_reduce(
            rank=rank, tp_size=WORLD, max_token_num=MAX_TOKENS, hidden_dim=hidden, group=dist.group.WORLD)
        ptrs = [torch.tensor(ws[i], dtype=torch.int64) for i in (0, 2, 3, 4, 5, 6)]
        flag = [1]
        for tokens in TOKENS[path]:
            inp = torch.randn(tokens * hidden, dtype=torch.bfloat16, device="cuda")
            out, inter = torch.empty_like(inp), torch.empty_like(inp)
            residual = torch.randn_like(inp)
            bias = torch.zeros(hidden, dtype=torch.bfloat16, device="cuda")
            weight = torch.ones(hidden, dtype=torch.bfloat16, device="cuda")

            def call() -> None:
                comm.trtllm_custom_all_reduce(
                    inp=inp, out=out, tp_size=WORLD, tp_rank=rank, token_num=tokens,
                    fusion_op_code=fusion, strategy_code=strategy, config_code=0,
                    launch_with_pdl=False, flag_value=flag[0], peer_comm_buffer_ptrs=ptrs[0],
                    peer_barrier_ptrs_in=ptrs[1], peer_barrier_ptrs_out=ptrs[2], bias=bias,
                    residual=residual, weight=weight, weight_pre_residual_norm=weight, eps=1e-6,
                    intermediate_buffer=inter, lamport_peer_comm_buffer_ptrs_0=ptrs[3],
                    lamport_peer_comm_buffer_ptrs_1=ptrs[4], lamport_peer_comm_buffer_ptrs_2=ptrs[5])
                flag[0] += 1

            found.append(_timed(torch, call))
        dist.barrier()
        comm.trtllm_destroy_ipc_workspace_for_all_reduce(ws, group=dist.group.WORLD)
    return found


def _fusion(torch, comm, dist, rank: int) -> list[float]:
    """trtllm_allreduce_fusion timings: allreduce + residual add + RMSNorm."""
    found = []
    for hidden in HIDDEN:
        handles, ws = comm.trtllm_create_ipc_workspace_for_all_reduce_fusion(
            rank, WORLD, MAX_TOKENS, hidden, group=dist.group.WORLD)[:2]
        for tokens in TOKENS["fusion"]:
            inp = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
            residual, res_out, norm_out = torch.randn_like(inp), torch.empty_like(inp), torch.empty_like(inp)
            gamma = torch.ones(hidden, dtype=torch.bfloat16, device="cuda")

            def call() -> None:
                comm.trtllm_allreduce_fusion(
                    allreduce_in=inp, world_size=WORLD, world_rank=rank, token_num=tokens,
                    hidden_dim=hidden, workspace_ptrs=ws, launch_with_pdl=False,
                    trigger_completion_at_end=True, fp32_acc=True,
                    pattern_code=comm.AllReduceFusionPattern.kARResidualRMSNorm, use_oneshot=None,
                    allreduce_out=None, residual_in=residual, residual_out=res_out, norm_out=norm_out,
                    quant_out=None, scale_out=None, rms_gamma=gamma, rms_eps=1e-6, scale_factor=None,
                    layout_code=None)

            found.append(_timed(torch, call))
        dist.barrier()
        comm.trtllm_destroy_ipc_workspace_for_all_reduce_fusion(handles, group=dist.group.WORLD)
    return found


def _nccl(torch, dist, path: str) -> list[float]:
    """What sglang runs without these kernels: NCCL's all_reduce (then residual + RMSNorm
    in torch for the fused paths), at the same sizes: the ``baseline`` where the base
    cannot run the trtllm kernels at all (its gate rejects SM12x)."""
    found = []
    fused = path in ("lamport", "fusion")
    for hidden in HIDDEN:
        gamma = torch.ones(hidden, dtype=torch.bfloat16, device="cuda")
        for tokens in TOKENS[path]:
            inp = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
            residual = torch.randn_like(inp)

            def call() -> None:
                dist.all_reduce(inp)
                if fused:
                    torch.nn.functional.rms_norm(inp + residual, (hidden,), gamma, 1e-6)

            found.append(_timed(torch, call))
    return found


def _worker(rank: int, port: int, path: str, results, nccl: bool = False) -> None:
    try:
        import torch
        import torch.distributed as dist

        import flashinfer.comm as comm

        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
        if nccl:
            times = _nccl(torch, dist, path)
        elif path == "fusion":
            times = _fusion(torch, comm, dist, rank)
        else:
            times = _custom(torch, comm, dist, rank, path)
        results.put((rank, times))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - the parent reports it as this path's reason
        results.put((rank, traceback.format_exc().strip().splitlines()[-1][:300]))


def measure(path: str, nccl: bool = False) -> tuple[float | None, str | None]:
    """(geometric mean of the medians in µs, None) or (None, why the path gave no figure)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=_worker, args=(r, port, path, results, nccl)) for r in range(WORLD)]
    for proc in procs:
        proc.start()
    reports: dict[int, object] = {}
    try:
        while len(reports) < WORLD:
            rank, report = results.get(timeout=DEADLINE_S)
            reports[rank] = report
            if isinstance(report, str):
                break
    except queue.Empty:
        pass
    for proc in procs:
        proc.join(20)
        if proc.is_alive():
            proc.kill()  # a rank whose peer crashed waits for it forever
            proc.join()
    failed = next((r for r in reports.values() if isinstance(r, str)), None)
    if failed or len(reports) < WORLD:
        return None, failed or f"no figure within {DEADLINE_S}s (exit codes {[p.exitcode for p in procs]})"
    times = reports[0]
    assert isinstance(times, list)
    return math.exp(statistics.fmean(math.log(t) for t in times)), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--paths", default=",".join(TOKENS), help="comma-separated subset")
    parser.add_argument("--nccl", action="store_true", help="time NCCL all_reduce (+ torch RMSNorm) "
                        "at the same sizes instead: the baseline where the kernels cannot run")
    args = parser.parse_args()
    figures: dict[str, object] = {}
    errors: dict[str, str] = {}
    for path in args.paths.split(","):
        value, why = measure(path, args.nccl)
        figures[f"{path}_us"] = None if value is None else round(value, 3)
        if why:
            errors[f"{path}_us"] = why
        print(f"{path}: {value if value is not None else why}", file=sys.stderr)
    print(json.dumps({**figures, "errors": errors}) if args.json else figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
