#!/usr/bin/python3
"""Reference decode rates for bench_decode: Pillow (PNG, JPEG) and pydicom (DICOM) decoding the
same files on one core, each the best of REPEATS passes over the files, the bytes read from the
page cache. For each format, three measurements where they apply:

  full:    Pillow's Image.open().load() (pydicom's dcmread().pixel_array), the full-size image;
  resized: the same, then resize((SIZE, SIZE), Image.BOX) (area averaging, as chexscale's resize;
           16-bit images through mode "I", Pillow's BOX filter has no "I;16");
  draft:   JPEG only: Image.open(), draft("L", (SIZE, SIZE)) (libjpeg's DCT scaling), load(),
           then the same resize.

Prints one JSON object: {"<format>": {"<measurement>": {"per_s": ..., "per_cpu_s": ...}}, ...}.

usage: bench_decode.py REPEATS SIZE FORMAT=FILE_LIST ...   (FILE_LIST: one path a line)
"""
import json
import sys
import time


def pil_full(path, size):
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        if im.mode not in ("L", "I;16", "I;16B", "I"):
            im = im.convert("L")
        return im.size


def pil_box(im, size):
    from PIL import Image

    if im.mode in ("I;16", "I;16B"):
        im = im.convert("I")
    elif im.mode not in ("L", "I"):
        im = im.convert("L")
    return im.resize((size, size), Image.BOX).size


def pil_resized(path, size):
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        return pil_box(im, size)


def pil_draft_resized(path, size):
    from PIL import Image

    with Image.open(path) as im:
        im.draft("L", (size, size))
        im.load()
        return pil_box(im, size)


def dicom_full(path, size):
    import pydicom

    ds = pydicom.dcmread(path)
    return ds.pixel_array.shape


def best_rates(decode, paths, size, repeats):
    decode(paths[0], size)  # imports and first-call set-up are not decoding
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for p in paths:
            decode(p, size)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return {"per_s": len(paths) / best_wall, "per_cpu_s": len(paths) / best_cpu}


def main():
    repeats = int(sys.argv[1])
    size = int(sys.argv[2])
    result = {}
    for spec in sys.argv[3:]:
        fmt, list_path = spec.split("=", 1)
        with open(list_path) as f:
            paths = [line.strip() for line in f if line.strip()]
        if fmt == "dicom":
            result[fmt] = {"full": best_rates(dicom_full, paths, size, repeats)}
            continue
        result[fmt] = {
            "full": best_rates(pil_full, paths, size, repeats),
            "resized": best_rates(pil_resized, paths, size, repeats),
        }
        if fmt == "jpeg":
            result[fmt]["draft"] = best_rates(pil_draft_resized, paths, size, repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
