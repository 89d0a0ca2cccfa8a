#!/usr/bin/python3
"""The VOI LUT reference of the DICOM decoder tests: dicom_voi_lut.py IN OUT reads the DICOM file
IN (one frame, 16 bits allocated), adds a VOI LUT Sequence with pydicom -- one LUT of
2^BitsStored 16-bit entries, first mapped 0, a square-root curve over the full output range --
writes OUT, and prints OUT's pixels as pydicom renders them:

    <width> <height> <bit depth> <pixel values, row-major, space-separated>

pixel_array -> apply_modality_lut -> apply_voi_lut (which prefers the LUT to any window, as
TorchXRayVision's read_xray_dcm), scaled from the LUT's 16-bit range onto 0 .. 2^BitsStored - 1,
MONOCHROME1 inverted.
"""
import sys
import warnings

import numpy as np
import pydicom
from pydicom.dataset import Dataset
from pydicom.pixel_data_handlers.util import apply_modality_lut, apply_voi_lut
from pydicom.sequence import Sequence


def main():
    warnings.simplefilter("ignore")  # pydicom's notes on the file go nowhere: one line is read
    src, dst = sys.argv[1:3]
    ds = pydicom.dcmread(src)
    bits = int(ds.BitsStored)
    entries = 2**bits
    lut = np.rint(np.sqrt(np.arange(entries) / (entries - 1)) * 65535).astype(np.uint16)
    item = Dataset()
    item.add_new(0x00283002, "US", [entries % 65536, 0, 16])  # LUT Descriptor (65536 is 0)
    item.add_new(0x00283006, "OW", lut.tobytes())  # LUT Data (OW: 2^16 entries exceed US's length)
    item.LUTExplanation = "SQRT"
    ds.VOILUTSequence = Sequence([item])
    ds.save_as(dst)
    out = pydicom.dcmread(dst)
    arr = apply_voi_lut(apply_modality_lut(out.pixel_array, out), out, index=0).astype(np.float64)
    out_max = 2**bits - 1
    pixels = arr / 65535 * out_max
    if out.PhotometricInterpretation == "MONOCHROME1":
        pixels = out_max - pixels
    pixels = np.clip(np.rint(pixels), 0, out_max).astype(np.int64)
    print(out.Columns, out.Rows, bits, " ".join(str(v) for v in pixels.reshape(-1)))


if __name__ == "__main__":
    main()
