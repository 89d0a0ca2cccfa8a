#!/usr/bin/python3
"""The reference side of chexscale's model tests: torchvision 0.14 (Debian python3-torchvision).

Run with /usr/bin/python3 (torch + torchvision). safetensors files are read and written here with
struct + json, following the format specification (no python safetensors package is needed).

  state-dicts OUT.json [--num-classes N]
      torchvision's parameter count and full state_dict (names, shapes, dtypes) of every arch.
  make-case ARCH DIR [--num-classes N] [--size S] [--seed S] [--pth zip|legacy|legacy-names]
      random torchvision weights (random BN statistics too), a random input and the eval-mode
      logits: DIR/weights.safetensors, DIR/input.safetensors, DIR/expected.safetensors. With
      --pth also DIR/weights.pth written by torch.save: zip (its default format), legacy (the
      format before PyTorch 1.6) or legacy-names (legacy, and DenseNet layers under the names of
      torchvision's old checkpoints, "denselayer1.norm.1.weight", which its loader maps, and
      without num_batches_tracked, as those checkpoints are).
  bad-pth ARCH DIR [--num-classes N]
      torch.save files that are not ARCH's state dict: DIR/model.pth (the whole model pickled),
      DIR/checkpoint.pth ({"epoch": 1, "model": state_dict}), DIR/missing.pth (one tensor
      removed), DIR/extra.pth (one added), DIR/shape.pth (one of another shape).
  logits ARCH WEIGHTS INPUT OUT [--num-classes N]
      loads WEIGHTS (strict; safetensors, or .pth read by torch.load) into torchvision, writes
      its eval-mode logits for INPUT to OUT.
"""
import argparse
import json
import re
import struct
import sys

import torch
import torchvision

ARCHS = ["densenet121", "densenet169", "densenet201", "resnet18", "resnet34", "resnet50", "resnet101"]

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "U8": torch.uint8,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        blob = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    buffer = data[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        raw = bytearray(buffer[begin:end])
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"]).clone()
    return tensors


def build(arch, num_classes):
    return getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)


def state_dicts(args):
    out = {}
    for arch in ARCHS:
        model = build(arch, args.num_classes)
        out[arch] = {
            "parameters": sum(p.numel() for p in model.parameters()),
            "state_dict": [[k, list(v.shape), DTYPE_NAMES[v.dtype]] for k, v in model.state_dict().items()],
        }
    with open(args.out, "w") as f:
        json.dump(out, f)


def randomize(model, generator):
    """Random weights and BN statistics, so that a wrong mapping cannot go unnoticed."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(int(torch.randint(1, 1000, (1,), generator=generator)))
            elif name.endswith("running_var") or (name.endswith("weight") and t.dim() == 1):
                t.copy_(torch.rand(t.shape, generator=generator) + 0.5)
            elif name.endswith("running_mean") or name.endswith("bias"):
                t.copy_(torch.randn(t.shape, generator=generator) * 0.1)
            else:
                fan_in = t[0].numel()
                t.copy_(torch.randn(t.shape, generator=generator) * (2.0 / fan_in) ** 0.5)


def make_case(args):
    generator = torch.Generator().manual_seed(args.seed)
    model = build(args.arch, args.num_classes)
    randomize(model, generator)
    model.eval()
    x = torch.randn(2, 3, args.size, args.size, generator=generator)
    with torch.no_grad():
        logits = model(x)
    write_safetensors(f"{args.dir}/weights.safetensors", model.state_dict(), {"format": "pt"})
    write_safetensors(f"{args.dir}/input.safetensors", {"input": x})
    write_safetensors(f"{args.dir}/expected.safetensors", {"logits": logits})
    if args.pth:
        state = model.state_dict()
        if args.pth == "legacy-names":
            # The inverse of torchvision's densenet _load_state_dict: norm1 -> norm.1 and so on.
            old = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))((?:[12])\.(?:weight|bias|running_mean|running_var))$")
            state = type(state)((old.sub(r"\1.\2", k), v) for k, v in state.items()
                                if not k.endswith("num_batches_tracked"))  # older than 0.4
        torch.save(state, f"{args.dir}/weights.pth", _use_new_zipfile_serialization=args.pth == "zip")


def bad_pth(args):
    model = build(args.arch, args.num_classes)
    state = model.state_dict()
    torch.save(model, f"{args.dir}/model.pth")
    torch.save({"epoch": 1, "model": state}, f"{args.dir}/checkpoint.pth")
    names = list(state)
    missing = type(state)((k, v) for k, v in state.items() if k != names[0])
    torch.save(missing, f"{args.dir}/missing.pth")
    extra = type(state)(state)
    extra["extra.weight"] = torch.zeros(3)
    torch.save(extra, f"{args.dir}/extra.pth")
    shape = type(state)(state)
    shape[names[0]] = torch.zeros(2, 2)
    torch.save(shape, f"{args.dir}/shape.pth")


def load_weights(path):
    if path.endswith(".pth"):
        return torch.load(path)
    return read_safetensors(path)


def logits(args):
    model = build(args.arch, args.num_classes)
    model.load_state_dict(load_weights(args.weights), strict=True)
    model.eval()
    x = read_safetensors(args.input)["input"]
    with torch.no_grad():
        out = model(x)
    write_safetensors(args.out, {"logits": out})


def main():
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("state-dicts")
    p.add_argument("out")
    p.add_argument("--num-classes", type=int, default=14)
    p.set_defaults(run=state_dicts)
    p = sub.add_parser("make-case")
    p.add_argument("arch", choices=ARCHS)
    p.add_argument("dir")
    p.add_argument("--num-classes", type=int, default=14)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pth", choices=["zip", "legacy", "legacy-names"])
    p.set_defaults(run=make_case)
    p = sub.add_parser("bad-pth")
    p.add_argument("arch", choices=ARCHS)
    p.add_argument("dir")
    p.add_argument("--num-classes", type=int, default=14)
    p.set_defaults(run=bad_pth)
    p = sub.add_parser("logits")
    p.add_argument("arch", choices=ARCHS)
    p.add_argument("weights")
    p.add_argument("input")
    p.add_argument("out")
    p.add_argument("--num-classes", type=int, default=14)
    p.set_defaults(run=logits)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    sys.exit(main())
