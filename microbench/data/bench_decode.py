#!/usr/bin/python3
"""Reference decode rates for bench_decode: Pillow (PNG, JPEG) and pydicom (DICOM) decoding the
same files on one core, each the best of REPEATS passes over the files, the bytes read from the
page cache. Prints one JSON object: {"<format>": {"per_s": ..., "per_cpu_s": ...}, ...}.

usage: bench_decode.py REPEATS FORMAT=FILE_LIST ...   (FILE_LIST: one path a line)
"""
import json
import sys
import time


def decode_pil(path):
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        if im.mode not in ("L", "I;16", "I;16B", "I"):
            im = im.convert("L")
        return im.size


def decode_dicom(path):
    import pydicom

    ds = pydicom.dcmread(path)
    return ds.pixel_array.shape


def main():
    repeats = int(sys.argv[1])
    result = {}
    for spec in sys.argv[2:]:
        fmt, list_path = spec.split("=", 1)
        with open(list_path) as f:
            paths = [line.strip() for line in f if line.strip()]
        decode = decode_dicom if fmt == "dicom" else decode_pil
        decode(paths[0])  # imports and first-call set-up are not decoding
        best_wall = best_cpu = float("inf")
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            for p in paths:
                decode(p)
            best_wall = min(best_wall, time.perf_counter() - wall)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        result[fmt] = {"per_s": len(paths) / best_wall, "per_cpu_s": len(paths) / best_cpu}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
