#!/usr/bin/env python3
"""The field tables of docs/result-format.md, generated from the JSON Schema of the result file
(docs/schema/kvrank-result.schema.json), which holds the one description of each field and the
schema_version that introduced it (`x-since`).

    scripts/result_format_tables.py           # prints the tables
    scripts/result_format_tables.py --write   # rewrites them in docs/result-format.md
    scripts/result_format_tables.py --check   # exit 1 when the document's tables differ

In the document each table sits between `<!-- BEGIN generated: NAME -->` and
`<!-- END generated: NAME -->` (NAME: model, layer); the text around them is written by hand.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "docs", "schema", "kvrank-result.schema.json")
DOCUMENT = os.path.join(ROOT, "docs", "result-format.md")


def type_text(schema, field):
    """How the table names a field's type: "string or null", "integers", …"""
    if "$ref" in field:
        return type_text(schema, schema["$defs"][field["$ref"].split("/")[-1]])
    if "enum" in field:
        names = [f"`{json.dumps(value)}`" for value in field["enum"] if value is not None]
        names += ["null"] if None in field["enum"] else []
        return ", ".join(names[:-1]) + " or " + names[-1]
    kinds = field["type"] if isinstance(field["type"], list) else [field["type"]]
    if kinds[0] == "array":
        items = field.get("items", {})
        if items.get("type") == "array":
            return "numbers²"
        item_kinds = items.get("type")
        nullable = isinstance(item_kinds, list) and "null" in item_kinds
        item_kind = [k for k in item_kinds if k != "null"][0] if isinstance(item_kinds, list) else item_kinds
        plural = {"number": "numbers", "integer": "integers", "object": "objects"}.get(item_kind, "array")
        plural += " (or null)" if nullable else ""
        kinds = [plural] + kinds[1:]
    return " or ".join(kinds)


def rows(schema, definition, prefix=""):
    """(key, type, since, description) of each field of an object, its nested objects' fields
    (source, options: those whose fields are described one by one) flattened as "source.input"."""
    for key, field in definition["properties"].items():
        inner = field.get("properties", {}).values()
        if inner and all("x-since" in item for item in inner):
            yield from rows(schema, field, prefix + key + ".")
            continue
        kind = type_text(schema, field)
        if key not in definition.get("required", []):
            kind += ", optional"
        yield prefix + key, kind, field["x-since"], field["description"]


def table(schema, name):
    lines = ["| key | type | since | meaning |", "|---|---|---|---|"]
    for key, kind, since, description in rows(schema, schema["$defs"][name]):
        cells = [f"`{key}`", kind, str(since), description]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def block(name):
    return re.compile(r"(<!-- BEGIN generated: %s -->\n)(.*?)(<!-- END generated: %s -->)"
                      % (name, name), re.S)


def with_tables(text, schema):
    for name in ("model", "layer"):
        if not block(name).search(text):
            sys.exit(f"{DOCUMENT}: no <!-- BEGIN generated: {name} --> block")
        text = block(name).sub(lambda m: m.group(1) + table(schema, name) + m.group(3), text)
    return text


def main():
    with open(SCHEMA, encoding="utf-8") as handle:
        schema = json.load(handle)
    if len(sys.argv) == 1:
        sys.stdout.write(table(schema, "model") + "\n" + table(schema, "layer"))
        return 0
    with open(DOCUMENT, encoding="utf-8") as handle:
        text = handle.read()
    wanted = with_tables(text, schema)
    if sys.argv[1] == "--write":
        with open(DOCUMENT, "w", encoding="utf-8") as handle:
            handle.write(wanted)
        return 0
    if sys.argv[1] == "--check":
        if wanted == text:
            return 0
        print(f"{DOCUMENT}: its field tables differ from {SCHEMA}; "
              "run scripts/result_format_tables.py --write", file=sys.stderr)
        return 1
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
