#!/usr/bin/python3
"""PyTorch DDP peer of `chexscale bench`: the same training workload in plain PyTorch.

torchvision densenet121 (14 outputs, BCE-with-logits, Adam lr 1e-3) on synthetic tensors,
N processes started with torch.multiprocessing (no torchrun), Gloo over loopback, DDP with
25 MiB buckets, BatchNorm statistics kept local (broadcast_buffers=False, as chexscale), a fixed
number of intra-op threads per process. --grad-compression fp16 | powersgd[:RANK] registers DDP's
own fp16_compress_hook or powerSGD_hook (with --powersgd-start-step and --powersgd-min-rate, the
same flags and defaults as chexscale's). Warm-up steps are excluded. One worker runs the bare
model without a process group, as chexscale does for a 1-rank job.

GPU mode (--device cuda): rank r on cuda:r, NCCL, the batches resident on the GPU (as chexscale's
synthetic data), --amp bf16|fp16 (torch.autocast around the forward pass, the loss in fp32, a
GradScaler for fp16) and --channels-last, cuDNN's autotuner on (torch.backends.cudnn.benchmark,
as chexscale on GPUs), each step timed after torch.cuda.synchronize(). When
torchvision is not installed (a bare torch wheel), bench/peer/tv_models.py supplies the same
architectures.

Multi-node mode (the lab's "pytorch-ddp" sets): when RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
are in the environment (torchrun's contract), this process is that one rank (--workers is
ignored), the process group joins through env://, and rank 0 writes the JSON. GLOO_SOCKET_IFNAME
picks the interface, as for chexscale. Each rank reports its phases on stderr as it reaches them,
prints the Python stacks of all its threads when killed with SIGTERM (a stuck rank shows where it
is). In both modes every rank of a multi-worker run ends with os._exit once its results are
handed on, skipping the interpreter's teardown of DDP, the process group and the Gloo threads
(that teardown deadlocked once on the GIL).

Prints one line "images/s: X" (total over workers) and, with --json, writes the numbers in the
field names of chexscale's bench.json (docs/bench-format.md) so the two can be compared.

Usage: /usr/bin/python3 bench/peer/ddp_bench.py --workers 2 --steps 20 --warmup-steps 3
"""
import argparse
import datetime
import faulthandler
import json
import os
import signal
import socket
import statistics
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1, help="processes (ranks) on this host")
    p.add_argument("--arch", default="densenet121", help="torchvision model name")
    p.add_argument("--image-size", type=int, default=128, help="input side in pixels")
    p.add_argument("--batch-size", type=int, default=16, help="examples per worker per step")
    p.add_argument("--steps", type=int, default=20, help="measured steps")
    p.add_argument("--warmup-steps", type=int, default=3, help="steps excluded from timing")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per worker")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--grad-compression", default="none",
                   help="none, fp16 (DDP's fp16_compress_hook) or powersgd[:RANK] (DDP's "
                        "powerSGD_hook, rank 4 by default), as chexscale's flag")
    p.add_argument("--powersgd-start-step", type=int, default=10,
                   help="powerSGD_hook's start_powerSGD_iter (DDP needs at least 2)")
    p.add_argument("--powersgd-min-rate", type=float, default=2.0,
                   help="powerSGD_hook's min_compression_rate")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu or cuda")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"],
                   help="autocast dtype of the forward pass (fp16: cuda only, with GradScaler)")
    p.add_argument("--channels-last", action="store_true", help="NHWC model and batches")
    p.add_argument("--label", default="pytorch-ddp", help="label written to the JSON")
    p.add_argument("--json", default="", help="write the result here (bench.json fields)")
    args = p.parse_args(argv)
    mode, _, rank = args.grad_compression.partition(":")
    if mode not in ("none", "fp16", "powersgd") or (rank and (mode != "powersgd" or
                                                              not rank.isdigit() or int(rank) < 1)):
        p.error(f"--grad-compression {args.grad_compression}: choose none, fp16 or powersgd[:RANK]"
                " with RANK >= 1")
    args.powersgd_rank = int(rank) if rank else 4
    if mode == "powersgd" and args.grad_compression == "powersgd":
        args.grad_compression = f"powersgd:{args.powersgd_rank}"
    if mode == "powersgd" and args.powersgd_start_step < 2:
        p.error("--powersgd-start-step must be >= 2: DDP's powerSGD_hook with error feedback "
                "starts after its bucket rebuild")
    return args


