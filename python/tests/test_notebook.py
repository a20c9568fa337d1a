#!/usr/bin/env python3
"""kvrank in a notebook: examples/kvrank.ipynb runs top to bottom in a Jupyter kernel (nbclient +
ipykernel, as Jupyter runs it) and shows what a user should see — results as an HTML table,
figures as SVG, a DataFrame, a check result; and the display methods themselves: Results and
CheckResult _repr_html_ (escaped), Figure _repr_svg_ with ids of its own per display, plot()
still a str. The notebook's test is skipped without nbclient/ipykernel (Debian:
python3-nbclient, python3-ipykernel).

  python3 python/tests/test_notebook.py build/kvrank   (ctest: python.test_notebook)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

import kvrank  # noqa: E402

NOTEBOOK = os.path.join(ROOT, "examples", "kvrank.ipynb")
TINY = os.path.join(harness.TINY, "gqa")


def outputs(cell):
    """{mime type: data} of a code cell's results (execute_result and display_data)."""
    found = {}
    for output in cell.get("outputs", []):
        if output["output_type"] == "error":
            raise AssertionError(f"the cell raised {output['ename']}: {output['evalue']}")
        found.update(output.get("data", {}))
    return found


class NotebookTest(harness.TestCase):
    def test_the_example_notebook_runs_and_shows_tables_and_figures(self):
        try:
            import nbclient
            import nbformat
        except ImportError:
            self.skipTest("nbclient is not installed (Debian: python3-nbclient)")
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        # ipykernel's debugger warns of frozen modules on every start: not this test's concern.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        nbclient.NotebookClient(notebook, timeout=300, kernel_name=self.this_python_kernel(),
                                resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}
                                ).execute()
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        results, frame, figure, runs, check = (outputs(cell) for cell in code)
        self.assertIn("<table>", results["text/html"])
        self.assertIn("<td>gqa</td>", results["text/html"])
        self.assertIn("erank_mean", frame["text/html"])  # pandas' own table
        for shown in (figure, runs):
            self.assertTrue(shown["image/svg+xml"].lstrip().startswith(("<svg", "<?xml")))
        self.assertEqual(re.findall(r'<g class="legend-entry" data-label="([^"]*)"',
                                    runs["image/svg+xml"]),
                         ["lrkv-r2", "mha"])
        self.assertIn("ok, every layer within tolerance", check["text/html"])

    def this_python_kernel(self):
        """A kernel of this test's Python (a venv's, where kvrank is installed): Debian's
        "python3" kernel would be /usr/bin/python3's."""
        import json

        folder = self.path(os.path.join("jupyter", "kernels", "this-python"))
        os.makedirs(folder)
        with open(os.path.join(folder, "kernel.json"), "w") as f:
            json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                "{connection_file}"],
                       "display_name": "this Python", "language": "python"}, f)
        os.environ["JUPYTER_PATH"] = self.path("jupyter")
        return "this-python"

    def test_results_show_as_tables(self):
        result = kvrank.analyze(TINY, labels=["<b>gqa</b>"], repr="qk,ov")
        shown = result._repr_html_()
        self.assertIn("&lt;b&gt;gqa&lt;/b&gt;", shown)  # labels are escaped
        self.assertNotIn("<b>gqa", shown)
        self.assertEqual(shown.count("<tr>"), 1 + 2 + 1 + 2 * 4)  # heads, 2 summaries, 8 layers
        self.assertIn("kvrank.Results", repr(result))

    def test_check_results_show_as_tables(self):
        current = kvrank.analyze(TINY)
        golden = current.to_dict()
        golden["models"][0]["layers"][1]["erank"] += 0.5
        golden_path = self.path("golden.json")
        kvrank.Results.read(self.save(golden, golden_path))
        found = kvrank.check(current, golden_path)
        shown = found._repr_html_()
        self.assertIn("1 violation(s) beyond tolerance", shown)
        self.assertIn("<td>-0.500</td>", shown)
        self.assertIn("ok", kvrank.check(current, current)._repr_html_())

    def test_figures_display_themselves(self):
        result = kvrank.analyze(TINY, repr="qk,ov")
        figure = kvrank.plot(result)
        self.assertIsInstance(figure, str)  # the SVG text, as plot() has always returned
        self.assertEqual(figure.svg, str(figure))
        first, second = figure._repr_svg_(), figure._repr_svg_()
        ids = [set(re.findall(r'id="([^"]+)"', shown)) for shown in (first, second)]
        self.assertTrue(ids[0] and not ids[0] & ids[1], "two displays share element ids")
        for shown, own in zip((first, second), ids):
            self.assertTrue(set(re.findall(r"url\(#([^)]+)\)", shown)) <= own)
        figure.save(self.path("figure.svg"))
        with open(self.path("figure.svg")) as f:
            self.assertEqual(f.read(), figure)
        self.assertRegex(repr(figure), r"^<kvrank.Figure: SVG, \d+ characters>$")

    def save(self, document, path):
        import json

        with open(path, "w") as f:
            json.dump(document, f)
        return path


if __name__ == "__main__":
    harness.main_unittest()
