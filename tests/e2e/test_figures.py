"""End-to-end tests of the paper figures: `kvrank plot` formats, sizes, panels, styles and the
training-step figures, and the training step `kvrank analyze` records.

Usage: python3 tests/e2e/test_figures.py path/to/kvrank   (run from the repository root)
Every SVG is parsed as XML (xml.etree) and its structure checked; figures are also rendered to PNG
(decoded here with zlib) to check that each series is drawn where its values say; PDFs are checked
with pdfinfo (poppler-utils). Needs rsvg-convert and pdfinfo (scripts/setup.sh installs both): the
test is skipped, visibly, without them.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import harness
from harness import run

NS = "{http://www.w3.org/2000/svg}"
STEPS_DATA = os.path.join(harness.ROOT, "data", "tiny-steps")

# The paper's variants with the paper's colour order, in colour-blind-safe shades.
PAPER_COLOURS = {"mha": "#0072b2", "lrkv-small": "#e69f00", "lrkv-large": "#009e73",
                 "mqa": "#d55e00", "mla": "#cc79a7", "gqa": "#8c564b"}
BASELINE_GREY = "#7f7f7f"


# ------------------------------------------------------------------------------- result files

def layer_entry(index, value, heads=8):
    return {"layer": index, "heads": heads, "erank": value, "erank_centered": value / 2,
            "erank_pct": 100.0 * value / heads, "erank_centered_pct": 50.0 * value / heads,
            "mean_similarity": 0.1, "pcs_90": 3, "eigenvalues": [1.0] * heads,
            "eigenvalues_centered": [1.0] * heads, "head_erank": [2.0] * heads,
            "head_norm": [1.0] * heads, "zero_heads": []}


def model_entry(label, values, variant="mha", repr_="qk", path=None, step=None, rank=None):
    mean = sum(values) / len(values)
    return {"label": label, "path": path or "/ckpts/" + label, "step": step, "family": "llama",
            "variant": variant, "heads": 8, "kv_heads": 8, "head_dim": 16, "d_model": 128,
            "num_layers": len(values), "lrkv_rank": rank, "mla_kv_lora_rank": None,
            "repr": repr_, "layers": [layer_entry(i, v) for i, v in enumerate(values)],
            "summary": {"erank_mean": mean, "erank_centered_mean": mean / 2,
                        "erank_pct_mean": 100 * mean / 8, "erank_centered_pct_mean": 50 * mean / 8}}


def document(models):
    return {"schema_version": 1, "tool": {"name": "kvrank", "version": "test"}, "models": models}


def seed_like(layers=6):
    """The seed figure's six variants, well apart so that no two markers overlap."""
    specs = [("Standard MHA", "mha", None), ("LRKV (r=16)", "lrkv", 16), ("LRKV (r=64)", "lrkv", 64),
             ("MQA", "mqa", None), ("MLA", "mla", None), ("GQA", "gqa", None)]
    return [model_entry(label, [2.0 + k + 0.1 * i for i in range(layers)], variant, rank=rank)
            for k, (label, variant, rank) in enumerate(specs)]


# ------------------------------------------------------------------------------- SVG structure

def cls(element):
    return element.get("class", "")


def length_in(text):
    match = re.fullmatch(r"([0-9.]+)in", text)
    assert match, text
    return float(match.group(1))


