"""Read the trained points of Based's recall / state-size figure (arXiv 2402.18668, Fig. 2) from its PNG.

The figure is ``assets/tradeoff.png`` of HazyResearch/based (commit 32c1bd4, the README's "Figure 2"; 869 x 393
pixels). Get it with ``git -C based show 32c1bd4:assets/tradeoff.png > tradeoff.png`` and run
``python docs/scripts/read_based_figure2.py tradeoff.png``: it prints the rows of capacity/data/based_figure2.csv.

How: the light-grey grid lines give the axes (x: log2 bytes at the lines of 2^14 ... 2^22; y: accuracy at 0.2 ... 1.0),
fitted by least squares; each marker's filled interior (its saturated pixels, inside the dark outline) is one
connected blob, whose centroid is the point and whose mean colour names the architecture (the legend's colours).
"""

from __future__ import annotations

import sys

import numpy as np
from PIL import Image
from scipy import ndimage

COLOURS = {  # mean interior colour of the legend's markers
    "Based": (200, 116, 72),
    "Mamba": (222, 214, 49),
    "Attention (sliding window)": (38, 151, 204),
    "Attention (full)": (69, 101, 162),
    "H3": (74, 156, 93),
    "Hyena": (182, 70, 73),
}
LEFT = 470  # the scatter plot is right of this column


def read(path: str):
    im = np.asarray(Image.open(path).convert("RGB")).astype(int)[:, LEFT:]
    r, g, b = im[..., 0], im[..., 1], im[..., 2]
    grey = (abs(r - g) < 8) & (abs(g - b) < 8) & (r > 190) & (r < 235)

    def lines(mask_sum, count):
        idx = np.where(mask_sum > 150)[0]
        groups = np.split(idx, np.where(np.diff(idx) > 2)[0] + 1)
        return [float(np.mean(gr)) for gr in groups][-count:]

    xs = np.array(lines(grey.sum(0), 5)) + LEFT  # 2^14, 2^16, ..., 2^22
    ys = np.array(lines(grey.sum(1), 6)[:5])  # 1.0, 0.8, ..., 0.2 (the sixth is the axis)
    fx = np.polyfit(xs, [14, 16, 18, 20, 22], 1)  # log2 bytes per pixel
    fy = np.polyfit(ys, [1.0, 0.8, 0.6, 0.4, 0.2], 1)
    sat = (im.max(-1) - im.min(-1)) > 60
    lab, count = ndimage.label(sat)
    rows = []
    for i in range(1, count + 1):
        yy, xx = np.where(lab == i)
        if yy.size < 15:  # legend text and specks
            continue
        colour = im[yy, xx].mean(0)
        name = min(COLOURS, key=lambda k: float(((np.array(COLOURS[k]) - colour) ** 2).sum()))
        px, py = xx.mean() + LEFT, yy.mean()
        log2b, acc = float(np.polyval(fx, px)), float(np.polyval(fy, py))
        rows.append((name, log2b, acc, px, py, int(yy.size)))
    return sorted(rows, key=lambda r: (list(COLOURS).index(r[0]), r[1])), fx, fy


if __name__ == "__main__":
    rows, fx, fy = read(sys.argv[1])
    print(f"# x: log2 bytes = {fx[0]:.6f} px + {fx[1]:.4f}; y: accuracy = {fy[0]:.6f} px + {fy[1]:.4f}")
    print("architecture,state_bytes,log2_state_bytes,accuracy,x_px,y_px,blob_px")
    for name, lb, acc, px, py, size in rows:
        print(f"{name},{2**lb:.0f},{lb:.3f},{acc:.3f},{px:.1f},{py:.1f},{size}")