def register_compression(model, args):
    """The DDP communication hook of --grad-compression (none: DDP's own allreduce)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if args.grad_compression == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.grad_compression.startswith("powersgd"):
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_step,
            min_compression_rate=args.powersgd_min_rate)
        if model.device_ids:  # NCCL: DDP's hook as it is
            model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        else:
            model.register_comm_hook(state, gloo_safe_powersgd_hook(model, args))


def gloo_safe_powersgd_hook(model, args):
    """DDP's powerSGD_hook with each bucket's collectives on a process group of its own.

    On Gloo the hook as it is aborts (gloo "op.preamble.length <= op.nbytes") once a model has
    two or more buckets (DDP always has a small first one): a bucket's P and Q allreduces are
    issued from the callback of its previous allreduce, on Gloo's thread, while the autograd
    thread issues the next bucket's first allreduce, so the ranks issue collectives in different
    orders and ProcessGroupGloo's sequence tags pair unlike messages. Giving each bucket its own
    group (same ranks) keeps every group's order fixed; the algorithm, its state and its
    arithmetic are DDP's own. DDP fills each bucket but the last to at least bucket_cap_mb, so
    ceil(parameter bytes / cap) + 2 groups (the first bucket, the last) cover every bucket.
    """
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    cap = args.bucket_mb * 1024 * 1024
    groups = [dist.new_group(list(range(dist.get_world_size())))
              for _ in range(-(-param_bytes // int(cap)) + 2)]

    def hook(state, bucket):
        if bucket.index() >= len(groups):
            raise RuntimeError(f"bucket {bucket.index()} has no process group of its own "
                               f"({len(groups)} made for {param_bytes} bytes in {args.bucket_mb} MiB buckets)")
        state.process_group = groups[bucket.index()]  # read once, at the hook's start
        return powerSGD_hook.powerSGD_hook(state, bucket)
    return hook


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(sorted_values, q):
    """Linear interpolation between order statistics (as chexscale's step statistics)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def phase(args, rank, what):
    """One line on stderr per phase of a multi-node rank, so that a stuck rank's log shows where."""
    if args.nnodes > 1:
        print(f"ddp_bench rank {rank}: {what} ({time.monotonic() - args.started:.1f} s)",
              file=sys.stderr, flush=True)


def worker(rank, args, init_method, queue):
    import torch
    import torch.distributed as dist

    phase(args, rank, "torch imported")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    world = args.workers
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True  # as torchvision's reference training, and chexscale
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = make_model(args.arch).to(device, memory_format=memory_format)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo",
                                init_method=init_method, rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[rank] if cuda else None, bucket_cap_mb=args.bucket_mb,
            broadcast_buffers=False)
        register_compression(model, args)
        phase(args, rank, "process group joined")
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.amp.GradScaler("cuda") if args.amp == "fp16" else None
    gen = torch.Generator().manual_seed(rank)
    batches = [(torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen)
                .to(device).contiguous(memory_format=memory_format),
                (torch.rand(args.batch_size, 14, generator=gen) < 0.2).float().to(device))
               for _ in range(4)]

    def synchronize():
        if cuda:
            torch.cuda.synchronize(device)

    def step(i):
        images, labels = batches[i % len(batches)]
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(images)
        loss = loss_fn(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        synchronize()

    for i in range(args.warmup_steps):
        step(i)
    if world > 1:
        dist.barrier()
    phase(args, rank, "warm-up done")
    synchronize()
    step_times = []
    start = time.perf_counter()
    for i in range(args.steps):
        t = time.perf_counter()
        step(i)
        step_times.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    if world > 1:
        gathered = [None] * world
        phase(args, rank, "steps done")
        dist.all_gather_object(gathered, (elapsed, step_times))
        # Every rank has every rank's step times once this barrier is passed, so none exits
        # while another still waits for its data.
        dist.barrier()
        phase(args, rank, "step times gathered")
    else:
        gathered = [(elapsed, step_times)]
    if rank == 0:
        queue.put((gathered, torch.__version__))
    if world > 1:
        # The results are handed on: leave without tearing down DDP's reducer and the Gloo
        # process group. That teardown deadlocked once in a 2-worker run (the main thread,
        # holding the GIL, joined a Gloo thread that was waiting for the GIL).
        phase(args, rank, "done")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def make_model(arch):
    """torchvision's model with 14 outputs, or the same architecture from tv_models.py."""
    try:
        import torchvision
        return getattr(torchvision.models, arch)(num_classes=14)
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import tv_models
        return tv_models.make(arch, num_classes=14)


def summarise(args, gathered, torch_version):
    world = args.workers
    elapsed = max(e for e, _ in gathered)
    # A step's time is the mean over ranks, as in chexscale's bench.json.
    per_step = sorted(statistics.fmean(ts[i] for _, ts in gathered) for i in range(args.steps))
    total = world * args.batch_size * args.steps / elapsed
    return {
        "schema": "chexscale.bench/1", "label": args.label, "arch": args.arch,
        "image_size": args.image_size, "batch_per_worker": args.batch_size,
        "world_size": world, "nnodes": args.nnodes,
        "backend": ("nccl" if args.device == "cuda" else "gloo") if world > 1 else "none",
        "overlap": True, "compression": args.grad_compression, "bucket_mb": args.bucket_mb,
        "data": "synthetic", "threads_per_worker": args.threads, "device": args.device,
        "amp": args.amp, "channels_last": args.channels_last,
        "warmup_steps": args.warmup_steps, "steps": args.steps, "elapsed_s": elapsed,
        "images_per_sec": total, "images_per_sec_per_worker": total / world,
        "step_time_s": {"median": percentile(per_step, 0.5), "p10": percentile(per_step, 0.1),
                        "p90": percentile(per_step, 0.9), "mean": statistics.fmean(per_step)},
        "per_rank": [{"rank": r, "images_per_sec": args.batch_size * args.steps / e}
                     for r, (e, _) in enumerate(gathered)],
        "torch_version": torch_version, "hostname": socket.gethostname(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv):
    args = parse_args(argv)
    if args.workers < 1 or args.steps < 1 or args.warmup_steps < 0 or args.threads < 1:
        sys.exit("ddp_bench: --workers, --steps and --threads must be >= 1, --warmup-steps >= 0")
    if args.amp == "fp16" and args.device != "cuda":
        sys.exit("ddp_bench: --amp fp16 needs --device cuda")
    # Child processes read these at import time: one OpenMP pool of --threads per worker.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["MKL_NUM_THREADS"] = str(args.threads)
    args.nnodes = 1
    args.started = time.monotonic()
    if all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        # One rank of a multi-node job: this process is the worker.
        faulthandler.register(signal.SIGTERM, chain=True)
        rank, args.workers = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        # torchrun's LOCAL_WORLD_SIZE: ranks per node (the lab's layouts run several on a node).
        args.nnodes = max(1, args.workers // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        class ReportQueue:  # rank 0 reports as it hands the results on
            def put(self, item):
                report(args, *item)

        worker(rank, args, "env://", ReportQueue())  # exits the process when WORLD_SIZE > 1
        return  # a 1-rank job: rank 0 has reported in put()
    else:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(worker, args=(args, f"tcp://127.0.0.1:{free_port()}", queue),
                           nprocs=args.workers, join=True, start_method="spawn")
        gathered, torch_version = queue.get()
    report(args, gathered, torch_version)


def report(args, gathered, torch_version):
    """Prints the summary lines and writes the JSON (--json)."""
    result = summarise(args, gathered, torch_version)
    print(f"workers: {args.workers}  step time median: {result['step_time_s']['median']:.3f} s  "
          f"images/s per worker: {result['images_per_sec_per_worker']:.2f}")
    print(f"images/s: {result['images_per_sec']:.2f}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
