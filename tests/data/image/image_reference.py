#!/usr/bin/python3
"""Independent reference decodes for the image decoder tests: Pillow for PNG and JPEG, pydicom
for DICOM. For each file named on the command line, prints one line:

    <width> <height> <bit depth> <pixel values, row-major, space-separated>

PNG: Pillow's gray ("L", or "I;16" for 16-bit PNGs; colour converted with Pillow's luma).
JPEG: Pillow's decode to gray (draft("L"): libjpeg's luma plane, for colour JPEGs too); with
--draft=N first on the command line, draft("L", (N, N)): libjpeg's DCT scaling to the smallest
of 1/8, 1/4, 1/2 that keeps both sides >= N.
DICOM: pydicom's pixel_array, then its modality LUT (Rescale Slope/Intercept) and VOI LUT or
first window (apply_voi_lut), mapped from the output range pydicom uses ([y_min, y_max], the
rescaled range of the stored bits) onto 0 .. 2^BitsStored - 1, MONOCHROME1 inverted: the
rendering chexscale's DCMTK path documents (TorchXRayVision's read_xray_dcm with its VOI LUT).
A file the reference cannot read prints "error <message>".
"""
import sys

import numpy as np


def dicom_pixels(path):
    import pydicom
    from pydicom.pixel_data_handlers.util import apply_modality_lut, apply_voi_lut

    ds = pydicom.dcmread(path)
    bits = int(ds.BitsStored)
    arr = apply_modality_lut(ds.pixel_array, ds).astype(np.float64)
    slope = float(getattr(ds, "RescaleSlope", 1.0))
    intercept = float(getattr(ds, "RescaleIntercept", 0.0))
    y_min = intercept
    y_max = (2**bits - 1) * slope + intercept
    if "VOILUTSequence" in ds or "WindowCenter" in ds:
        arr = apply_voi_lut(arr, ds, index=0).astype(np.float64)
    out_max = 2 ** max(bits, 8) - 1
    out = (arr - y_min) / (y_max - y_min) * out_max
    if ds.PhotometricInterpretation == "MONOCHROME1":
        out = out_max - out
    return ds.Columns, ds.Rows, max(bits, 8), np.clip(np.rint(out), 0, out_max).astype(np.int64)


def pil_pixels(path, draft):
    from PIL import Image

    with Image.open(path) as im:
        if im.format == "JPEG":
            im.draft("L", (draft, draft) if draft else im.size)
        im.load()
        if im.mode in ("I;16", "I;16B", "I"):
            arr = np.asarray(im, dtype=np.int64)
            return im.width, im.height, 16, arr
        return im.width, im.height, 8, np.asarray(im.convert("L"), dtype=np.int64)


def main():
    paths = sys.argv[1:]
    draft = 0
    if paths and paths[0].startswith("--draft="):
        draft = int(paths.pop(0).split("=", 1)[1])
    for path in paths:
        try:
            with open(path, "rb") as f:
                head = f.read(132)
            is_dicom = len(head) == 132 and head[128:132] == b"DICM"
            w, h, bits, arr = dicom_pixels(path) if is_dicom else pil_pixels(path, draft)
            print(w, h, bits, " ".join(str(v) for v in arr.reshape(-1)))
        except Exception as e:  # the C++ test reports it with the file's name
            print("error", str(e).replace("\n", " "))


if __name__ == "__main__":
    main()
