"""A rule's sources as links to where they are published: the Neuron documentation's pages (its `.rst` files are
published as `.html` under awsdocs-neuron.readthedocs-hosted.com), a repository's file at a release, an issue.
A source that names no public place (an observation, a portcheck data file) stays text."""

from __future__ import annotations

import re
from dataclasses import dataclass

NEURON_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
_SDK_REPOSITORY = "aws-neuron/aws-neuron-sdk"


@dataclass(frozen=True)
class Link:
    text: str
    url: str | None  # None: no public place to link to


_SDK = re.compile(r"SDK:(?P<path>[\w./-]+)\.(?:rst|txt|md)\b")
_SDK_AT = re.compile(r"SDK@(?P<ref>v[\w.]+):(?P<path>[\w./-]+\.\w+)")
_DOCS = re.compile(r"NeuronDocs:(?P<path>[\w./-]+\.(?:html|rst))")
_GITHUB = re.compile(r"^(?P<path>github\.com/[\w./#-]+)")
_REPOSITORY = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<ref>[\w.-]+))?:(?P<path>[\w./-]+\.\w+)")
_ISSUE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)")
_WEB = re.compile(r"^(?P<host>(?:docs\.pytorch\.org|pytorch\.org|huggingface\.co|docs\.vllm\.ai)/[^\s)]*)")


def source_links(source: str) -> list[Link]:
    """Each `;`-separated part of a rule's source, with the URL it names where it names one."""
    return [Link(part, _url(part)) for part in (p.strip() for p in source.split(";")) if part]


def _url(part: str) -> str | None:
    if match := _SDK.search(part):
        return f"{NEURON_DOCS}{match['path']}.html"
    if match := _SDK_AT.search(part):
        return f"https://github.com/{_SDK_REPOSITORY}/blob/{match['ref']}/{match['path']}"
    if match := _DOCS.search(part):
        path = match["path"].removeprefix("_sources/")
        if path.endswith(".rst"):
            path = path.removesuffix(".rst") + ".html"
        return f"https://awsdocs-neuron.readthedocs-hosted.com/{path}" if path.startswith("en/") else NEURON_DOCS + path
    if match := _GITHUB.match(part):
        return f"https://{match['path']}"
    if match := _ISSUE.match(part):
        return f"https://github.com/{match['repo']}/issues/{match['number']}"
    if (match := _REPOSITORY.match(part)) and not part.startswith(("rules/", "KNOWLEDGE")):
        return f"https://github.com/{match['repo']}/blob/{match['ref'] or 'HEAD'}/{match['path']}"
    if match := _WEB.match(part):
        return f"https://{match['host']}"
    return None


def first_url(source: str) -> str | None:
    """The first published place a source names (SARIF's helpUri, a terminal hyperlink)."""
    return next((link.url for link in source_links(source) if link.url), None)
