#!/usr/bin/env python3
"""Vendors the OpenAPI v3 schemas of the built-in Kubernetes kinds keel-apiserver reads.

kube-apiserver publishes one OpenAPI v3 document per group version (`api/openapi-spec/v3` of
the Kubernetes source tree: `api__v1_openapi.json`, `apis__apps__v1_openapi.json`, ...). Their
`components.schemas` carry what keel needs beyond the field names and types: the merge
metadata (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`, `-patch-strategy`,
`-patch-merge-key`), the defaults of list-map keys, enums and descriptions. This takes the
documents of the generally available group versions (no alpha or beta) at a release branch,
merges their `components.schemas` into one table (a definition is the same in every document
that holds it; a difference is an error), and writes it, keys sorted, to
crates/keel-apiserver/openapi/kubernetes.json, which the crate embeds.

    scripts/k8s-openapi.py release-1.34              # fetches from GitHub
    scripts/k8s-openapi.py release-1.34 --from DIR   # a folder of those same files

The release must match the Kubernetes version keel reports (`KUBERNETES_VERSION`).
"""

import argparse
import json
import os
import re
import sys
import urllib.request

OUT = os.path.join(
    os.path.dirname(__file__), "..", "crates", "keel-apiserver", "openapi", "kubernetes.json"
)
RAW = "https://raw.githubusercontent.com/kubernetes/kubernetes/{ref}/api/openapi-spec/v3/{name}"
INDEX = "https://api.github.com/repos/kubernetes/kubernetes/contents/api/openapi-spec/v3?ref={ref}"
# `api__v1_openapi.json`, `apis__<group>__<version>_openapi.json`.
DOCUMENT = re.compile(r"^(api__v1|apis__[^_]+(?:_[^_]+)*__v[0-9]+)_openapi\.json$")
GA = re.compile(r"__v[0-9]+_openapi\.json$")


def is_ga_document(name):
    return bool(DOCUMENT.match(name)) and bool(GA.search(name))


def read_documents(ref, folder):
    if folder:
        names = sorted(n for n in os.listdir(folder) if is_ga_document(n))
        for name in names:
            with open(os.path.join(folder, name)) as f:
                yield name, json.load(f)
        return
    with urllib.request.urlopen(INDEX.format(ref=ref)) as response:
        names = sorted(e["name"] for e in json.load(response) if is_ga_document(e["name"]))
    for name in names:
        with urllib.request.urlopen(RAW.format(ref=ref, name=name)) as response:
            yield name, json.load(response)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="the branch or tag of kubernetes/kubernetes (release-1.34)")
    parser.add_argument("--from", dest="folder", help="read the documents from this folder")
    args = parser.parse_args()
    definitions = {}
    sources = []
    for name, document in read_documents(args.ref, args.folder):
        sources.append(name)
        for key, schema in document["components"]["schemas"].items():
            if key in definitions and definitions[key] != schema:
                sys.exit(f"{key} differs between documents (last seen in {name})")
            definitions[key] = schema
    if not sources:
        sys.exit("no generally available group version documents found")
    out = {
        "kubernetes": args.ref,
        "documents": sources,
        "definitions": definitions,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(definitions)} definitions from {len(sources)} documents -> {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