def svg_summary(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == NS + "svg", root.tag
    view = [float(v) for v in root.get("viewBox").split()]
    panels = []
    for panel in root.iter(NS + "g"):
        if cls(panel) != "panel":
            continue
        frame = next(r for r in panel.iter(NS + "rect") if cls(r) == "frame")
        series = {}
        for group in panel.iter(NS + "g"):
            if cls(group) != "model":
                continue
            path_ = next(p for p in group.iter(NS + "path") if cls(p) == "series")
            markers = [(float(m.get("data-x")), float(m.get("data-y")), m.get("data-shape"))
                       for m in group.iter(NS + "path") if cls(m) == "marker"]
            series[group.get("data-label")] = {"colour": path_.get("stroke"),
                                               "dash": path_.get("stroke-dasharray"),
                                               "markers": markers}
        cells = [{"layer": int(c.get("data-layer")), "step": int(c.get("data-step")),
                  "value": float(c.get("data-value")), "fill": c.get("fill"),
                  "x": float(c.get("x")), "y": float(c.get("y")),
                  "width": float(c.get("width")), "height": float(c.get("height"))}
                 for c in panel.iter(NS + "rect") if cls(c) == "cell"]
        panels.append({
            "title": panel.get("data-title"), "series": series, "cells": cells,
            "frame": [float(frame.get(k)) for k in ("x", "y", "width", "height")],
            "y": (float(panel.get("data-y-low", "nan")), float(panel.get("data-y-high", "nan"))),
            "x": (float(panel.get("data-x-low", "nan")), float(panel.get("data-x-high", "nan"))),
            "baselines": [p.get("stroke") for p in panel.iter(NS + "path") if cls(p) == "baseline"],
        })
    legend_boxes = [g for g in root.iter(NS + "g") if cls(g) == "legend"]
    legend = ["".join(t.text or "" for t in g.iter(NS + "text"))
              for g in root.iter(NS + "g") if cls(g) == "legend-entry"]
    legend_rect = None
    if legend_boxes:
        r = next(legend_boxes[0].iter(NS + "rect"))
        legend_rect = [float(r.get(k)) for k in ("x", "y", "width", "height")]
    return {"width_in": length_in(root.get("width")), "height_in": length_in(root.get("height")),
            "view": view, "panels": panels, "legend": legend, "legend_rect": legend_rect}


def marker_y(panel, value):
    """Where a value must be drawn in a panel: a linear map of the panel's y range."""
    left, top, width, height = panel["frame"]
    low, high = panel["y"]
    return top + (1 - (value - low) / (high - low)) * height


def marker_x(panel, value):
    left, top, width, height = panel["frame"]
    low, high = panel["x"]
    return left + (value - low) / (high - low) * width


# ------------------------------------------------------------------------------- PNG decoding

def read_png(path):
    """(width, height, rows of (r, g, b, a)) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    channels = 4 if colour_type == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line
    return width, height, channels, rows


def pixel(png, x, y):
    width, height, channels, rows = png
    at = int(x) * channels
    return tuple(rows[int(y)][at:at + 3])


def hex_rgb(colour):
    colour = colour.lstrip("#")
    return tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))


def near(a, b, tolerance=40):
    return all(abs(p - q) <= tolerance for p, q in zip(a, b))


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def font_advances(path):
    """Code point -> advance width in em, read from a TrueType font's cmap (format 4) and hmtx
    tables: the font rsvg-convert draws the figures with, independent of kvrank's own table."""
    with open(path, "rb") as f:
        data = f.read()
    tables = {}
    for i in range(struct.unpack(">H", data[4:6])[0]):
        tag, _, offset, _ = struct.unpack(">4sIII", data[12 + 16 * i:28 + 16 * i])
        tables[tag.decode()] = offset
    units = struct.unpack(">H", data[tables["head"] + 18:tables["head"] + 20])[0]
    metrics = struct.unpack(">H", data[tables["hhea"] + 34:tables["hhea"] + 36])[0]
    advances = [struct.unpack(">H", data[tables["hmtx"] + 4 * i:tables["hmtx"] + 4 * i + 2])[0]
                for i in range(metrics)]
    cmap = tables["cmap"]
    sub = next(cmap + off for pid, eid, off in
               (struct.unpack(">HHI", data[cmap + 4 + 8 * i:cmap + 12 + 8 * i])
                for i in range(struct.unpack(">H", data[cmap + 2:cmap + 4])[0]))
               if (pid, eid) == (3, 1))
    segments = struct.unpack(">H", data[sub + 6:sub + 8])[0] // 2
    def array(k, signed=False):
        at = sub + 14 + 2 * segments * k + (2 if k else 0)
        return struct.unpack(">%d%s" % (segments, "h" if signed else "H"),
                             data[at:at + 2 * segments]), at
    (ends, _), (starts, _) = array(0), array(1)
    (deltas, _), (offsets, offsets_at) = array(2, True), array(3)
    def width(code):
        for i in range(segments):
            if starts[i] <= code <= ends[i]:
                glyph = code + deltas[i]
                if offsets[i]:
                    at = offsets_at + 2 * i + offsets[i] + 2 * (code - starts[i])
                    glyph = struct.unpack(">H", data[at:at + 2])[0] + deltas[i]
                return advances[min(glyph & 0xFFFF, metrics - 1)] / units
        return advances[0] / units
    return width


def text_box(element, advance):
    """(left, top, right, bottom) of a horizontal <text>, from its font's advance widths."""
    size = float(element.get("font-size"))
    width = size * sum(advance(ord(c)) for c in element.text or "")
    x, y = float(element.get("x")), float(element.get("y"))
    left = {"start": x, "middle": x - width / 2, "end": x - width}[element.get("text-anchor")]
    return left, y - 0.76 * size, left + width, y + 0.24 * size  # DejaVu's ascent and descent


def overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def no_nan_coordinates(test, path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    test.assertNotRegex(text.lower(), r'(x|y|d|width|height|transform|points)="[^"]*nan')


class FigureTest(harness.TestCase):
    def write(self, name, models):
        path = self.path(name)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(document(models), out)
        return path

    def plot(self, *args):
        result = run("plot", *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "")
        return result

    def plot_both(self, source, name, *args):
        """The figure as SVG and as a 96-dpi PNG (one PNG pixel per SVG unit): (summary, png)."""
        self.plot(source, "-o", self.path(name + ".svg"), *args)
        self.plot(source, "-o", self.path(name + ".png"), "--dpi", "96", *args)
        return svg_summary(self.path(name + ".svg")), read_png(self.path(name + ".png"))

    def assert_drawn(self, svg, png):
        """Every marker's centre and every cell's centre has its colour in the PNG."""
        for panel in svg["panels"]:
            for label, series in panel["series"].items():
                for x, y, _ in series["markers"]:
                    got = pixel(png, x, y)
                    self.assertTrue(near(got, hex_rgb(series["colour"])),
                                    f"{panel['title']} {label}: pixel {got} at ({x:.1f}, {y:.1f}), "
                                    f"expected {series['colour']}")
            for cell in panel["cells"]:
                got = pixel(png, cell["x"] + cell["width"] / 2, cell["y"] + cell["height"] / 2)
                self.assertTrue(near(got, hex_rgb(cell["fill"]), 6), (panel["title"], cell, got))

    def assert_usage_error(self, result):
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("kvrank: error: "), lines[0])
        return lines[0]

    # --------------------------------------------------------------- panels and series

    def test_every_representation_gets_its_own_panel(self):
        models = []
        for label, base in (("MHA", 6.0), ("MQA", 3.0)):
            models.append(model_entry(label, [base, base + 0.5, base + 0.2], repr_="qk"))
            models.append(model_entry(label, [base - 2, base - 1.5, base - 1.8], repr_="k"))
        path = self.write("tiny.json", models)
        self.plot(path, "-o", self.path("f.svg"))
        svg = svg_summary(self.path("f.svg"))
        self.assertEqual([p["title"] for p in svg["panels"]], ["tiny (qk)", "tiny (k)"])
        for panel, offset in zip(svg["panels"], (0.0, -2.0)):
            self.assertEqual(sorted(panel["series"]), ["MHA", "MQA"])
            for label, base in (("MHA", 6.0), ("MQA", 3.0)):
                markers = panel["series"][label]["markers"]
                self.assertEqual(len(markers), 3)
                self.assertAlmostEqual(markers[0][1], marker_y(panel, base + offset), delta=0.02)
        self.assertEqual(svg["legend"], ["MHA", "MQA", "Fully redundant"])

    def test_default_styles_are_distinct_and_keep_the_paper_colours(self):
        models = seed_like()
        models.append(model_entry("Seventh", [9.0, 9.1, 9.2, 9.3, 9.4, 9.5], variant="mha"))
        models.append(model_entry("Eighth", [10.0, 10.1, 10.2, 10.3, 10.4, 10.5], variant="other"))
        self.plot(self.write("seed.json", models), "-o", self.path("f.svg"))
        series = svg_summary(self.path("f.svg"))["panels"][0]["series"]
        looks = {(s["colour"], s["markers"][0][2]) for s in series.values()}
        self.assertEqual(len(looks), 8)  # no two series look alike
        self.assertEqual(len({s["colour"] for s in series.values()}), 8)
        self.assertEqual(len({s["markers"][0][2] for s in series.values()}), 8)
        self.assertNotIn(BASELINE_GREY, {s["colour"] for s in series.values()})
        expected = {"Standard MHA": "mha", "LRKV (r=16)": "lrkv-small", "LRKV (r=64)": "lrkv-large",
                    "MQA": "mqa", "MLA": "mla", "GQA": "gqa"}
        for label, variant in expected.items():
            self.assertEqual(series[label]["colour"], PAPER_COLOURS[variant], label)
        # The paper's colours follow the variant, not the order the models come in.
        self.plot(self.write("reversed.json", list(reversed(seed_like()))), "-o", self.path("r.svg"))
        reversed_series = svg_summary(self.path("r.svg"))["panels"][0]["series"]
        for label, variant in expected.items():
            self.assertEqual(reversed_series[label]["colour"], PAPER_COLOURS[variant], label)

    def test_style_file_fixes_colour_marker_and_dash(self):
        style = self.path("style.json")
        with open(style, "w", encoding="utf-8") as out:
            json.dump({"MQA": {"colour": "#123456", "marker": "star", "dash": "dotted"},
                       "Unused": {"marker": "plus"}}, out)
        path = self.write("seed.json", seed_like())
        self.plot(path, "-o", self.path("f.svg"), "--style", style)
        series = svg_summary(self.path("f.svg"))["panels"][0]["series"]
        self.assertEqual(series["MQA"]["colour"], "#123456")
        self.assertEqual({m[2] for m in series["MQA"]["markers"]}, {"star"})
        self.assertEqual(series["MQA"]["dash"], "1 3")
        self.assertEqual(series["MLA"]["colour"], PAPER_COLOURS["mla"])  # others keep theirs
        for bad in ({"MQA": {"colour": "red\" onload=\"x"}}, {"MQA": {"marker": "blob"}},
                    {"MQA": {"size": 3}}, {"MQA": {"dash": "dashes"}}, ["MQA"]):
            with open(style, "w", encoding="utf-8") as out:
                json.dump(bad, out)
            line = self.assert_usage_error(run("plot", path, "-o", self.path("bad.svg"),
                                               "--style", style))
            self.assertIn("style.json", line)
            self.assertFalse(os.path.exists(self.path("bad.svg")))

    def test_panel_titles_grid_shared_y_and_ylim(self):
        inputs = []
        for k in range(6):
            values = [1.0 + k + 0.3 * i for i in range(4)]
            inputs.append(self.write(f"run{k}.json", [model_entry("M", values)]))
        titled = [f"{inputs[0]}=128M scale"] + inputs[1:]
        names = ["First", "Second", "Third", "Fourth", "Fifth", "Sixth"]
        self.plot(*titled, *[a for name in names for a in ("--panel-title", name)],
                  "-o", self.path("grid.svg"), "--cols", "3")
        svg = svg_summary(self.path("grid.svg"))
        self.assertEqual([p["title"] for p in svg["panels"]], names)
        for given in (2, 7, 1):
            titles = [a for name in (names * 2)[:given] for a in ("--panel-title", name)]
            line = self.assert_usage_error(run("plot", *titled, *titles, "-o", self.path("n.svg")))
            self.assertEqual(line, f"kvrank: error: --panel-title given {given} times for 6 "
                             "input(s): give it once per input, in order, or not at all")
            self.assertFalse(os.path.exists(self.path("n.svg")))
        self.plot(*titled, "-o", self.path("grid.svg"), "--cols", "3")
        svg = svg_summary(self.path("grid.svg"))
        self.assertEqual(svg["panels"][0]["title"], "128M scale")
        lefts = sorted({round(p["frame"][0], 1) for p in svg["panels"]})
        tops = sorted({round(p["frame"][1], 1) for p in svg["panels"]})
        self.assertEqual((len(lefts), len(tops)), (3, 2))
        self.assertEqual(len({p["y"] for p in svg["panels"]}), 6)  # own ranges by default
        self.plot(*inputs, "-o", self.path("shared.svg"), "--share-y")
        shared = svg_summary(self.path("shared.svg"))
        self.assertEqual(len({p["y"] for p in shared["panels"]}), 1)
        low, high = shared["panels"][0]["y"]
        self.assertLessEqual(low, 1.0)
        self.assertGreaterEqual(high, 6.9)
        self.plot(*inputs, "-o", self.path("ylim.svg"), "--ylim", "0,10")
        for panel in svg_summary(self.path("ylim.svg"))["panels"]:
            self.assertEqual(panel["y"], (0.0, 10.0))
            marker = panel["series"]["M"]["markers"][1]
            values = [1.0 + int(panel["title"][3:]) + 0.3 * i for i in range(4)]
            self.assertAlmostEqual(marker[1], marker_y(panel, values[1]), delta=0.02)
        for bad in ("5,1", "a,b", "3", "1,inf"):
            self.assert_usage_error(run("plot", inputs[0], "-o", self.path("x.svg"), "--ylim", bad))
        self.assert_usage_error(run("plot", inputs[0], "-o", self.path("x.svg"),
                                    "--panel-title", "a", "--panel-title", "b"))
        self.assertFalse(os.path.exists(self.path("x.svg")))

    def test_png_of_grids_presets_and_styles(self):
        path = self.write("seed.json", seed_like())
        style = self.path("style.json")
        with open(style, "w", encoding="utf-8") as out:
            json.dump({"MQA": {"colour": "#123456", "marker": "star"}}, out)
        for args in (("--size", "column"), ("--size", "page", "--cols", "1", "--legend", "right"),
                     ("--ylim", "0,20", "--style", style, "--legend", "inside")):  # data below it
            self.assert_drawn(*self.plot_both(path, "fig", *args))

    def test_legend_places(self):
        path = self.write("seed.json", seed_like())
        for place in ("below", "right", "inside", "none"):
            self.plot(path, "-o", self.path(place + ".svg"), "--legend", place)
            svg = svg_summary(self.path(place + ".svg"))
            left, top, width, height = svg["panels"][0]["frame"]
            if place == "none":
                self.assertIsNone(svg["legend_rect"])
                continue
            self.assertEqual(len(svg["legend"]), 7)
            x, y, w, h = svg["legend_rect"]
            self.assertLessEqual(x + w, svg["view"][2] + 0.01, place)  # inside the figure
            self.assertLessEqual(y + h, svg["view"][3] + 0.01, place)
            if place == "below":
                self.assertGreater(y, top + height)
            elif place == "right":
                self.assertGreater(x, left + width)
            else:
                self.assertTrue(left < x and x + w < left + width and top < y < top + height)

    # --------------------------------------------------------------- formats and sizes

    def test_formats_by_extension_and_unknown_ones_are_usage_errors(self):
        path = self.write("seed.json", seed_like())
        for name in ("f.svg", "F.SVG"):
            self.plot(path, "-o", self.path(name))
            svg_summary(self.path(name))
        for name in ("f.png", "F.PNG"):
            self.plot(path, "-o", self.path(name), "--size", "column", "--dpi", "200")
            width, height, _, _ = read_png(self.path(name))
            self.assertEqual(width, 700)  # 3.5 in at 200 dpi
        for name in ("f.pdf", "F.Pdf"):
            self.plot(path, "-o", self.path(name), "--width", "5", "--height", "2.5")
            with open(self.path(name), "rb") as f:
                self.assertEqual(f.read(5), b"%PDF-")
            info = subprocess.run(["pdfinfo", self.path(name)], capture_output=True, text=True)
            self.assertEqual(info.returncode, 0, info.stderr)
            size = re.search(r"Page size:\s+([0-9.]+) x ([0-9.]+) pts", info.stdout)
            self.assertAlmostEqual(float(size.group(1)), 360, delta=0.6)
            self.assertAlmostEqual(float(size.group(2)), 180, delta=0.6)
            self.assertRegex(info.stdout, r"Pages:\s+1\n")
        for name in ("f.jpg", "f.eps", "f", "f.svg.bak", ".png"):
            line = self.assert_usage_error(run("plot", path, "-o", self.path(name)))
            self.assertIn(".svg, .png or .pdf", line)
            self.assertFalse(os.path.exists(self.path(name)), name)
        # The format is checked first: nothing is read, so a missing input does not hide it.
        line = self.assert_usage_error(run("plot", self.path("missing.json"), "-o",
                                           self.path("f.jpg")))
        self.assertIn(".svg, .png or .pdf", line)

    def test_sizes_presets_and_fonts(self):
        path = self.write("seed.json", seed_like())
        for preset, width in (("column", 3.5), ("page", 7.0)):
            self.plot(path, path, "-o", self.path(preset + ".svg"), "--size", preset)
            svg = svg_summary(self.path(preset + ".svg"))
            self.assertEqual(svg["width_in"], width)
            self.assertAlmostEqual(svg["view"][2], width * 96, delta=0.01)
        self.plot(path, "-o", self.path("wh.svg"), "--width", "4", "--height", "3",
                  "--font-size", "7")
        svg = svg_summary(self.path("wh.svg"))
        self.assertEqual((svg["width_in"], svg["height_in"]), (4.0, 3.0))
        tree = ET.parse(self.path("wh.svg")).getroot()
        label = next(t for t in tree.iter(NS + "text") if cls(t) == "x-label")
        self.assertAlmostEqual(float(label.get("font-size")), 7 * 96 / 72, delta=0.01)
        # Too small for its panels: a usage error naming the options to change.
        line = self.assert_usage_error(run("plot", *[path] * 6, "-o", self.path("tiny.svg"),
                                           "--width", "1", "--height", "1"))
        self.assertIn("--width", line)
        self.assertFalse(os.path.exists(self.path("tiny.svg")))

    def test_png_draws_every_series_where_its_values_say(self):
        models = seed_like(layers=5)
        path = self.write("seed.json", models)
        self.plot(path, "-o", self.path("f.svg"), "--width", "6", "--height", "4")
        self.plot(path, "-o", self.path("f.png"), "--width", "6", "--height", "4", "--dpi", "96")
        svg = svg_summary(self.path("f.svg"))
        png = read_png(self.path("f.png"))
        self.assertEqual((png[0], png[1]), (576, 384))
        panel = svg["panels"][0]
        for model in models:
            drawn = panel["series"][model["label"]]
            self.assertEqual(len(drawn["markers"]), 5)
            for layer, (x, y, shape) in zip(model["layers"], drawn["markers"]):
                self.assertAlmostEqual(x, marker_x(panel, layer["layer"]), delta=0.02)
                self.assertAlmostEqual(y, marker_y(panel, layer["erank"]), delta=0.02)
                got = pixel(png, x, y)
                self.assertTrue(near(got, hex_rgb(drawn["colour"])),
                                f"{model['label']} layer {layer['layer']}: pixel {got} at "
                                f"({x:.1f}, {y:.1f}), expected {drawn['colour']}")
        # The fully-redundant line: dashed grey at value 1.0, and nothing grey a little above it.
        y_one = marker_y(panel, 1.0)
        left, top, width, height = panel["frame"]
        def grey_pixels(y):
            return sum(near(pixel(png, left + width * 0.3 + dx, y + dy), hex_rgb(BASELINE_GREY), 50)
                       for dx in range(40) for dy in (-1, 0, 1))
        self.assertGreater(grey_pixels(y_one), 10)
        self.assertEqual(grey_pixels(y_one - 15), 0)

    # --------------------------------------------------------------- training steps

    def trajectory(self):
        """Two runs (a and b) of 3 layers at steps 0, 100, 300, in one result."""
        models = []
        for run_name, offset, variant, rank in (("a", 0.0, "mha", None), ("b", 2.0, "lrkv", 4)):
            for step in (300, 0, 100):  # out of order: the figure orders by step
                values = [offset + 1 + layer + step / 100 for layer in range(3)]
                models.append(model_entry(f"{run_name}-{step}", values, variant=variant, rank=rank,
                                          path=f"/runs/{run_name}/checkpoint-{step}", step=step))
        return models

    def test_over_steps_layers_mean_and_heatmap(self):
        models = self.trajectory()
        path = self.write("traj.json", models)
        self.plot(path, "-o", self.path("layers.svg"), "--over-steps", "layers")
        svg = svg_summary(self.path("layers.svg"))
        self.assertEqual([p["title"] for p in svg["panels"]], ["a", "b"])
        for panel, offset in zip(svg["panels"], (0.0, 2.0)):
            self.assertEqual(sorted(panel["series"]), ["Layer 0", "Layer 1", "Layer 2"])
            for layer in range(3):
                markers = panel["series"][f"Layer {layer}"]["markers"]
                self.assertEqual(len(markers), 3)
                for (x, y, _), step in zip(markers, (0, 100, 300)):
                    self.assertAlmostEqual(x, marker_x(panel, step), delta=0.02)
                    self.assertAlmostEqual(y, marker_y(panel, offset + 1 + layer + step / 100),
                                           delta=0.02)
        self.assertEqual(svg["legend"], ["Layer 0", "Layer 1", "Layer 2"])

        self.plot(path, "-o", self.path("mean.svg"), "--over-steps", "mean")
        svg = svg_summary(self.path("mean.svg"))
        (panel,) = svg["panels"]
        self.assertEqual(sorted(panel["series"]), ["a", "b"])
        for name, offset in (("a", 0.0), ("b", 2.0)):
            for (x, y, _), step in zip(panel["series"][name]["markers"], (0, 100, 300)):
                self.assertAlmostEqual(y, marker_y(panel, offset + 2 + step / 100), delta=0.02)
        self.assertEqual(panel["series"]["a"]["colour"], PAPER_COLOURS["mha"])

        self.plot(path, "-o", self.path("heat.svg"), "--over-steps", "heatmap")
        svg = svg_summary(self.path("heat.svg"))
        for panel, offset in zip(svg["panels"], (0.0, 2.0)):
            self.assertEqual(len(panel["cells"]), 9)
            for cell in panel["cells"]:
                self.assertAlmostEqual(cell["value"], offset + 1 + cell["layer"] + cell["step"] / 100,
                                       places=5)
            # Brighter (viridis) for larger values: layer 2 at step 300 is the brightest cell.
            brightest = max(panel["cells"], key=lambda c: sum(hex_rgb(c["fill"])))
            if offset:
                self.assertEqual((brightest["layer"], brightest["step"]), (2, 300))
        for mode in ("layers", "mean", "heatmap"):
            self.assert_drawn(*self.plot_both(path, mode, "--over-steps", mode))

    def test_over_steps_needs_steps_and_one_run_per_step(self):
        no_step = self.write("nostep.json", [model_entry("m", [1.0, 2.0])])
        line = self.assert_usage_error(run("plot", no_step, "-o", self.path("x.svg"),
                                           "--over-steps", "layers"))
        self.assertIn("has no training step", line)
        twice = self.write("twice.json", [
            model_entry("x", [1.0], path="/r/a/checkpoint-5", step=5),
            model_entry("y", [2.0], path="/r/a/checkpoint-5/model.safetensors", step=5)])
        line = self.assert_usage_error(run("plot", twice, "-o", self.path("x.svg"),
                                           "--over-steps", "mean"))
        self.assertIn("two checkpoints of step 5", line)
        line = self.assert_usage_error(run("plot", twice, twice, "-o", self.path("x.svg"),
                                           "--over-steps", "mean"))
        self.assertIn("one result file", line)
        self.assertFalse(os.path.exists(self.path("x.svg")))

    def test_analyze_records_the_training_step(self):
        if not os.path.isdir(STEPS_DATA):
            self.skipTest("data/tiny-steps is absent")
        ckpt = os.path.join(STEPS_DATA, "mha", "checkpoint-40")
        doc = harness.analyze_json(ckpt)
        self.assertEqual([m["step"] for m in doc["models"]], [40])
        doc = harness.analyze_json(ckpt, ckpt + "/model.safetensors", "--step", "7")
        self.assertEqual([m["step"] for m in doc["models"]], [7, 40])
        # trainer_state.json beside a checkpoint whose folder name says nothing.
        plain = self.path("final")
        shutil.copytree(ckpt, plain)
        self.assertEqual([m["step"] for m in harness.analyze_json(plain)["models"]], [None])
        with open(os.path.join(plain, "trainer_state.json"), "w", encoding="utf-8") as out:
            json.dump({"global_step": 1234, "epoch": 1.0}, out)
        self.assertEqual([m["step"] for m in harness.analyze_json(plain)["models"]], [1234])
        with open(os.path.join(plain, "trainer_state.json"), "w", encoding="utf-8") as out:
            json.dump({"global_step": -3}, out)
        line = self.assert_usage_error(run("analyze", plain, "--format", "json"))
        self.assertIn("trainer_state.json", line)
        self.assertIn("global_step", line)
        self.assert_usage_error(run("analyze", ckpt, "--step", "1", "--step", "2"))
        self.assert_usage_error(run("analyze", ckpt, "--step", "-1"))

    def test_trajectory_of_the_demo_checkpoints(self):
        if not os.path.isdir(STEPS_DATA):
            self.skipTest("data/tiny-steps is absent")
        checkpoints = sorted(os.path.join(STEPS_DATA, run_, name)
                             for run_ in os.listdir(STEPS_DATA)
                             if os.path.isdir(os.path.join(STEPS_DATA, run_))
                             for name in os.listdir(os.path.join(STEPS_DATA, run_)))
        result = run("analyze", *checkpoints, "--format", "json", "-o", self.path("t.json"), "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(self.path("t.json"), encoding="utf-8") as f:
            doc = json.load(f)
        self.plot(self.path("t.json"), "-o", self.path("t.svg"), "--over-steps", "layers")
        svg = svg_summary(self.path("t.svg"))
        self.assertEqual(sorted(p["title"] for p in svg["panels"]),
                         sorted({m["path"].split("/")[-2] for m in doc["models"]}))
        for panel in svg["panels"]:
            runs = [m for m in doc["models"] if m["path"].split("/")[-2] == panel["title"]]
            runs.sort(key=lambda m: m["step"])
            for layer in range(4):
                markers = panel["series"][f"Layer {layer}"]["markers"]
                self.assertEqual(len(markers), len(runs))
                for (x, y, _), model in zip(markers, runs):
                    self.assertAlmostEqual(x, marker_x(panel, model["step"]), delta=0.02)
                    self.assertAlmostEqual(y, marker_y(panel, model["layers"][layer]["erank"]),
                                           delta=0.02)

    # --------------------------------------------------------------- grids for papers

    def grid_files(self):
        names = ["llama-3-8b-instruct", "mistral-7b-v0.3", "qwen2.5-7b-instruct-long-context",
                 "gemma-2-9b", "phi-3-medium-128k-instruct", "olmo-2-1124-13b",
                 "deepseek-v2-lite-chat", "falcon mamba 7b instruct", "smollm2-1.7b",
                 "granite-3.0-8b-base-checkpoint-at-step-120000"]
        return [self.write(name + ".json",
                           [model_entry("MHA", [3.0 + k + 0.2 * i for i in range(6)]),
                            model_entry("GQA", [2.0 + 0.1 * i for i in range(6)], "gqa")])
                for k, name in enumerate(names)]

    def test_grid_titles_fit_their_panels_and_a_shared_y_axis_is_labelled_once(self):
        if not os.path.exists(DEJAVU):
            self.skipTest("DejaVu Sans is not installed (fonts-dejavu-core)")
        advance = font_advances(DEJAVU)
        files = self.grid_files()
        for size in ("page", "column"):
            figure = self.path(f"grid-{size}.svg")
            self.plot(*files, "--cols", "5", "--share-y", "--size", size, "-o", figure)
            no_nan_coordinates(self, figure)
            root = ET.parse(figure).getroot()
            panels = [g for g in root.iter(NS + "g") if cls(g) == "panel"]
            self.assertEqual(len(panels), 10)
            boxes, frames = [], []
            for panel in panels:
                frame = next(r for r in panel.iter(NS + "rect") if cls(r) == "frame")
                frames.append([float(frame.get(k)) for k in ("x", "y", "width", "height")])
                lines = [t for t in panel.iter(NS + "text") if cls(t) == "panel-title"]
                self.assertIn(len(lines), (1, 2), panel.get("data-title"))
                for line in lines:
                    box = text_box(line, advance)
                    left, top, width, _ = frames[-1]
                    self.assertGreaterEqual(box[0], left - 0.5, line.text)  # within its panel
                    self.assertLessEqual(box[2], left + width + 0.5, line.text)
                    self.assertLessEqual(box[3], top, line.text)  # above its frame
                    boxes.append((panel.get("data-title"), box))
            for i, (title_a, a) in enumerate(boxes):
                for title_b, b in boxes[i + 1:]:
                    self.assertFalse(overlap(a, b), (size, title_a, title_b, a, b))
            self.assertEqual(len({float(t.get("font-size")) for t in root.iter(NS + "text")
                                  if cls(t) == "panel-title"}), 1)  # one title size for all
            x_ticks = [text_box(t, advance) for t in root.iter(NS + "text") if cls(t) == "x-tick"]
            for i, a in enumerate(x_ticks):  # closer panels: tick labels still apart
                self.assertFalse(any(overlap(a, b) for b in x_ticks[i + 1:]), (size, a))
            y_labels = [t for t in root.iter(NS + "text") if cls(t) == "y-label"]
            self.assertEqual(len(y_labels), 1)
            first_column = min(f[0] for f in frames)
            ticks = [t for t in root.iter(NS + "text") if cls(t) == "y-tick"]
            self.assertTrue(ticks)
            for tick in ticks:  # right-aligned just left of the first column's frames
                self.assertLess(float(tick.get("x")), first_column)
            rows = sorted({f[1] for f in frames})
            self.assertEqual(len(rows), 2)
            label_y = float(y_labels[0].get("y"))
            self.assertAlmostEqual(label_y, (rows[0] + rows[1] + frames[-1][3]) / 2, delta=0.5)
        # Without --share-y every panel has its own axis, labelled.
        self.plot(*files, "--cols", "5", "--size", "page", "-o", self.path("own.svg"))
        root = ET.parse(self.path("own.svg")).getroot()
        self.assertEqual(sum(1 for t in root.iter(NS + "text") if cls(t) == "y-label"), 10)

    def test_legend_inside_takes_the_freest_corner_or_the_one_given(self):
        # A line across the top and one low on the right: the bottom-left corner is free.
        path = self.write("corner.json", [model_entry("Top", [8.0] * 8),
                                          model_entry("Falls", [6.0] * 4 + [1.3] * 4, "gqa")])
        def legend_of(*args):
            self.plot(path, "-o", self.path("c.svg"), *args)
            root = ET.parse(self.path("c.svg")).getroot()
            legend = next(g for g in root.iter(NS + "g") if cls(g) == "legend")
            return legend.get("data-panel"), legend.get("data-corner")
        self.assertEqual(legend_of("--legend", "inside"), ("0", "bottom-left"))
        self.assertEqual(legend_of("--legend", "inside:top-right"), ("0", "top-right"))
        self.assertEqual(legend_of("--legend", "inside:bottom-right"), ("0", "bottom-right"))
        svg = svg_summary(self.path("c.svg"))
        left, top, width, height = svg["panels"][0]["frame"]
        x, y, w, h = svg["legend_rect"]
        self.assertLessEqual(x + w, left + width)
        self.assertLessEqual(y + h, top + height)
        self.assertGreater(x, left + width / 2)
        for bad in ("inside:middle", "inside:", "top"):
            line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                               "--legend", bad))
            self.assertEqual(line, "kvrank: error: --legend: expected below, right, inside or "
                             "none (inside:CORNER: top-left, top-right, bottom-left or "
                             f'bottom-right), found "{bad}"')
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"), "--legend",
                                           "inside", "--width", "1.5"))
        self.assertIn("--legend inside: the legend (", line)
        self.assertFalse(os.path.exists(self.path("x.svg")))

    def test_a_single_panel_takes_the_figure_title(self):
        path = self.write("stem.json", [model_entry("M", [2.0, 3.0, 4.0])])
        def titles(*args):
            self.plot(*args, "-o", self.path("t.svg"))
            root = ET.parse(self.path("t.svg")).getroot()
            return ([t.text for t in root.iter(NS + "text") if cls(t) == "figure-title"],
                    [t.text for t in root.iter(NS + "text") if cls(t) == "panel-title"])
        self.assertEqual(titles(path), ([], ["stem"]))
        self.assertEqual(titles(path, "--title", "Rank of M"), (["Rank of M"], []))
        self.assertEqual(titles(f"{path}=128M", "--title", "Rank"), (["Rank"], ["128M"]))
        self.assertEqual(titles(path, path, "--title", "Rank"), (["Rank"], ["stem", "stem"]))
        both = self.write("both.json", [model_entry("M", [2.0, 3.0]),
                                        model_entry("M", [1.0, 1.5], repr_="k")])
        self.assertEqual(titles(both, "--title", "Rank"), (["Rank"], ["qk", "k"]))
        steps = self.write("run.json", [model_entry(f"c{s}", [2.0, 3.0], step=s,
                                                    path=f"/runs/a/checkpoint-{s}")
                                        for s in (10, 20)])
        self.assertEqual(titles(steps, "--over-steps", "mean"), ([], ["run"]))
        self.assertEqual(titles(steps, "--over-steps", "mean", "--title", "Rank"), (["Rank"], []))

    def test_heatmap_heads_in_cluster_order(self):
        # Heads 0, 2, 4, 6 and 1, 3, 5, 7 are near-duplicates: clustered, each group is a block.
        model = model_entry("M", [2.0, 2.0, 2.0])
        for layer in model["layers"]:
            layer["similarity"] = [[1.0 if a == b else 0.9 if a % 2 == b % 2 else 0.1
                                    for b in range(8)] for a in range(8)]
        path = self.write("blocks.json", [model])

        def first_row(*args):
            self.plot(path, "-o", self.path("h.svg"), "--heatmap", "0", *args)
            root = ET.parse(self.path("h.svg")).getroot()
            titles = [t.text for t in root.iter(NS + "title") if t.text.startswith("head 0 ·")]
            return [title.split(" · head ")[1].split(":")[0] for title in titles]
        self.assertEqual(first_row(), [str(h) for h in range(8)])
        self.assertEqual(first_row("--head-order", "cluster"),
                         ["0", "2", "4", "6", "1", "3", "5", "7"])
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                           "--heatmap", "0", "--head-order", "random"))
        self.assertIn("--head-order", line)
        self.assertFalse(os.path.exists(self.path("x.svg")))

    def test_heatmap_colour_map_per_kind_and_errors_that_list_what_exists(self):
        def with_similarity(label, off_diagonal):
            model = model_entry(label, [3.0, 3.5, 4.0])
            heads = 8
            for layer in model["layers"]:
                layer["similarity"] = [[1.0 if a == b else off_diagonal for b in range(heads)]
                                       for a in range(heads)]
            return model
        labels = ["Positive", "Negative"] + [f"model {k}" for k in range(9)]
        path = self.write("sim.json", [with_similarity(label, 0.25 if k != 1 else -0.25)
                                       for k, label in enumerate(labels)])
        def colour_bar(*args):
            self.plot(path, "-o", self.path("h.svg"), "--heatmap", "1", *args)
            root = ET.parse(self.path("h.svg")).getroot()
            bar = next(g for g in root.iter(NS + "g") if cls(g) == "colour-bar")
            texts = [t.text for t in bar.iter(NS + "text") if cls(t) != "colour-bar-label"]
            return bar.get("data-colour-map"), texts[0], texts[-1]
        self.assertEqual(colour_bar("--model", "Positive"), ("rdbu", "-1.0", "1.0"))
        self.assertEqual(colour_bar("--model", "Negative"), ("rdbu", "-1.0", "1.0"))
        self.assertEqual(colour_bar("--model", "Positive", "--colour-map", "viridis"),
                         ("viridis", "0.00", "1.00"))
        self.assertEqual(colour_bar("--model", "Negative", "--colour-map", "greys"),
                         ("greys", "≤ 0.00", "1.00"))
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                           "--heatmap", "7"))
        self.assertEqual(line, f'kvrank: error: {path}: model "Positive" has no layer 7 '
                         "(it has layers 0-2)")
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                           "--heatmap", "1", "--model", "Foo"))
        self.assertEqual(line, f'kvrank: error: {path}: has no model labelled "Foo" (it has '
                         '"Positive", "Negative", "model 0", "model 1", "model 2", "model 3", '
                         '"model 4", "model 5" and 3 more)')
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                           "--heatmap", "1", "--colour-map", "jet"))
        self.assertEqual(line, 'kvrank: error: --colour-map: expected viridis, rdbu or greys, '
                         'found "jet"')
        self.assertFalse(os.path.exists(self.path("x.svg")))
        # Over training steps: viridis unless told otherwise.
        steps = self.write("steps.json", [model_entry(f"c{s}", [2.0 + s / 100, 3.0], step=s,
                                                      path=f"/runs/a/checkpoint-{s}")
                                          for s in (100, 200)])
        for args, expected in (((), "viridis"), (("--colour-map", "greys"), "greys")):
            self.plot(steps, "--over-steps", "heatmap", "-o", self.path("s.svg"), *args)
            root = ET.parse(self.path("s.svg")).getroot()
            bar = next(g for g in root.iter(NS + "g") if cls(g) == "colour-bar")
            self.assertEqual(bar.get("data-colour-map"), expected)

    def test_heatmap_takes_the_size_and_font_size(self):
        # --size/--width/--height size the similarity heatmap and --font-size its text, as for the
        # curves; without them it keeps its own size (360 units of cells, 11-unit head ticks).
        model = model_entry("m", [3.0, 3.5])
        heads = 32
        model.update(heads=heads, kv_heads=heads)
        for layer in model["layers"]:
            layer["heads"] = heads
            layer["similarity"] = [[1.0 if a == b else 0.5 for b in range(heads)]
                                   for a in range(heads)]
        path = self.write("sim32.json", [model])

        def drawn(*args):
            self.plot(path, "-o", self.path("h.svg"), "--heatmap", "1", *args)
            root = ET.parse(self.path("h.svg")).getroot()
            ticks = next(g for g in root.iter(NS + "g") if cls(g) == "head-ticks")
            sizes = {float(t.get("font-size")) for t in ticks.iter(NS + "text")}
            xs = sorted({float(t.get("x")) for t in ticks.iter(NS + "text")
                         if t.get("text-anchor") == "middle"})
            return root.get("width"), sizes, min(b - a for a, b in zip(xs, xs[1:]))
        width, sizes, _ = drawn()
        self.assertEqual((width, sizes), ("5.58in", {11.0}))
        width, sizes, spacing = drawn("--size", "column")  # 3.5 in, 8 pt
        self.assertEqual((width, sizes), ("3.5in", {8.8}))
        self.assertGreater(spacing, 2 * 0.636 * 8.8 + 2)  # two digits and a gap: no overlap
        width, sizes, _ = drawn("--width", "6", "--font-size", "12")
        self.assertEqual((width, sizes), ("6in", {13.2}))
        line = self.assert_usage_error(run("plot", path, "-o", self.path("x.svg"),
                                           "--heatmap", "1", "--width", "1"))
        self.assertEqual(line, f"kvrank: error: {path}: --width/--height: the heatmap's 32 heads "
                         "get 0.00 in beside its labels (at least 0.31 in): give a larger "
                         "--width/--height or a smaller --font-size")
        self.assertFalse(os.path.exists(self.path("x.svg")))

    # --------------------------------------------------------------- edges (issue 39)

    def test_ylim_at_the_limits_of_a_double(self):
        path = self.write("y.json", seed_like())
        wide = "is too wide to draw (HIGH - LOW overflows a double)"
        narrow = "is too narrow to draw (HIGH - LOW must be at least 1e-9 of their size)"
        for ylim, reason in (("-1e308,1e308", wide), ("1,1.0000000000000002", narrow)):
            line = self.assert_usage_error(run("plot", path, "-o", self.path("y.svg"),
                                               f"--ylim={ylim}"))
            self.assertEqual(line, f'kvrank: error: --ylim: "{ylim}" {reason}')
            self.assertFalse(os.path.exists(self.path("y.svg")))
        for ylim in ("1,1.000000001", "1e300,2e300", "0,1e-300", "-1e307,1e307"):
            self.plot(path, "-o", self.path("y.svg"), f"--ylim={ylim}")
            no_nan_coordinates(self, self.path("y.svg"))
            root = ET.parse(self.path("y.svg")).getroot()
            ticks = [t.text for t in root.iter(NS + "text") if cls(t) == "y-tick"]
            self.assertGreaterEqual(len(ticks), 2, ylim)
            self.assertEqual(len(ticks), len(set(ticks)), (ylim, ticks))
            self.assertTrue(all(len(t) <= 14 for t in ticks), ticks)

    def test_steps_near_two_to_the_63_stay_inside_the_panel(self):
        top = 2 ** 63 - 1
        for steps in ([top], [top - 1000, top], [0, top], [top - 5, top - 2, top]):
            path = self.write("big.json", [
                model_entry(f"c{k}", [2.0 + k, 3.0, 2.5], step=s, path=f"/runs/a/checkpoint-{s}")
                for k, s in enumerate(steps)])
            for mode in ("layers", "mean"):
                self.plot(path, "--over-steps", mode, "-o", self.path("big.svg"))
                no_nan_coordinates(self, self.path("big.svg"))
                for panel in svg_summary(self.path("big.svg"))["panels"]:
                    left, top_, width, height = panel["frame"]
                    for series in panel["series"].values():
                        for x, y, _ in series["markers"]:
                            self.assertTrue(left <= x <= left + width, (steps, mode, x))
                            self.assertTrue(top_ <= y <= top_ + height, (steps, mode, y))

    def test_tick_labels_of_long_steps_never_run_into_each_other(self):
        if not os.path.exists(DEJAVU):
            self.skipTest("DejaVu Sans is not installed (fonts-dejavu-core)")
        advance = font_advances(DEJAVU)
        path = self.write("long.json", [
            model_entry(f"c{s}", [2.0 + k / 4, 3.0], step=s, path=f"/runs/a/checkpoint-{s}")
            for k, s in enumerate(range(100_000_000, 900_000_000, 100_000_000))])
        for mode in ("heatmap", "layers", "mean"):
            self.plot(path, "--over-steps", mode, "--size", "column", "-o", self.path("l.svg"))
            root = ET.parse(self.path("l.svg")).getroot()
            boxes = [text_box(t, advance) for t in root.iter(NS + "text") if cls(t) == "x-tick"]
            self.assertGreaterEqual(len(boxes), 2, mode)
            for a, b in zip(boxes, boxes[1:]):
                self.assertFalse(overlap(a, b), (mode, a, b))

    def test_one_label_twice_is_refused_unless_the_steps_tell_them_apart(self):
        twice = self.write("twice.json", [model_entry("A", [2.0, 3.0]),
                                          model_entry("A", [3.0, 4.0])])
        line = self.assert_usage_error(run("plot", twice, "-o", self.path("t.svg")))
        self.assertEqual(line, f'kvrank: error: {twice}: two models labelled "A" with repr qk '
                         "(labels must be unique to be compared)")
        self.assertFalse(os.path.exists(self.path("t.svg")))
        steps = self.write("steps.json", [model_entry("A", [2.0, 3.0], step=100),
                                          model_entry("A", [3.0, 4.0], step=200),
                                          model_entry("A", [1.5, 2.0], repr_="k", step=100)])
        self.plot(steps, "-o", self.path("t.svg"))
        svg = svg_summary(self.path("t.svg"))
        self.assertEqual(sorted(svg["panels"][0]["series"]), ["A (step 100)", "A (step 200)"])
        self.assertEqual(sorted(svg["panels"][1]["series"]), ["A"])
        colours = {s["colour"] for s in svg["panels"][0]["series"].values()}
        self.assertEqual(len(colours), 2)

    # --------------------------------------------------------------- the README gallery

    def test_the_readme_gallery_is_what_the_demo_draws(self):
        out = self.path("demo")
        result = subprocess.run(["bash", os.path.join(harness.SCRIPTS, "demo_figures.sh"),
                                 harness.KVRANK, out], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        img = os.path.join(harness.ROOT, "docs", "img")
        with open(os.path.join(harness.ROOT, "README.md"), encoding="utf-8") as f:
            shown = set(re.findall(r"docs/img/([\w.-]+\.(?:svg|pdf))", f.read()))
        drawn = {name for name in os.listdir(out) if name.endswith((".svg", ".pdf"))}
        self.assertEqual(shown, drawn)
        self.assertEqual({name for name in os.listdir(img) if name.endswith((".svg", ".pdf"))},
                         drawn)
        for name in sorted(drawn):
            ours, theirs = os.path.join(img, name), os.path.join(out, name)
            if name.endswith(".pdf"):
                sizes = [re.search(r"Page size:.*", subprocess.run(
                    ["pdfinfo", path], capture_output=True, text=True).stdout).group(0)
                    for path in (ours, theirs)]
                self.assertEqual(sizes[0], sizes[1], name)
                continue
            a, b = svg_summary(ours), svg_summary(theirs)
            self.assertEqual((a["width_in"], a["height_in"], a["legend"]),
                             (b["width_in"], b["height_in"], b["legend"]), name)
            self.assertEqual(len(a["panels"]), len(b["panels"]), name)
            for pa, pb in zip(a["panels"], b["panels"]):
                self.assertEqual(pa["title"], pb["title"], name)
                self.assertEqual(sorted(pa["series"]), sorted(pb["series"]), name)
                for label, series in pa["series"].items():
                    other = pb["series"][label]
                    self.assertEqual(series["colour"], other["colour"], (name, label))
                    for m, n in zip(series["markers"], other["markers"], strict=True):
                        self.assertAlmostEqual(m[1], n[1], delta=0.05, msg=(name, label))
                for c, d in zip(pa["cells"], pb["cells"], strict=True):
                    self.assertAlmostEqual(c["value"], d["value"], places=4, msg=name)
        # The similarity heatmap keeps its own structure (no panels): compare its cells.
        cells = [[float(r.get("data-value")) for r in ET.parse(os.path.join(d, "heatmap-mqa-layer3.svg"))
                  .getroot().iter(NS + "rect") if cls(r) == "cell"] for d in (img, out)]
        self.assertEqual(len(cells[0]), 64)
        for x, y in zip(*cells, strict=True):
            self.assertAlmostEqual(x, y, places=4)


if __name__ == "__main__":
    for tool in ("rsvg-convert", "pdfinfo"):
        if shutil.which(tool) is None:
            harness.kvrank_from_argv()
            harness.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    harness.main_unittest()
