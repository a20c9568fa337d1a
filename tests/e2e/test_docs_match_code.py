"""The documents against what they describe, so that a hand copy cannot drift: the README's
synopsis against each subcommand's `--help` (every option in both, the same choices), the field
tables of docs/result-format.md against the JSON Schema they are generated from, its CSV columns
against a CSV written, and every relative link of the README and docs/ (file and heading). The lists of model types, families, reprs and
variants are checked against the library's tables by tests/docs/doc_lists_test.cpp.

Usage: python3 tests/e2e/test_docs_match_code.py path/to/kvrank   (run from the repository root)
"""
import glob
import os
import re
import subprocess

import harness
from harness import run

README = os.path.join(harness.ROOT, "README.md")
DOCS = os.path.join(harness.ROOT, "docs")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def synopsis_blocks():
    """{subcommand: its synopsis text} from the README's Usage block; a shared block of options
    (a line "NAME: …" indented under a command) is added to the commands naming [NAME]."""
    usage = re.search(r"## Usage\n\n```\n(.*?)```", read(README), re.S).group(1)
    commands, shared, current = {}, {}, None
    for line in usage.splitlines():
        command = re.match(r"kvrank (\w+)(.*)", line)
        block = re.match(r"\s+([A-Z][A-Z ]+): (.*)", line)
        if command:
            current = command.group(1)
            commands[current] = command.group(2)
        elif block:
            current = ("shared", block.group(1))
            shared[block.group(1)] = block.group(2)
        elif isinstance(current, tuple):
            shared[current[1]] += " " + line.strip()
        elif current:
            commands[current] += " " + line.strip()
    for name, text in commands.items():
        for block_name, options in shared.items():
            text = text.replace(f"[{block_name}]", options)
        commands[name] = text
    return commands


def options_in_synopsis(text):
    """{option: its value text or None} of a synopsis: "--format table|json" → "table|json"."""
    found = {}
    for match in re.finditer(r"(?<![\w-])(--?[a-zA-Z][\w-]*)(?: ([^\s\[\]]+))?", text):
        value = match.group(2)
        found[match.group(1)] = value if value and not value.startswith("-") else None
    return found


def options_in_help(text):
    """[(aliases, choices or None)] of each option line of CLI11's help: "-o,--output TEXT" →
    ({"-o", "--output"}, None); "--format TEXT:{a,b}" → ({"--format"}, {"a", "b"})."""
    options = []
    for line in text.splitlines():
        match = re.match(r"\s+(-[\w-]+(?:,-[\w-]+)*)(?: (\S+))?", line)
        if not match:
            continue
        aliases = set(match.group(1).split(","))
        choices = re.search(r"\{([^}]*)\}", match.group(2) or "")
        options.append((aliases, set(choices.group(1).split(",")) if choices else None))
    return options


def github_anchor(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class DocsMatchCodeTest(harness.TestCase):
    def test_the_synopsis_lists_every_option_of_each_subcommand_and_no_other(self):
        global_help = run("--help").stdout
        global_options = set().union(*(aliases for aliases, _ in options_in_help(global_help)))
        blocks = synopsis_blocks()
        subcommands = re.findall(r"^  (\w+) {2,}", global_help.split("Subcommands:")[1], re.M)
        self.assertEqual(set(blocks), set(subcommands), "the README's synopsis lists "
                         "the subcommands of `kvrank --help`")
        for name, text in blocks.items():
            result = run(name, "--help")
            self.assertEqual(result.returncode, 0, result.stderr)
            in_help = [(aliases, choices) for aliases, choices in options_in_help(result.stdout)
                       if not aliases & {"-h", "--help"}]
            in_readme = options_in_synopsis(text)
            for aliases, choices in in_help:
                with self.subTest(subcommand=name, option=sorted(aliases)):
                    written = [alias for alias in aliases if alias in in_readme]
                    self.assertTrue(written, "missing from the README's synopsis")
                    value = in_readme[written[0]]
                    if choices and value and "…" not in value:
                        # A comma list's example (--repr qk|ov|k,v) names choices too.
                        self.assertEqual(set(re.split(r"[|,]", value)), choices)
            known = set().union(global_options, *(aliases for aliases, _ in in_help))
            for option in in_readme:
                with self.subTest(subcommand=name, option=option):
                    self.assertIn(option, known, "in the README but not in --help")

    def test_the_field_tables_are_the_schemas(self):
        result = subprocess.run([harness.PYTHON, os.path.join(harness.SCRIPTS,
                                                              "result_format_tables.py"),
                                 "--check"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_the_csv_columns_are_those_written(self):
        documented = re.search(r"## CSV and TSV\n.*?```\n(.*?)```", read(
            os.path.join(DOCS, "result-format.md")), re.S).group(1).replace("\n", "")
        result = run("analyze", os.path.join(harness.TINY, "mha"), "--layers", "0",
                     "--format", "csv", "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[0], documented)

    def test_every_relative_link_resolves(self):
        pages = [README] + sorted(glob.glob(os.path.join(DOCS, "*.md")))
        for page in pages:
            text = re.sub(r"```.*?```", "", read(page), flags=re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) \
                    if path else page
                with self.subTest(page=os.path.relpath(page, harness.ROOT), link=target):
                    self.assertTrue(os.path.exists(resolved), "no such file")
                    if anchor and resolved.endswith(".md"):
                        headings = re.findall(r"^#+ (.*)$", read(resolved), re.M)
                        self.assertIn(anchor, [github_anchor(h) for h in headings])

    def test_the_readme_stays_short_and_its_two_commands_exist(self):
        text = read(README)
        self.assertLessEqual(text.count("\n"), 300)
        self.assertLessEqual(read(os.path.join(DOCS, "performance.md")).count("\n"), 250)
        for script in ("scripts/demo.sh", "scripts/test.sh"):
            self.assertIn(f"```\n{script}\n```", text)
            self.assertTrue(os.access(os.path.join(harness.ROOT, script), os.X_OK))


if __name__ == "__main__":
    harness.main_unittest()
